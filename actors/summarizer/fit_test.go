package summarizer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/fairshare"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/window"
)

// fitModel answers every request with a short summary, recording it; a
// request whose input (by the project's estimate) is over refuseOver is
// refused the way llama-server refuses.
type fitModel struct {
	mu         sync.Mutex
	reqs       []providers.Request
	refuseOver int
}

func (f *fitModel) Stream(_ context.Context, req providers.Request, _ func(providers.Event)) (providers.Response, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	over := f.refuseOver
	f.mu.Unlock()
	if in := window.EstimateText(req.System) + window.EstimateText(req.Messages[0].Content); over > 0 && in > over {
		body := fmt.Sprintf(`{"error":{"code":400,"message":"request (%d tokens) exceeds the available context size (%d tokens), try increasing it","type":"exceed_context_size_error"}}`, in, over)
		return providers.Response{}, providers.ClassifyHTTPError("llamacpp", 400, body, nil)
	}
	return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: "REMAINING: none. What the person wants: bees."}}, nil
}

func (f *fitModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

type fitCatalog struct {
	model   *fitModel
	window  int
	learned map[string]int
}

func (c *fitCatalog) Resolve(ref string) (providers.Client, providers.ModelInfo, error) {
	_, id, _ := strings.Cut(ref, "/")
	return c.model, providers.ModelInfo{ID: id, Window: c.window}, nil
}
func (c *fitCatalog) SummaryModels(ref string) []string { return []string{ref} }
func (c *fitCatalog) Learn(_ context.Context, ref string, w int) (int, error) {
	c.learned[ref] = w
	c.window = w
	return w, nil
}

// pastedTurns is a chat with large pasted CSV and code.
func pastedTurns(n int) []chat.Message {
	var out []chat.Message
	for i := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "Turn %d, my sales:\nsku,qty,price\n", i)
		for r := range 60 {
			fmt.Fprintf(&b, "SKU-%05d,%d,%d.%02d\n", i*60+r, r%13, r%90, r%100)
		}
		b.WriteString("```go\nfunc total(xs []int) (s int) {\n\tfor _, x := range xs {\n\t\ts += x\n\t}\n\treturn s\n}\n```\n")
		out = append(out, chat.Message{Role: chat.RoleUser, Content: b.String()}, chat.Message{Role: chat.RoleAssistant, Content: "Noted."})
	}
	return out
}

// TestSummariesFitTheWindow: every summarising and condensing request,
// corrected by the chat's factor and with its own max_tokens, fits the
// window of the model it goes to.
func TestSummariesFitTheWindow(t *testing.T) {
	for _, win := range []int{4096, 8192} {
		for _, factor := range []float64{1, 1.6} {
			t.Run(fmt.Sprintf("%d/%v", win, factor), func(t *testing.T) {
				m := &fitModel{}
				cfg := Config{Catalog: &fitCatalog{model: m, window: win, learned: map[string]int{}}, Log: zerolog.Nop()}
				sems := []lane{newLane(fairshare.NewSlots(1, 1), "t")}
				res := run(context.Background(), cfg, &Fold{ChatID: "c", Model: "p/m", Turns: pastedTurns(12), Factor: factor}, []string{"p/m"}, sems)
				if !res.OK {
					t.Fatalf("fold failed: %s", res.Err)
				}
				con := runCondense(context.Background(), cfg, &Condense{ChatID: "c", Model: "p/m", Turn: pastedTurns(6), Factor: factor}, []string{"p/m"}, sems)
				if !con.OK {
					t.Fatalf("condense failed: %s", con.Err)
				}
				cal := window.Calibration{Factor: factor}
				for i, r := range m.reqs {
					raw := window.EstimateText(r.System) + window.EstimateText(r.Messages[0].Content)
					if got := window.OneShotEstimate(raw, cal) + r.MaxTokens; got > win || r.NumCtx != win {
						t.Errorf("request %d: %d tokens with its answer on a %d window (NumCtx %d)", i, got, win, r.NumCtx)
					}
				}
			})
		}
	}
}

// TestSummaryRefusalHeals: a refusal for length teaches the window, and the
// fold goes on with smaller pieces instead of failing.
func TestSummaryRefusalHeals(t *testing.T) {
	m := &fitModel{refuseOver: 1500}
	cat := &fitCatalog{model: m, window: 32_000, learned: map[string]int{}}
	cfg := Config{Catalog: cat, Log: zerolog.Nop()}
	res := run(context.Background(), cfg, &Fold{ChatID: "c", Model: "p/m", Turns: pastedTurns(12)}, []string{"p/m"}, []lane{newLane(fairshare.NewSlots(1, 1), "t")})
	if !res.OK {
		t.Fatalf("fold failed: %s", res.Err)
	}
	if cat.learned["p/m"] != 1500 {
		t.Fatalf("learned %v, want the 1500 the refusal named", cat.learned)
	}
	refused := 0
	for _, r := range m.reqs {
		if window.EstimateText(r.System)+window.EstimateText(r.Messages[0].Content) > 1500 {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d requests over the window; want only the one that taught it", refused)
	}
}

// callModel records requests and answers a tool call to the first one when
// callFirst is set, a summary otherwise.
type callModel struct {
	mu        sync.Mutex
	reqs      []providers.Request
	callFirst bool
}

func (c *callModel) Stream(_ context.Context, req providers.Request, _ func(providers.Event)) (providers.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, req)
	if c.callFirst && len(c.reqs) == 1 {
		return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "x", Name: "t", Arguments: "{}"}}}}, nil
	}
	return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: "What the person wants: bees."}}, nil
}

func (c *callModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

type oneCatalog struct {
	model  providers.Client
	window int
}

func (c oneCatalog) Resolve(ref string) (providers.Client, providers.ModelInfo, error) {
	_, id, _ := strings.Cut(ref, "/")
	return c.model, providers.ModelInfo{ID: id, Window: c.window}, nil
}
func (oneCatalog) SummaryModels(ref string) []string                     { return []string{ref} }
func (oneCatalog) Learn(_ context.Context, _ string, w int) (int, error) { return w, nil }

// TestAFoldAsksTheChatsOwnModelAfterItsOwnRequest: with the chat's request
// prefix and the chat's own model first, one request is the prefix byte for
// byte plus the summariser's question (what the provider caches); another
// model, a prefix too big for the answer's room, or an answer that is no
// summary send the folded turns as lines instead.
func TestAFoldAsksTheChatsOwnModelAfterItsOwnRequest(t *testing.T) {
	framed := window.SummaryOpen + "\nold facts\n" + window.SummaryClose + "\n\nhello"
	prefix := &Prefix{System: "You help.", Tools: []chat.ToolSpec{{Name: "t", Parameters: []byte(`{"type":"object"}`)}},
		Messages: []chat.Message{{Seq: 4, Role: chat.RoleUser, Content: framed}, {Seq: 5, Role: chat.RoleAssistant, Content: "hi"}},
		Tokens:   60, CacheKey: "c"}
	turns := []chat.Message{{Seq: 4, Role: chat.RoleUser, Content: "hello"}, {Seq: 5, Role: chat.RoleAssistant, Content: "hi"}}
	for _, tc := range []struct {
		name       string
		models     []string
		prefix     *Prefix
		callFirst  bool
		wantPrefix bool // the first request is the chat's prefix
		wantReqs   int
	}{
		{"own model", []string{"p/m"}, prefix, false, true, 1},
		{"another model", []string{"p/small"}, prefix, false, false, 1},
		{"no prefix", []string{"p/m"}, nil, false, false, 1},
		{"too big", []string{"p/m"}, &Prefix{System: prefix.System, Messages: prefix.Messages, Tokens: 7000}, false, false, 1},
		{"not a summary", []string{"p/m"}, prefix, true, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &callModel{callFirst: tc.callFirst}
			cfg := Config{Catalog: oneCatalog{model: m, window: 8000}, Log: zerolog.Nop()}
			res := run(context.Background(), cfg, &Fold{ChatID: "c", Model: "p/m", Summary: "old facts", Turns: turns, Prefix: tc.prefix},
				tc.models, []lane{newLane(fairshare.NewSlots(1, 1), "t")})
			if !res.OK || len(m.reqs) != tc.wantReqs || res.Requests != tc.wantReqs {
				t.Fatalf("ok %v (%s), %d requests (reported %d), want %d", res.OK, res.Err, len(m.reqs), res.Requests, tc.wantReqs)
			}
			first, last := m.reqs[0], m.reqs[len(m.reqs)-1]
			if got := first.System == prefix.System; got != tc.wantPrefix {
				t.Fatalf("first request's system %q: the chat's own %v, want %v", first.System, got, tc.wantPrefix)
			}
			if tc.wantPrefix {
				n := len(prefix.Messages)
				if len(first.Messages) != n+1 || first.Messages[0].Content != framed || first.Messages[1].Content != "hi" ||
					len(first.Tools) != 1 || first.CacheKey != "c" {
					t.Fatalf("the request is not the chat's prefix: %+v", first)
				}
				q := first.Messages[n]
				if q.Role != chat.RoleUser || !strings.HasPrefix(q.Content, PrefixMark) || !strings.Contains(q.Content, "summary so far is in") {
					t.Fatalf("the question after the prefix: %+v", q)
				}
			}
			if last.System != prefix.System && (last.System != Instructions || !strings.Contains(last.Messages[0].Content, "old facts")) {
				t.Fatalf("the fallback is not the folded turns as lines: %+v", last)
			}
		})
	}
}

// TestRequestEstimateIsItsWholeText: the estimate a summarising or
// condensing request carries, made from its lines' counts, is the one of
// its whole text read again, on pieces cut whole, halved for the chat's
// correction or squeezed.
func TestRequestEstimateIsItsWholeText(t *testing.T) {
	turns := append(pastedTurns(10), chat.Message{Role: chat.RoleUser, Content: "Größe über ÄÖÜ — «ok»  \n\tindented, 你好 " + strings.Repeat("9f86d081884c7d65 ", 3000)},
		chat.Message{Role: chat.RoleAssistant, Content: "Привет! Noted.", ToolCalls: []chat.ToolCall{{Name: "read_file", Arguments: `{"path":"a.go"}`}}})
	for _, win := range []int{4096, 32768} {
		for _, factor := range []float64{1, 1.6} {
			t.Run(fmt.Sprintf("%d/%v", win, factor), func(t *testing.T) {
				m := &fitModel{}
				cfg := Config{Catalog: &fitCatalog{model: m, window: win, learned: map[string]int{}}, Log: zerolog.Nop()}
				sems := []lane{newLane(fairshare.NewSlots(1, 1), "t")}
				res := run(context.Background(), cfg, &Fold{ChatID: "c", Model: "p/m", Summary: "What the person wants: bees.", Focus: "the SKUs", Turns: turns, Factor: factor}, []string{"p/m"}, sems)
				if !res.OK {
					t.Fatalf("fold failed: %s", res.Err)
				}
				if con := runCondense(context.Background(), cfg, &Condense{ChatID: "c", Model: "p/m", Turn: turns, Factor: factor}, []string{"p/m"}, sems); !con.OK {
					t.Fatalf("condense failed: %s", con.Err)
				}
				cal := window.Calibration{Factor: factor}
				for i, r := range m.reqs {
					want := window.OneShotEstimate(window.EstimateText(r.System)+window.EstimateText(r.Messages[0].Content), cal)
					if r.EstimatedInput != want {
						t.Errorf("request %d of %d: estimated %d, its text %d", i, len(m.reqs), r.EstimatedInput, want)
					}
				}
			})
		}
	}
}
