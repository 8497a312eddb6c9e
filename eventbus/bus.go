// Package eventbus carries each chat's events from its session actor to
// whoever watches (an HTTP stream, the web console). A publisher never
// waits for a watcher: every subscription has its own bounded buffer and its
// own patience. Token deltas are dropped for a subscription whose buffer is
// past its delta mark (three quarters full); any other event that finds the
// buffer full, or a subscription that has stayed past the mark for longer
// than its patience, ends that subscription: C closes after the events it
// already holds, and Dropped says why and up to which stored message the
// watcher was told, so it reconnects and catches up from the transcript.
//
// Ownership: the subscriber reads C and calls Close when done; the bus ends
// a subscription only by dropping it. Both are safe concurrently with
// publishing.
package eventbus

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one event of a chat. Data is JSON-encodable. Seq is the chat's
// last stored message when the event was published (0 when unknown).
type Event struct {
	Type   string
	ChatID string
	TurnID string
	Seq    int64
	Data   any
}

// Drop says why the bus ended a subscription. LastSeq is the Seq of the
// last event the subscription received: a watcher catches up with the
// transcript after it.
type Drop struct {
	Reason  string
	LastSeq int64
}

// Bus routes events to subscribers by chat id. It is safe for concurrent use.
type Bus struct {
	patience time.Duration
	mu       sync.RWMutex
	subs     map[string]map[*Sub]struct{}
	dropped  atomic.Int64 // deltas not delivered
	ended    atomic.Int64 // subscriptions dropped
	convert  func(any) any
}

// New returns an empty bus whose subscriptions may stay behind (their
// buffer past the delta mark) for at most patience before they are dropped.
// convert, if not nil, turns each event's Data into what watchers read (the
// API's wire form), once per published event that has a watcher.
func New(patience time.Duration, convert func(any) any) *Bus {
	return &Bus{patience: patience, subs: map[string]map[*Sub]struct{}{}, convert: convert}
}

// Sub is one watcher of one chat. Read C until it is closed; then Dropped
// says whether the bus dropped it.
type Sub struct {
	C      <-chan Event
	c      chan Event
	bus    *Bus
	chatID string
	mark   int // deltas are taken while fewer events than this wait

	mu      sync.Mutex // guards the fields below and every send on c
	closed  bool
	behind  time.Time // when a publish first found the buffer past the mark; zero: keeping up
	lastSeq int64
	drop    *Drop
}

// Subscribe watches a chat; buf (at least 1) is the subscription's buffer.
func (b *Bus) Subscribe(chatID string, buf int) *Sub {
	buf = max(buf, 1)
	c := make(chan Event, buf)
	s := &Sub{C: c, c: c, bus: b, chatID: chatID, mark: max(buf-buf/4, 1)}
	b.mu.Lock()
	if b.subs[chatID] == nil {
		b.subs[chatID] = map[*Sub]struct{}{}
	}
	b.subs[chatID][s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close stops the subscription and closes C.
func (s *Sub) Close() {
	s.mu.Lock()
	s.end(nil)
	s.mu.Unlock()
	s.bus.remove(s)
}

// Dropped returns why the bus ended the subscription, or nil while it runs
// or after Close.
func (s *Sub) Dropped() *Drop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drop
}

// end closes C once; s.mu is held.
func (s *Sub) end(d *Drop) {
	if s.closed {
		return
	}
	s.closed, s.drop = true, d
	close(s.c)
}

// offer hands ev to the subscription without waiting and reports whether
// that dropped it.
func (s *Sub) offer(ev Event, must bool, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	waiting := len(s.c)
	switch {
	case waiting < s.mark:
		s.behind = time.Time{}
	case s.behind.IsZero():
		s.behind = now
	case now.Sub(s.behind) > s.bus.patience:
		s.end(&Drop{Reason: fmt.Sprintf("this watcher stayed %d events behind for over %s", waiting, s.bus.patience), LastSeq: s.lastSeq})
		return true
	}
	switch {
	case waiting < s.mark || (must && waiting < cap(s.c)):
		s.c <- ev // room was checked under s.mu, and only offer sends
		s.lastSeq = ev.Seq
	case must:
		s.end(&Drop{Reason: fmt.Sprintf("this watcher fell %d events behind", waiting), LastSeq: s.lastSeq})
		return true
	default:
		s.bus.dropped.Add(1)
	}
	return false
}

func (b *Bus) remove(s *Sub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs[s.chatID], s)
	if len(b.subs[s.chatID]) == 0 {
		delete(b.subs, s.chatID)
	}
}

// Publish delivers a token delta to each watcher that keeps up, dropping it
// for the others.
func (b *Bus) Publish(ev Event) { b.publish(ev, false) }

// PublishMust delivers ev to each watcher; a watcher without room for it is
// dropped (use for everything but deltas). It never waits.
func (b *Bus) PublishMust(ev Event) { b.publish(ev, true) }

func (b *Bus) publish(ev Event, must bool) {
	now := time.Now()
	var gone []*Sub
	b.mu.RLock()
	subs := b.subs[ev.ChatID]
	if len(subs) > 0 && b.convert != nil {
		ev.Data = b.convert(ev.Data)
	}
	for s := range subs {
		if s.offer(ev, must, now) {
			gone = append(gone, s)
		}
	}
	b.mu.RUnlock()
	for _, s := range gone {
		b.ended.Add(1)
		b.remove(s)
	}
}

// Dropped counts deltas not delivered to a lagging watcher.
func (b *Bus) Dropped() int64 { return b.dropped.Load() }

// DroppedWatchers counts subscriptions the bus ended for lagging.
func (b *Bus) DroppedWatchers() int64 { return b.ended.Load() }

// Watchers counts subscriptions of a chat.
func (b *Bus) Watchers(chatID string) int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.subs[chatID])
}
