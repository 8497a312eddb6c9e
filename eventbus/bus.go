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
// publishing. Every watcher of a chat receives the same *Event: watchers
// read it and never change it.
package eventbus

import (
	"fmt"
	"hash/maphash"
	"slices"
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

// shardCount splits the bus's table by chat id: a subscription coming or
// going locks its shard alone, so with thousands of chats a publish seldom
// waits behind another chat's watcher.
const shardCount = 64

// Bus routes events to subscribers by chat id. It is safe for concurrent use.
type Bus struct {
	patience time.Duration
	seed     maphash.Seed
	shards   [shardCount]shard
	dropped  atomic.Int64 // deltas not delivered
	ended    atomic.Int64 // subscriptions dropped
	convert  func(any) any
}

// shard holds the watchers of some chats; a chat has few, so a slice.
type shard struct {
	mu   sync.RWMutex
	subs map[string][]*Sub
}

func (b *Bus) shard(chatID string) *shard {
	return &b.shards[maphash.String(b.seed, chatID)%shardCount]
}

// New returns an empty bus whose subscriptions may stay behind (their
// buffer past the delta mark) for at most patience before they are dropped.
// convert, if not nil, turns each event's Data into what watchers read (the
// API's wire form), once per published event that has a watcher.
func New(patience time.Duration, convert func(any) any) *Bus {
	b := &Bus{patience: patience, seed: maphash.MakeSeed(), convert: convert}
	for i := range b.shards {
		b.shards[i].subs = map[string][]*Sub{}
	}
	return b
}

// Sub is one watcher of one chat. Read C until it is closed; then Dropped
// says whether the bus dropped it.
//
// C carries pointers, so a buffer costs 8 bytes a slot, not an Event's 72:
// the HTTP API's 256-event buffer of a turn's stream was 18 KB allocated
// per turn and held while it ran (a fifth of the bytes a turn allocated at
// 10,000 chats). The event is allocated once per publish instead, shared
// by its watchers.
type Sub struct {
	C      <-chan *Event
	c      chan *Event
	bus    *Bus
	chatID string
	mark   int      // deltas are taken while fewer events than this wait
	types  []string // the event types it takes; nil: all

	// turn, when set (OfTurn), is the one turn whose events it takes,
	// besides those of the types anyTurn.
	turn    string
	anyTurn []string

	mu      sync.Mutex // guards the fields below and every send on c
	closed  bool
	behind  time.Time // when a publish first found the buffer past the mark; zero: keeping up
	lastSeq int64
	drop    *Drop
}

// Subscribe watches a chat; buf (at least 1) is the subscription's buffer.
// Given types, the subscription takes events of those types alone: a
// watcher that waits for a turn's end is neither woken by the events before
// it nor dropped for falling behind on them, and an event no watcher takes
// is not converted.
func (b *Bus) Subscribe(chatID string, buf int, types ...string) *Sub {
	buf = max(buf, 1)
	c := make(chan *Event, buf)
	s := &Sub{C: c, c: c, bus: b, chatID: chatID, mark: max(buf-buf/4, 1), types: slices.Clone(types)}
	sh := b.shard(chatID)
	sh.mu.Lock()
	sh.subs[chatID] = append(sh.subs[chatID], s)
	sh.mu.Unlock()
	return s
}

// OfTurn narrows the subscription to the events of one turn, and to those
// of the types anyTurn whatever their turn. A stream of a turn that waits
// behind another of its chat then holds none of that other turn's events:
// nobody reads them while it waits, and they would drop it before its own
// turn starts.
func (s *Sub) OfTurn(turnID string, anyTurn ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turn, s.anyTurn = turnID, slices.Clone(anyTurn)
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
func (s *Sub) offer(ev *Event, must bool, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (s.turn != "" && ev.TurnID != s.turn && !slices.Contains(s.anyTurn, ev.Type)) {
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
	sh := b.shard(s.chatID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// A new slice: a publish may still range over the old one.
	subs := slices.DeleteFunc(slices.Clone(sh.subs[s.chatID]), func(o *Sub) bool { return o == s })
	if len(subs) == 0 {
		delete(sh.subs, s.chatID)
		return
	}
	sh.subs[s.chatID] = subs
}

// Publish delivers a token delta to each watcher that keeps up, dropping it
// for the others.
func (b *Bus) Publish(ev Event) { b.publish(ev, false) }

// PublishMust delivers ev to each watcher; a watcher without room for it is
// dropped (use for everything but deltas). It never waits.
func (b *Bus) PublishMust(ev Event) { b.publish(ev, true) }

func (b *Bus) publish(ev Event, must bool) {
	sh := b.shard(ev.ChatID)
	sh.mu.RLock()
	subs := sh.subs[ev.ChatID]
	sh.mu.RUnlock()
	var shared *Event
	var now time.Time
	var gone []*Sub
	for _, s := range subs {
		if s.types != nil && !slices.Contains(s.types, ev.Type) {
			continue
		}
		if shared == nil {
			if b.convert != nil {
				ev.Data = b.convert(ev.Data)
			}
			// A copy made here, not &ev: that would move every publish's
			// ev to the heap, watched or not.
			shared, now = new(Event), time.Now()
			*shared = ev
		}
		if s.offer(shared, must, now) {
			gone = append(gone, s)
		}
	}
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
	sh := b.shard(chatID)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return len(sh.subs[chatID])
}
