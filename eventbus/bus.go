// Package eventbus carries each chat's events from its session actor to
// whoever watches (an HTTP stream, the web console). Two delivery classes:
// token deltas are dropped when a watcher lags; everything else is delivered
// with a bounded wait, and drops of either kind are counted.
package eventbus

import (
	"sync"
	"sync/atomic"
	"time"
)

// Event is one event of a chat. Data is JSON-encodable.
type Event struct {
	Type   string
	ChatID string
	TurnID string
	Data   any
}

// Bus routes events to subscribers by chat id. It is safe for concurrent use.
type Bus struct {
	mu      sync.RWMutex
	subs    map[string]map[*Sub]struct{}
	dropped atomic.Int64
	convert func(any) any
}

// New returns an empty bus. convert, if not nil, turns each event's Data
// into what watchers read (the API's wire form), once per published event
// that has a watcher.
func New(convert func(any) any) *Bus {
	return &Bus{subs: map[string]map[*Sub]struct{}{}, convert: convert}
}

// prepare converts ev's data for watchers.
func (b *Bus) prepare(ev Event) Event {
	if b.convert != nil {
		ev.Data = b.convert(ev.Data)
	}
	return ev
}

// Sub is one watcher of one chat. Read C until it is closed by Close.
type Sub struct {
	C      <-chan Event
	c      chan Event
	bus    *Bus
	chatID string
	once   sync.Once
}

// Subscribe watches a chat; buf is the channel's capacity.
func (b *Bus) Subscribe(chatID string, buf int) *Sub {
	c := make(chan Event, buf)
	s := &Sub{C: c, c: c, bus: b, chatID: chatID}
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
	s.once.Do(func() {
		b := s.bus
		b.mu.Lock()
		delete(b.subs[s.chatID], s)
		if len(b.subs[s.chatID]) == 0 {
			delete(b.subs, s.chatID)
		}
		close(s.c)
		b.mu.Unlock()
	})
}

// Publish delivers ev to each watcher that has room, dropping it for the
// others (use for token deltas).
func (b *Bus) Publish(ev Event) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	subs := b.subs[ev.ChatID]
	if len(subs) == 0 {
		return
	}
	ev = b.prepare(ev)
	for s := range subs {
		select {
		case s.c <- ev:
		default:
			b.dropped.Add(1)
		}
	}
}

// PublishMust delivers ev to each watcher, waiting at most wait for each
// one that is full (use for everything but deltas).
func (b *Bus) PublishMust(ev Event, wait time.Duration) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	subs := b.subs[ev.ChatID]
	if len(subs) == 0 {
		return
	}
	ev = b.prepare(ev)
	var timer *time.Timer
	for s := range subs {
		select {
		case s.c <- ev:
			continue
		default:
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case s.c <- ev:
		case <-timer.C:
			b.dropped.Add(1)
		}
	}
}

// Dropped counts events not delivered to a lagging watcher.
func (b *Bus) Dropped() int64 { return b.dropped.Load() }

// Watchers counts subscriptions of a chat.
func (b *Bus) Watchers(chatID string) int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.subs[chatID])
}
