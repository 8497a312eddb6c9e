package httpapi_test

// Acceptance tests of issue 5 (the summariser: one rolling summary per chat,
// never blocking) through the whole daemon against the OpenAI-style fake.

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/window"
)

// plantedSecret goes into an early turn; no byte of its secret part may
// reach a summarising request.
const (
	plantedSecret = "sk-proj-abcdefghijklmnopqrstuvwx"
	secretPart    = "abcdefghijklmnopqrstuvwx"
)

var placeholder = regexp.MustCompile(`\[secret-[0-9]+\]`)

func checkNoSecret(t *testing.T, reqs []testkit.Received) {
	t.Helper()
	var sample string
	masked := false
	for i, r := range reqs {
		if bytes.Contains(r.Raw, []byte(secretPart)) {
			t.Fatalf("summarising request %d carries the planted secret", i)
		}
		prompt := lastUser(r) // the instructions name placeholders too
		if at := strings.Index(prompt, "[secret"); at >= 0 && sample == "" {
			sample = prompt[at:min(len(prompt), at+40)]
		}
		masked = masked || placeholder.MatchString(prompt)
	}
	// The turn with the secret was folded: it went masked, as a numbered
	// placeholder that the instructions say to keep.
	if !masked {
		t.Errorf("no summarising request carries a placeholder [secret-N]; the first placeholder-like text seen is %q", sample)
	}
}

// expectedPieces is how many summarising requests the folds seen so far
// should have cost: one per piece of each fold's folded messages, cut for the
// summarising model's window as the summariser's own Pieces does.
func expectedPieces(t *testing.T, d *daemontest.Daemon, chatID string, folds []chat.Compacted, win int) int {
	t.Helper()
	msgs, err := d.Hub.Store().Messages(context.Background(), chatID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, from := 0, int64(1)
	for _, f := range folds {
		var folded []chat.Message
		for _, m := range msgs {
			if m.Seq >= from && m.Seq < f.FirstKeptSeq {
				folded = append(folded, m)
			}
		}
		n += len(summarizer.Pieces(summarizer.Lines(folded, redact.NewMasker()), win, ""))
		from = f.FirstKeptSeq
	}
	return n
}

// A long chat on a small window folds again and again: every turn request
// fits the budget, its size rises turn by turn and drops at each fold; each
// fold costs one summarising request per piece and no more; the chat has one
// summary, the newest, bounded in size; the secret of turn one never reaches
// the summariser.
func TestLongChatFollowsASawtoothUnderTheBudget(t *testing.T) {
	turns := 2000
	if testing.Short() {
		turns = 300
	}
	const win = 8192
	script, summaries := summaryScript()
	fake := openaifake.New(openaifake.Options{Window: win, Script: script})
	defer fake.Close()
	// Badger in memory: this test is about folding, and 4,000 synced
	// writes would make it a disk benchmark.
	cfg := daemontest.Config(t.TempDir(), fake.URL(), win)
	// Turns back to back, as fast as the daemon answers them: more than a
	// tenant's default 200 requests a second on a quiet machine.
	cfg.Limits.RequestsPerSecond = 1e6
	d := daemontest.Start(t, cfg, nil, hub.Options{InMemory: true})
	c := newChat(t, d, "")
	evs := watchChat(t, d, c.ID)

	send(t, d, c.ID, "Before we start: my key is "+plantedSecret+", keep it in mind.")
	for i := 1; i < turns; i++ {
		// About 25 tokens a turn: the budget, not the 600-message bound,
		// makes the first fold, near turn 210.
		send(t, d, c.ID, fmt.Sprintf("Note %d: order %d ships from shelf B-%d to the Porto warehouse by truck.", i, 5000+i, i%40))
	}
	// A background fold may still run after the last turn: wait until every
	// fold applied has had exactly its pieces asked, and no more.
	var folds []chat.Compacted
	waitFor(t, "the summarising requests to match the folds' pieces", func() bool {
		folds = evs.compacted(t)
		return expectedPieces(t, d, c.ID, folds, win) == len(requestsOf(fake, kindSummary))
	})
	sums := requestsOf(fake, kindSummary)
	minFolds := 1
	if !testing.Short() {
		minFolds = 10
	}
	if len(folds) < minFolds {
		v := chatContext(t, d, c.ID)
		t.Logf("context: first kept %d, estimate %d, budget %+v, factor %v, %d summarising requests; last request %d tokens",
			v.FirstKeptSeq, v.Estimate, v.Budget, v.Factor, len(sums), requestsOf(fake, kindTurn)[turns-1].InputTokens)
		t.Fatalf("%d folds in %d turns on an 8K window; want at least %d", len(folds), turns, minFolds)
	}
	seen := map[string]bool{}
	for i, r := range sums {
		if seen[string(r.Raw)] {
			t.Fatalf("summarising request %d repeats an earlier one", i)
		}
		seen[string(r.Raw)] = true
		if r.InputTokens+r.MaxTokens > win {
			t.Fatalf("summarising request %d counts %d+%d tokens on a %d window", i, r.InputTokens, r.MaxTokens, win)
		}
	}
	checkNoSecret(t, sums)

	// The sawtooth: each turn request is bigger than the one before, except
	// right after a fold, where it drops.
	v := chatContext(t, d, c.ID)
	limit := v.Budget.System + v.Budget.Tools + v.Budget.Transcript
	reqs := requestsOf(fake, kindTurn)
	if len(reqs) != turns {
		t.Fatalf("%d turn requests for %d turns", len(reqs), turns)
	}
	drops, peak := 0, 0
	for i, r := range reqs {
		if r.InputTokens > limit {
			t.Errorf("turn request %d counts %d input tokens; the budget is %d", i, r.InputTokens, limit)
		}
		peak = max(peak, r.InputTokens)
		if i == 0 {
			continue
		}
		switch prev := reqs[i-1].InputTokens; {
		case r.InputTokens < prev:
			drops++
		case r.InputTokens == prev:
			t.Errorf("turn request %d is no bigger than the one before (%d tokens)", i, prev)
		}
		// One summary, at the front of the first message, never its own
		// message (the system prompt may name the tag; it is not counted).
		for j, m := range r.Messages {
			if n := strings.Count(m.Content, window.SummaryOpen); n > 1 || (n == 1 && j > 0) {
				t.Fatalf("turn request %d: message %d carries %d summaries", i, j, n)
			}
		}
	}
	// The last fold may land after the last request.
	if drops != len(folds) && drops != len(folds)-1 {
		t.Errorf("%d drops in request size for %d folds", drops, len(folds))
	}
	t.Logf("%d turns, %d folds, %d summarising requests, peak %d of budget %d", turns, len(folds), len(sums), peak, limit)

	// One summary: the newest, replacing the one before, bounded in size.
	newest := fmt.Sprintf("summary number %d", summaries())
	if !strings.Contains(v.Summary, newest) || strings.Contains(v.Summary, fmt.Sprintf("summary number %d\n", summaries()-1)) {
		t.Fatalf("GET /context summary %q; want only the newest (%s)", v.Summary, newest)
	}
	if n := window.EstimateText(v.Summary); n > 3*summarizer.SummaryTarget {
		t.Fatalf("the summary is %d tokens; the bound is %d", n, 3*summarizer.SummaryTarget)
	}
	if v.Digest != "" {
		t.Fatalf("every fold got a summary, yet the digest is %q", v.Digest)
	}
	if v.FirstKeptSeq != folds[len(folds)-1].FirstKeptSeq {
		t.Fatalf("GET /context first kept %d; the last fold said %d", v.FirstKeptSeq, folds[len(folds)-1].FirstKeptSeq)
	}
}

var (
	invoiceRE = regexp.MustCompile(`invoice (\d+)`)
	scanRE    = regexp.MustCompile(`(/srv/invoices/\S+\.pdf)`)
)

// With the summarising model failing or refusing, the chat carries on; the
// folded turns leave the request with their numbers and paths in the digest;
// after three failed folds in a row the chat stops asking for a while.
func TestFailingSummariserLeavesADigestAndNoFoldStorm(t *testing.T) {
	cases := map[string]testkit.Reply{
		"server error": {Status: 500, Body: `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`},
		"refusal":      {Text: "I'm sorry, I can't help with summarising this conversation."},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			const win = 8192
			script := func(r testkit.Received) testkit.Reply {
				switch requestKind(r) {
				case kindSummary:
					return bad
				case kindLearner:
					return testkit.Reply{Text: "[]"}
				}
				return testkit.Reply{Text: "Noted."}
			}
			fake := openaifake.New(openaifake.Options{Window: win, Script: script})
			defer fake.Close()
			d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), win), nil, hub.Options{InMemory: true})
			c := newChat(t, d, "")
			evs := watchChat(t, d, c.ID)
			filler := strings.Repeat("the ledger lists each shipment with its weight and carrier; ", 8)

			send(t, d, c.ID, "Before we start: my key is "+plantedSecret+", keep it in mind.")
			// About 150 tokens a turn: a fold every 15 to 30 turns.
			for i := 1; i < 150; i++ {
				send(t, d, c.ID, fmt.Sprintf("Turn %d: invoice %d is due; the scan is at /srv/invoices/2024/inv-%d.pdf and %s", i, 70000+i, i, filler))
			}
			sums := requestsOf(fake, kindSummary)
			folds := evs.compacted(t)
			t.Logf("%d folds, %d summarising requests", len(folds), len(sums))
			if len(folds) <= 4 {
				t.Fatalf("%d folds in 150 turns; want more than 4 to see the pause", len(folds))
			}
			// One request per failed fold (the first piece fails, the fold
			// stops), three failures in a row, then a pause.
			if len(sums) != 3 {
				t.Fatalf("%d summarising requests over %d failed folds; want 3, then a pause", len(sums), len(folds))
			}
			checkNoSecret(t, sums)
			for i, f := range folds {
				if f.Summary != "" || f.Digest == "" {
					t.Fatalf("fold %d: summary %q digest %q; want no summary and a digest", i, f.Summary, f.Digest)
				}
			}

			// The digest keeps the numbers and paths of the last folded turn.
			v := chatContext(t, d, c.ID)
			msgs, err := d.Client.Transcript(context.Background(), c.ID)
			if err != nil {
				t.Fatal(err)
			}
			var lastFolded api.Message
			for _, m := range msgs {
				if m.Role == api.RoleUser && m.Seq < v.FirstKeptSeq {
					lastFolded = m
				}
			}
			num, path := invoiceRE.FindStringSubmatch(lastFolded.Content), scanRE.FindStringSubmatch(lastFolded.Content)
			if num == nil || path == nil {
				t.Fatalf("the last folded person's message is %q", lastFolded.Content)
			}
			if !strings.Contains(v.Digest, num[1]) || !strings.Contains(v.Digest, path[1]) {
				t.Fatalf("GET /context digest lacks %s or %s:\n%s", num[1], path[1], v.Digest)
			}
			if v.Summary != "" {
				t.Fatalf("no summary was ever written, yet GET /context shows %q", v.Summary)
			}
			// And the model is told: the digest rides in front of the request.
			turns := requestsOf(fake, kindTurn)
			if got, ok := summaryIn(turns[len(turns)-1].Messages[0].Content); !ok || !strings.Contains(got, path[1]) {
				t.Fatalf("the last turn request does not carry the digest's %s in front", path[1])
			}
		})
	}
}

func TestASlowSummariserNeverHoldsATurnPastTheFoldWait(t *testing.T) {
	release := make(chan struct{})
	fake := openaifake.New(openaifake.Options{Window: 4096, Script: func(r testkit.Received) testkit.Reply {
		if r.System == summarizer.Instructions {
			<-release // the summariser is stuck behind other chats
			return testkit.Reply{Text: "What the person wants: the late summary."}
		}
		return testkit.Reply{Text: "ok"}
	}})
	defer fake.Close()
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	defer letGo()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 4096)
	cfg.Limits.FoldWait.Duration = 50 * time.Millisecond
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	sub := d.Hub.Bus().Subscribe(c.ID, 1024)
	defer sub.Close()
	long := strings.Repeat("Order 4417 ships to /srv/out/orders.csv today. ", 40)
	compacted := 0
	for i := 0; compacted == 0; i++ {
		if i > 40 {
			t.Fatal("no fold in 40 turns on a 4K window")
		}
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: long}, nil)
		if err != nil || res.Problem != nil {
			t.Fatal(err, res.Problem)
		}
		for drained := false; !drained; {
			select {
			case ev := <-sub.C:
				if ev.Type == chat.EventCompacted {
					compacted++
				}
			default:
				drained = true
			}
		}
	}
	v, err := d.Client.Context(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Summary != "" || !strings.Contains(v.Digest, "4417") {
		t.Fatalf("while the summary is pending the fold carries the digest: summary %q digest %q", v.Summary, v.Digest)
	}
	letGo() // the summary comes at last
	for ev := range sub.C {
		if ev.Type == chat.EventCompacted && strings.Contains(ev.Data.(api.Compacted).Summary, "late summary") {
			break
		}
	}
	v, _ = d.Client.Context(ctx, c.ID)
	if !strings.Contains(v.Summary, "late summary") || v.Digest != "" {
		t.Fatalf("the late summary was not applied: %q / digest %q", v.Summary, v.Digest)
	}
}
