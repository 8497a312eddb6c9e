package persistence

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestAFailedBatchAsksAnUnreachableServerOnce: the server stops answering
// (a partition: connections cut, new ones never answered) while the
// writes of many claimed chats wait. Their batch fails, and a failed
// write asks the server whether its chat moved (movedOr) on the
// committer's goroutine; once that question goes unanswered, the batch's
// other writes do not ask it again — each asking held every write behind
// it for a connect timeout, n writes for n of them.
func TestAFailedBatchAsksAnUnreachableServerOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newSilencer(t, u.Host)
	u.Host = p.addr
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	s := openStore(t, u.String())
	ctx := context.Background()
	const n = 12
	for i := range n {
		id := fmt.Sprint("c", i)
		if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Claim(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	p.silence()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		s.AppendThen(ctx, fmt.Sprint("c", i), []chat.Message{user("x")}, func(_ []chat.Message, err error) {
			if err == nil {
				t.Errorf("c%d: an append to a server that does not answer succeeded", i)
			}
			wg.Done()
		})
	}
	wg.Wait()
	// The batches of n writes (a first, and those queued behind it) dial
	// once each to begin and once to ask; a question a write gave n dials.
	if dials := p.held(); dials >= n/2 {
		t.Fatalf("%d writes failed after %d connection attempts to the silent server; want a few for their batches, not one a write", n, dials)
	}
	p.cut() // the dials it holds end, so the store's Close waits for none
}

// silencer forwards connections to a Postgres server until silenced;
// then it cuts those it carries and holds every new one unanswered, as a
// partitioned server does.
type silencer struct {
	addr  string
	mu    sync.Mutex
	quiet bool
	conns []net.Conn
	dials int
}

func newSilencer(t *testing.T, target string) *silencer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silencer{addr: l.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = l.Close()
		p.cut()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if !p.keep(c) {
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil || !p.keep(up) {
				_ = c.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
			wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
		}
	})
	return p
}

// keep tracks c, and says whether to forward it (held unanswered once
// silenced).
func (p *silencer) keep(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
	if p.quiet {
		p.dials++
	}
	return !p.quiet
}

// silence cuts the connections and holds the new ones.
func (p *silencer) silence() {
	p.mu.Lock()
	p.quiet = true
	p.mu.Unlock()
	p.cut()
}

// cut closes every connection p carries or holds.
func (p *silencer) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// held is how many connections came once silenced.
func (p *silencer) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials
}
