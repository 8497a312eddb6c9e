package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/testkit/pgtest"
)

// Kill harness parameters. AGENTD_KILL_SEED replays another schedule.
const (
	killChats  = 50
	killCount  = 24
	killWindow = 4096
)

// ack is a person's message the daemon acknowledged: its stream delivered
// turn.started, which comes only after the message is durable.
type ack struct {
	content string
	seq     int64
}

// chatLog is what one chat's worker saw.
type chatLog struct {
	id       string
	acks     []ack
	attempts map[string]bool // every content sent, acknowledged or not
	answered atomic.Int64    // turns that ended with an answer (no problem)
}

// tally counts what the workers saw, for the figures.
type tally struct {
	acked, completed, unacked atomic.Int64
	mu                        sync.Mutex
	problems                  map[string]int
}

func (t *tally) problem(kind string) {
	t.mu.Lock()
	t.problems[kind]++
	t.mu.Unlock()
}

// TestKillHarness drives 50 chats against the agentd binary while SIGKILLing
// it at random moments (some inside a fold) and restarting it on the same
// data folder; then every acknowledged message must be stored exactly once,
// in order, with gapless seqs, and every summary boundary must be sound.
// It runs on each store: Badger, and Postgres when AGENTD_TEST_PG_DSN names
// a server (a SIGKILLed daemon then leaves an aborted transaction behind).
func TestKillHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("kill harness: skipped with -short")
	}
	t.Run("badger", func(t *testing.T) { killHarness(t, daemonConfig{}) })
	t.Run("postgres", func(t *testing.T) {
		cfg := daemonConfig{Extra: "store:\n  kind: postgres\n  dsn_env: AGENTD_PG_DSN\n"}
		cfg.Env = []string{"AGENTD_PG_DSN=" + pgtest.DSN(t)}
		killHarness(t, cfg)
	})
}

// killHarness is TestKillHarness on the store cfg configures.
func killHarness(t *testing.T, cfg daemonConfig) {
	seed := uint64(1)
	if s := os.Getenv("AGENTD_KILL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("AGENTD_KILL_SEED=%q: %v", s, err)
		}
		seed = n
	}
	b := newBrain(seed)
	fake := openaifake.New(openaifake.Options{Window: killWindow, Script: b.Script})
	defer fake.Close()
	cfg.FakeURL, cfg.Window = fake.URL(), killWindow
	cfg.Limits = map[string]string{"requests_per_second": "1000000", "model_idle_timeout": "30s"}
	d := newDaemon(t, cfg)
	d.start()

	logs := make([]*chatLog, killChats)
	for i := range logs {
		ctx, cancel := withTimeout(10 * time.Second)
		c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Title: fmt.Sprintf("kill %d", i)})
		cancel()
		if err != nil {
			t.Fatalf("create chat %d: %v", i, err)
		}
		logs[i] = &chatLog{id: c.ID, attempts: map[string]bool{}}
	}

	tl, halt := driveAll([]*api.Client{d.Client}, logs)

	started := time.Now()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	inFold := 0
	for k := range killCount {
		if k%3 == 2 {
			// Aim for a fold: wait until a summarising request is in flight.
			// The wait is generous: on a loaded machine (or a slower store)
			// chats grow long enough to fold only after a while.
			for w := time.Now(); b.folding.Load() == 0 && time.Since(w) < 30*time.Second; {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
		} else {
			time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second))))
		}
		if b.folding.Load() > 0 {
			inFold++
		}
		d.kill()
		d.start()
	}
	// Let every chat finish turns on the last daemon, then stop.
	time.Sleep(2 * time.Second)
	halt()
	elapsed := time.Since(started)

	lost, folded := verify(t, d.Client, logs)
	if n, first := d.panics(); n > 0 {
		t.Errorf("%d panic or race lines in the daemon's logs; first: %s", n, first)
	}
	if n := b.unpaired.Load(); n > 0 {
		t.Errorf("%d requests reached the model with a tool call and result unpaired; first: %s", n, b.firstUnpaired())
	}
	if inFold == 0 {
		t.Errorf("no kill landed during a fold (%d summarising requests in all)", b.summaries.Load())
	}
	store, results := "Badger", "kill"
	if cfg.Env != nil {
		store, results = "Postgres", "kill-postgres"
	}
	fig := fmt.Sprintf(`## Kill harness on %s (TestKillHarness)

Command: `+"`go test -run TestKillHarness -v ./e2e/`"+` (seed %d, %s on %s; Postgres with AGENTD_TEST_PG_DSN set)

| figure | value |
| --- | --- |
| chats | %d |
| SIGKILLs (then restart on the same data folder) | %d |
| kills while a summarising request was in flight | %d |
| messages acknowledged (turn.started seen) | %d |
| turns completed (turn.completed seen) | %d |
| send attempts refused or cut before acknowledgement (mostly while restarting) | %d |
| turn problems seen | %s |
| summarising requests | %d |
| chats with a moved summary boundary at the end | %d |
| acknowledged messages lost or duplicated | %d |
| wall time of the driving phase | %s |
`, store, seed, time.Now().UTC().Format("2006-01-02"), runtimeDesc(), killChats, killCount, inFold, tl.acked.Load(), tl.completed.Load(),
		tl.unacked.Load(), tl.kinds(), b.summaries.Load(), folded, lost, elapsed.Round(time.Second))
	t.Log("\n" + fig)
	if lost == 0 && !t.Failed() {
		writeResults(t, results, fig)
	}
}

// kinds lists the problems seen with their counts, or "none".
func (t *tally) kinds() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	kinds := make([]string, 0, len(t.problems))
	for k, n := range t.problems {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	if len(kinds) == 0 {
		return "none"
	}
	sort.Strings(kinds)
	return strings.Join(kinds, ", ")
}

// driveAll runs drive for every chat until halt, which stops them and
// waits for them (once; later calls return at once).
func driveAll(nodes []*api.Client, logs []*chatLog) (tl *tally, halt func()) {
	var stop atomic.Bool
	tl = &tally{problems: map[string]int{}}
	var wg sync.WaitGroup
	for i, cl := range logs {
		wg.Go(func() { drive(nodes, i, cl, tl, &stop) })
	}
	var once sync.Once
	return tl, func() {
		once.Do(func() {
			stop.Store(true)
			wg.Wait()
		})
	}
}

// drive sends numbered messages to one chat until stop, one at a time,
// recording which were acknowledged and which answered. It starts on node
// i of nodes and, after a send that fails (the node is down or restarting,
// a 503, a stream cut), moves to the next, as a client behind a load
// balancer would.
func drive(nodes []*api.Client, i int, cl *chatLog, tl *tally, stop *atomic.Bool) {
	node := i % len(nodes)
	for n := 0; !stop.Load(); n++ {
		content := fmt.Sprintf("chat %d message %d", i, n)
		if n%4 == 3 {
			content = fmt.Sprintf("chat %d message %d: please calculate 6*7", i, n)
		}
		cl.attempts[content] = true
		acked := false
		ctx, cancel := withTimeout(sendTimeout)
		res, err := nodes[node].Send(ctx, cl.id, api.SendMessageRequest{Content: content}, func(ev api.Event) {
			if ev.Type != chat.EventTurnStarted {
				return
			}
			var d struct {
				UserSeq int64 `json:"user_seq"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			cl.acks = append(cl.acks, ack{content: content, seq: d.UserSeq})
			acked = true
			tl.acked.Add(1)
		})
		cancel()
		switch {
		case err == nil:
			tl.completed.Add(1)
			if res.Problem != nil {
				tl.problem(res.Problem.Kind)
			} else {
				cl.answered.Add(1)
			}
			continue
		case !acked:
			tl.unacked.Add(1)
			var apiErr *api.Error
			if errors.As(err, &apiErr) {
				tl.problem(fmt.Sprintf("http-%d-%s", apiErr.Status, apiErr.Kind))
			}
		}
		node = (node + 1) % len(nodes)
		time.Sleep(20 * time.Millisecond) // the node is restarting, or the chat moving
	}
}

// verify checks every chat's transcript and context against what its worker
// saw. It returns how many acknowledged messages were lost or duplicated and
// how many chats have folded.
func verify(t *testing.T, c *api.Client, logs []*chatLog) (lost, folded int) {
	t.Helper()
	for i, cl := range logs {
		ctx, cancel := withTimeout(30 * time.Second)
		msgs, err := c.Transcript(ctx, cl.id)
		if err != nil {
			cancel()
			t.Fatalf("chat %d transcript: %v", i, err)
		}
		view, err := c.Context(ctx, cl.id)
		cancel()
		if err != nil {
			t.Fatalf("chat %d context: %v", i, err)
		}
		for j, m := range msgs {
			if m.Seq != int64(j+1) {
				t.Errorf("chat %d: message %d has seq %d; seqs must run 1..n without gaps", i, j, m.Seq)
				break
			}
		}
		where := map[string][]int64{}
		for _, m := range msgs {
			if m.Role == api.RoleUser {
				if !cl.attempts[m.Content] {
					t.Errorf("chat %d: stored user message %q was never sent", i, m.Content)
				}
				where[m.Content] = append(where[m.Content], m.Seq)
			}
		}
		prev := int64(0)
		for _, a := range cl.acks {
			seqs := where[a.content]
			if len(seqs) != 1 {
				lost++
				t.Errorf("chat %d: acknowledged %q is stored %d times (at %v)", i, a.content, len(seqs), seqs)
				continue
			}
			if seqs[0] != a.seq || seqs[0] <= prev {
				lost++
				t.Errorf("chat %d: acknowledged %q at seq %d is stored at %d (previous acknowledged at %d)", i, a.content, a.seq, seqs[0], prev)
			}
			prev = seqs[0]
		}
		for content, seqs := range where {
			if len(seqs) > 1 {
				t.Errorf("chat %d: %q is stored %d times", i, content, len(seqs))
			}
		}
		last := int64(len(msgs))
		if view.LastSeq != last {
			t.Errorf("chat %d: context says last seq %d, the transcript has %d", i, view.LastSeq, last)
		}
		switch fk := view.FirstKeptSeq; {
		case fk < 1 || fk > last+1:
			t.Errorf("chat %d: first_kept_seq %d outside 1..%d", i, fk, last+1)
		case fk <= last && msgs[fk-1].Role != api.RoleUser:
			t.Errorf("chat %d: first_kept_seq %d is a %s message, not the person's", i, fk, msgs[fk-1].Role)
		}
		if view.FirstKeptSeq > 1 {
			folded++
			if view.Summary == "" && view.Digest == "" {
				t.Errorf("chat %d: boundary at %d but neither a summary nor a digest covers what is before it", i, view.FirstKeptSeq)
			}
		}
	}
	return lost, folded
}

// runtimeDesc names the machine the figures come from.
func runtimeDesc() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d cores, %s", runtime.NumCPU(), cpu)
}
