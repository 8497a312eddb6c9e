package pgtest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Silencer forwards connections to a Postgres server until silenced;
// then it cuts those it carries and holds every new one unanswered, as a
// partitioned server does.
type Silencer struct {
	addr  string
	mu    sync.Mutex
	quiet bool
	// frozen: the connections it carries stay open, and what is sent on
	// them is read and dropped (Freeze).
	frozen bool
	conns  []net.Conn
	dials  int
	taken  int // connections accepted
	// ready counts the server's ReadyForQuery messages, one a round trip.
	ready int
	// sentOn are the connections on which something was dropped once
	// frozen: a client sent the frozen server something on each.
	sentOn map[net.Conn]bool
	// holdCancels: a new connection that opens with a cancel request is
	// held unanswered (HoldingCancels), the others forwarded; cancels
	// counts those held, cancelsEnded those the client then closed.
	holdCancels           bool
	cancels, cancelsEnded int
	// holding are the cancel requests held (Blip spares them).
	holding map[net.Conn]bool
	// answers, while not nil, holds the server's answers until closed
	// (Stall); asked counts the sends of clients meanwhile.
	answers chan struct{}
	asked   int
	// toCut answers of the server's that cutIf picks are cut in their
	// middle, cutsDone so far (CutMidAnswers, CutAnswersWith).
	toCut, cutsDone int
	cutIf           func(answer []byte) bool
	// cutAfter, when not nil, narrows the cuts to the connections whose
	// client sent it since they were armed (sentAfter, by client side).
	cutAfter  []byte
	sentAfter map[net.Conn]bool
	// atCut, when set, runs as each answer is cut (WhenCut).
	atCut func()
}

// midAnswer is how long an answer CutMidAnswers cuts is at least: longer
// than a connection's start or a statement's preparation.
const midAnswer = 4096

// CutMidAnswers cuts the next n answers of the server's at least
// midAnswer long in their middle: the client is given the first half of
// each, then the connection ends, as a blip does mid-read. cuts says how
// many it cut.
func (p *Silencer) CutMidAnswers(n int) (cuts func() int) {
	return p.CutAnswers(n, func(b []byte) bool { return len(b) >= midAnswer })
}

// CutAnswersWith cuts the next n answers of the server's that hold what
// (a command's tag: "COMMIT") in their middle, as CutMidAnswers does.
func (p *Silencer) CutAnswersWith(n int, what string) (cuts func() int) {
	return p.CutAnswers(n, func(b []byte) bool { return bytes.Contains(b, []byte(what)) })
}

// CutAnswersAfter is CutAnswersWith for the answers on connections whose
// client sent something holding sent (a value one write stores) before
// them: that write's COMMIT, say, rather than whichever write commits
// first.
func (p *Silencer) CutAnswersAfter(n int, sent, what string) (cuts func() int) {
	return p.cutAnswers(n, func(b []byte) bool { return bytes.Contains(b, []byte(what)) }, []byte(sent))
}

// CutAnswers cuts the next n answers of the server's that cutIf picks.
func (p *Silencer) CutAnswers(n int, cutIf func([]byte) bool) (cuts func() int) {
	return p.cutAnswers(n, cutIf, nil)
}

// cutAnswers cuts the next n answers that cutIf picks, on the connections
// whose client sent after (any connection when nil).
func (p *Silencer) cutAnswers(n int, cutIf func([]byte) bool, after []byte) (cuts func() int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toCut, p.cutsDone, p.cutIf, p.cutAfter, p.sentAfter = n, 0, cutIf, after, map[net.Conn]bool{}
	return func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cutsDone
	}
}

// WhenCut runs fn as each answer is cut, before its client is given any
// of it: what fn changes is what a try after the cut reads, and the cut
// try's answer does not hold.
func (p *Silencer) WhenCut(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.atCut = fn
}

// Stall holds the server's answers from now on, until the function it
// returns lets them go: a server slow to answer.
func (p *Silencer) Stall() (resume func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gate := make(chan struct{})
	p.answers, p.asked = gate, 0
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.answers = nil
		close(gate)
	}
}

// AskedWhileStalled is how many sends clients made since Stall.
func (p *Silencer) AskedWhileStalled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked
}

// Accepted is how many connections p took.
func (p *Silencer) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.taken
}

// cancelRequest opens a connection that cancels another's query: its
// length, then this code.
const cancelRequest = 80877102

// HoldingCancels holds every cancel request from now on, unanswered,
// until its client closes it: a server whose cancels go unanswered (a
// partition on the way back, a server restarting) while it takes new
// connections.
func (p *Silencer) HoldingCancels() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdCancels = true
}

// HeldCancels says how many cancel requests p held, and how many of
// them their clients closed since.
func (p *Silencer) HeldCancels() (held, ended int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cancels, p.cancelsEnded
}

// serve forwards c to target, or holds it when it opens with a cancel
// request held (HoldingCancels), until its client closes it.
func (p *Silencer) serve(wg *sync.WaitGroup, c net.Conn, target string) {
	p.mu.Lock()
	sort := p.holdCancels
	p.mu.Unlock()
	var first []byte
	if sort {
		first = make([]byte, 8)
		if _, err := io.ReadFull(c, first); err != nil {
			_ = c.Close()
			return
		}
		if binary.BigEndian.Uint32(first[4:]) == cancelRequest {
			p.mu.Lock()
			p.cancels++
			p.holding[c] = true
			p.mu.Unlock()
			_, _ = io.Copy(io.Discard, c)
			p.mu.Lock()
			p.cancelsEnded++
			p.mu.Unlock()
			return
		}
	}
	up, err := net.Dial("tcp", target)
	if err != nil || !p.keep(up) {
		_ = c.Close()
		return
	}
	if _, err := up.Write(first); err != nil {
		_ = c.Close()
		_ = up.Close()
		return
	}
	wg.Go(func() { p.pipe(up, c, nil) })
	var scan serverScan
	p.pipe(c, up, func(b []byte) { p.countReady(scan.readies(b)) })
}

// serverScan follows the messages of a server's side of the protocol
// (each a type byte and a length), every one typed after startup.
type serverScan struct {
	head []byte // the next message's type and length, as far as read
	body int    // bytes left of the current message
}

// readies scans b, the stream's next bytes, and says how many
// ReadyForQuery ('Z') messages began in it.
func (s *serverScan) readies(b []byte) (n int) {
	for len(b) > 0 {
		if s.body > 0 {
			k := min(s.body, len(b))
			s.body, b = s.body-k, b[k:]
			continue
		}
		k := min(5-len(s.head), len(b))
		s.head, b = append(s.head, b[:k]...), b[k:]
		if len(s.head) == 5 {
			if s.head[0] == 'Z' {
				n++
			}
			s.body, s.head = int(binary.BigEndian.Uint32(s.head[1:]))-4, s.head[:0]
		}
	}
	return n
}

func (p *Silencer) countReady(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready += n
}

// RoundTrips is how many round trips the connections p carried made.
func (p *Silencer) RoundTrips() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// pipe forwards src to dst until either closes, dropping what comes once
// frozen, and shows seen what it forwards; it closes dst when done.
func (p *Silencer) pipe(dst, src net.Conn, seen func([]byte)) {
	defer func() { _ = dst.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		frozen, answers := p.frozen, p.answers
		if frozen && n > 0 {
			p.sentOn[src] = true
		}
		if answers != nil && seen == nil && n > 0 {
			p.asked++
		}
		if p.cutAfter != nil && seen == nil && bytes.Contains(buf[:n], p.cutAfter) {
			p.sentAfter[src] = true
		}
		p.mu.Unlock()
		if answers != nil && seen != nil {
			<-answers // the server's side: held while stalled
		}
		p.mu.Lock()
		cut := p.toCut > 0 && seen != nil && (p.cutAfter == nil || p.sentAfter[dst]) && p.cutIf(buf[:n])
		atCut := p.atCut
		if cut {
			p.toCut, p.cutsDone = p.toCut-1, p.cutsDone+1
		}
		p.mu.Unlock()
		if cut {
			if atCut != nil {
				atCut()
			}
			_, _ = dst.Write(buf[:n/2])
			_ = src.Close()
			return
		}
		if n > 0 && !frozen {
			if seen != nil {
				seen(buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze stops forwarding without closing anything, and holds the new
// connections: a partition, where nothing tells the client the server
// is gone.
func (p *Silencer) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quiet, p.frozen = true, true
}

// Silenced is a test database's DSN (DSN), direct, and reached through a
// Silencer (via): a test cuts or holds what passes through it.
func Silenced(t testing.TB) (p *Silencer, via *url.URL, direct string) {
	t.Helper()
	direct = DSN(t)
	via, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	p = newSilencer(t, via.Host)
	via.Host = p.addr
	return p, via, direct
}

func newSilencer(t testing.TB, target string) *Silencer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Silencer{addr: l.Addr().String(), sentOn: map[net.Conn]bool{}, holding: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = l.Close()
		p.Cut()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.taken++
			p.mu.Unlock()
			if !p.keep(c) {
				continue
			}
			wg.Go(func() { p.serve(&wg, c, target) })
		}
	})
	return p
}

// keep tracks c, and says whether to forward it (held unanswered once
// silenced).
func (p *Silencer) keep(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
	if p.quiet {
		p.dials++
	}
	return !p.quiet
}

// Silence cuts the connections and holds the new ones.
func (p *Silencer) Silence() {
	p.mu.Lock()
	p.quiet = true
	p.mu.Unlock()
	p.Cut()
}

// Resume forwards the new connections again.
func (p *Silencer) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quiet, p.frozen = false, false
}

// Cut closes every connection p carries or holds.
func (p *Silencer) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Blip cuts the connections p forwards, and holds on to the cancel
// requests it holds: a second Blip, with the first one's closes under way.
func (p *Silencer) Blip() {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.conns[:0]
	for _, c := range p.conns {
		if p.holding[c] {
			kept = append(kept, c)
		} else {
			_ = c.Close()
		}
	}
	p.conns = kept
}

// SentOnConns is on how many connections the frozen server was sent
// something it never got.
func (p *Silencer) SentOnConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sentOn)
}

// Held is how many connections came once silenced.
func (p *Silencer) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials
}
