package session

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/chat"
)

// A message sent with an idempotency key (SubmitTurn's Message, or
// AddMessages' Key) is stored, and answered, once however often it comes
// (docs/api.md, "Sending again safely"). The session finds the key among
// the messages waiting their turn, then among the kept messages it holds,
// then, in a chat that has folded, in the rest of its log through the
// store's index of keys (Store.KeyedMessage): a fold moves a message out
// of what the session holds, never out of the log, so a key is known for
// as long as its chat is, across restarts, and only in its own chat.

// keyFound is where a chat's log holds a key: the message stored with it
// and the kept messages after it; m is nil when the log holds none. held:
// the read of the log's tail findKey made took m in unannounced (the log
// ends with it, unanswered): the turn that continues it announces it, with
// its id, as any turn's message; else its finder does (announceTaken).
type keyFound struct {
	m     *chat.Message
	after []chat.Message
	held  bool
	err   error
}

// findKey finds key in the chat's log and hands what it found to then, in
// the session's mailbox: at once when the key is among the kept messages,
// or when nothing was folded (the kept messages are the whole log); else
// once the store has looked it up on a worker, the mailbox held meanwhile
// (await), so nothing of the chat changes before then runs.
func (s *session) findKey(ctx actor.Context, key string, then func(ctx actor.Context, f keyFound)) {
	if s.unsure {
		s.readTailHolding(ctx, key, func(ctx actor.Context, held bool, err error) {
			if err != nil {
				then(ctx, keyFound{err: err})
				return
			}
			s.findKey(ctx, key, func(ctx actor.Context, f keyFound) {
				f.held = held && f.m != nil
				then(ctx, f)
			})
		})
		return
	}
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if s.msgs[i].IdempotencyKey == key {
			then(ctx, keyFound{m: &s.msgs[i], after: s.msgs[i+1:]})
			return
		}
	}
	if s.snap.FirstKeptSeq <= 1 {
		then(ctx, keyFound{})
		return
	}
	store, id := s.deps.Store, s.id
	await(s, ctx, onWorker(s, func() keyFound {
		m, ok, err := store.KeyedMessage(context.Background(), id, key)
		if err != nil || !ok {
			return keyFound{err: err}
		}
		return keyFound{m: &m}
	}), func(ctx actor.Context, f keyFound) {
		if f.m != nil {
			f.after = s.msgs[sort.Search(len(s.msgs), func(i int) bool { return s.msgs[i].Seq > f.m.Seq }):]
		}
		then(ctx, f)
	})
}

// tail is what readTail read.
type tail struct {
	msgs []chat.Message
	err  error
}

// readTail reads what the chat's log holds after the session's last
// message and takes it in, on a worker, the mailbox held (await), once a
// write failed unseen (unsure), or a write landed after messages the
// session did not know of: what landed is then found under its key when
// sent again, not stored a second time, and the next write is numbered
// after it, and the chat's watchers hear of each message, once. then
// hears the read's error; the session stays unsure after one.
func (s *session) readTail(ctx actor.Context, then func(ctx actor.Context, err error)) {
	s.readTailHolding(ctx, "", func(ctx actor.Context, _ bool, err error) { then(ctx, err) })
}

// readTailHolding is readTail that holds back the announcement of a
// person's message under key the log ends with (held): a message sent
// again under its key continues its turn, which announces it.
func (s *session) readTailHolding(ctx actor.Context, key string, then func(ctx actor.Context, held bool, err error)) {
	store, id, from := s.deps.Store, s.id, s.lastSeq+1
	await(s, ctx, onWorker(s, func() tail {
		ms, err := store.Messages(context.Background(), id, from, 0)
		return tail{msgs: ms, err: err}
	}), func(ctx actor.Context, t tail) {
		if t.err != nil {
			then(ctx, false, fmt.Errorf("read the log after a write that failed: %w", t.err))
			return
		}
		s.unsure = false
		held := false
		if ms := slices.DeleteFunc(t.msgs, func(m chat.Message) bool { return m.Seq <= s.lastSeq }); len(ms) > 0 {
			s.log.Warn().Int64("from_seq", ms[0].Seq).Int("messages", len(ms)).Msg("a write reported failed had landed; the session takes its messages in")
			s.appendMsgs(ms...)
			last := ms[len(ms)-1]
			held = key != "" && last.Role == chat.RoleUser && last.IdempotencyKey == key
			if held {
				ms = ms[:len(ms)-1]
			}
			// Announced as stored ones are, which no write announced; the
			// running turn's own messages are its to announce, with its id.
			for _, m := range ms {
				if s.turn != nil && slices.ContainsFunc(s.turn.stored, func(o chat.Message) bool { return o.Seq == m.Seq }) {
					continue
				}
				s.announceTaken(m)
			}
		}
		then(ctx, held, nil)
	})
}

// announceTaken announces m, which a read of the log's tail took in, as a
// stored message is; a turn that continues from it does not again.
func (s *session) announceTaken(m chat.Message) {
	s.publish(storedEvent(m), "", m)
	s.tailAnnounced = append(s.tailAnnounced, m.Seq)
}

// whole runs then once the session holds the chat's whole log: at once,
// or once readTail has read what a write that failed unseen may have
// landed, so the write then makes is numbered after it and a turn's
// context holds it. then hears the read's error.
func (s *session) whole(ctx actor.Context, then func(ctx actor.Context, err error)) {
	if !s.unsure {
		then(ctx, nil)
		return
	}
	s.readTail(ctx, then)
}

// submitKeyed admits p, whose message has an idempotency key, unless the
// chat has seen the key: a message waiting its turn with it is
// ErrKeyInProgress; one stored with it is answered by keyed.
func (s *session) submitKeyed(ctx actor.Context, p pending) {
	key := p.msg.Message.IdempotencyKey
	if slices.ContainsFunc(s.queue, func(q pending) bool { return q.msg.Message.IdempotencyKey == key }) {
		p.refuse(ctx, ErrKeyInProgress)
		return
	}
	s.findKey(ctx, key, func(ctx actor.Context, f keyFound) {
		switch {
		case s.refused(ctx, p): // stopped while the store looked
		case f.err != nil:
			p.refuse(ctx, fmt.Errorf("find the idempotency key: %w", f.err))
		case f.m == nil || !s.keyed(ctx, &p, f):
			s.admit(ctx, p)
		}
		if f.held && !s.continuesFrom(f.m) {
			s.announceTaken(*f.m)
		}
	})
}

// continuesFrom reports whether a turn that runs, or waits its turn,
// continues from m, a person's keyed message, and so announces it.
func (s *session) continuesFrom(m *chat.Message) bool {
	return s.turn != nil && s.turn.userSeq == m.Seq ||
		slices.ContainsFunc(s.queue, func(q pending) bool { return q.continues && q.msg.Message.IdempotencyKey == m.IdempotencyKey })
}

// keyed answers p, whose key the log holds on f.m: a message that says
// otherwise is ErrKeyReused; one whose turn has not said it started, or
// waits for the application's tool results, is ErrKeyInProgress; the
// running turn of one is joined (Joined, then its *TurnAccepted); an
// answered one is *Answered (a message folded out of the kept ones always
// is: a fold keeps the turn that runs, and a person's message after).
// One the log ends with, unanswered (its turn failed), is not answered
// here: p continues it. It reports whether p was answered.
func (s *session) keyed(ctx actor.Context, p *pending, f keyFound) bool {
	if f.m.Role != chat.RoleUser || !sameWords(f.m, &p.msg.Message) {
		p.refuse(ctx, ErrKeyReused)
		return true
	}
	seq := f.m.Seq
	if t := s.turn; t != nil && t.userSeq == seq {
		if t.announced != nil || t.phase == phasePaused {
			p.refuse(ctx, ErrKeyInProgress)
			return true
		}
		if p.msg.Joined != nil {
			p.msg.Joined(t.id)
		}
		ctx.Send(p.sender, &TurnAccepted{TurnID: t.id, UserSeq: seq})
		p.msg.ended()
		return true
	}
	answered := slices.ContainsFunc(f.after, func(m chat.Message) bool { return m.Role == chat.RoleUser }) ||
		len(s.msgs) > 0 && s.msgs[len(s.msgs)-1].Role == chat.RoleAssistant
	switch {
	case !answered && s.turn != nil:
		p.refuse(ctx, ErrKeyInProgress) // a turn runs that answers it
		return true
	case !answered:
		p.continues = true
		return false
	}
	ctx.Send(p.sender, &Answered{UserSeq: seq})
	p.msg.ended()
	return true
}
