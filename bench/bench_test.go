package bench

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

func TestReplayIsDeterministicAndPlantsEveryFact(t *testing.T) {
	a, b := NewReplay(5, 400, "sys"), NewReplay(5, 400, "sys")
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two different replays")
	}
	if reflect.DeepEqual(a.Turns, NewReplay(6, 400, "sys").Turns) {
		t.Fatal("another seed gave the same replay")
	}
	kinds := map[string]int{}
	seen := map[string]bool{}
	for _, p := range a.Plants {
		kinds[p.Kind]++
		if seen[p.Text] {
			t.Errorf("plant %q is planted twice", p.Text)
		}
		seen[p.Text] = true
		turn := a.Turns[p.Turn]
		where := turn.User
		if p.InToolResult {
			where = turn.Result
		}
		if !strings.Contains(where, p.Text) {
			t.Errorf("plant %q is not in turn %d", p.Text, p.Turn)
		}
	}
	want := map[string]int{"number": 25, "name": 25, "path": 25, "link": 25, "instruction": 10}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("plants by kind = %v, want %v", kinds, want)
	}
	var tool, foreignTurns, big int
	for i, tr := range a.Turns {
		if TurnOf(tr.User) != i {
			t.Fatalf("turn %d carries tag %d", i, TurnOf(tr.User))
		}
		switch tr.Kind {
		case "tool":
			tool++
			if len(tr.Result) >= 2000 {
				big++
			}
		case "foreign":
			foreignTurns++
		}
	}
	if tool == 0 || foreignTurns == 0 || big != tool {
		t.Fatalf("%d tool turns (%d with large results), %d non-English turns", tool, big, foreignTurns)
	}
}

func TestTurnOf(t *testing.T) {
	cases := map[string]struct {
		text string
		want int
	}{
		"plain":             {"[turn 12] hello", 12},
		"none":              {"hello", -1},
		"summary in front":  {"<earlier-in-this-chat>[turn 3] old</earlier-in-this-chat>\n[turn 40] new", 40},
		"not a number":      {"[turn x] hello", -1},
		"tag inside a text": {"see [turn 7] above", 7},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := TurnOf(tc.text); got != tc.want {
				t.Fatalf("TurnOf(%q) = %d, want %d", tc.text, got, tc.want)
			}
		})
	}
}

func TestStandInSummaryKeepsFactsAndInstructionsWithinItsCap(t *testing.T) {
	text := "Person: [turn 1] The queue is slow today. Always answer in metric units.\n" +
		"Assistant: Sure, I will keep that in mind.\n" +
		"Person: Remember that the contact for this is Ottilie Brandtner. The weather is nice.\n" +
		"Tool result (bench_lookup): NOTE reference https://wiki.example.org/okapi/page-503 recorded for this report\n"
	got := StandInSummary(text)
	for _, want := range []string{"Always answer in metric units.", "Ottilie Brandtner", "https://wiki.example.org/okapi/page-503"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"weather", "queue is slow", "[turn 1]", "keep that in mind"} {
		if strings.Contains(got, not) {
			t.Errorf("summary keeps %q:\n%s", not, got)
		}
	}
	if summarizer.Instructions == "" || !IsSummaryRequest(testkit.Received{System: summarizer.Instructions}) {
		t.Fatal("agentd's summarising request is not recognised")
	}
	if !IsLearnRequest(testkit.Received{System: learner.Instructions}) {
		t.Fatal("agentd's learning request is not recognised")
	}
	peer := testkit.Received{Messages: []chat.Message{{Role: chat.RoleUser, Content: "<role>\nContext Extraction Assistant\n</role> ..."}}}
	if !IsSummaryRequest(peer) {
		t.Fatal("the peer's summarising request is not recognised")
	}
}

// Whatever it is fed, the stand-in summary stays within its cap (plus the
// heading and list marks), and a standing instruction outranks facts: if
// any fact survives, every instruction does.
func TestStandInSummaryBoundedProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rp := NewReplay(rapid.Uint64().Draw(t, "seed"), rapid.IntRange(5, 300).Draw(t, "turns"), "")
		var b strings.Builder
		for _, tr := range rp.Turns {
			b.WriteString("Person: " + tr.User + "\nTool result: " + tr.Result + "\nAssistant: " + tr.Answer + "\n")
		}
		got := StandInSummary(b.String())
		if n := testkit.CountTokens(got); n > SummaryCap+SummaryCap/4 {
			t.Fatalf("summary of %d tokens", n)
		}
		lines := strings.Split(got, "\n")
		var instructionsIn, instructionsPlanted int
		for _, p := range rp.Plants {
			if p.Kind == "instruction" {
				instructionsPlanted++
				if strings.Contains(got, p.Text) {
					instructionsIn++
				}
			}
		}
		if len(lines) > 1+instructionsPlanted && instructionsIn != instructionsPlanted {
			t.Fatalf("facts kept but only %d of %d instructions", instructionsIn, instructionsPlanted)
		}
		var facts []string
		if err := json.Unmarshal([]byte(StandInMemories(b.String())), &facts); err != nil || len(facts) > 20 {
			t.Fatalf("memories %v, %v", facts, err)
		}
	})
}

func TestScriptAnswersATurnAndItsToolRound(t *testing.T) {
	rp := NewReplay(3, 60, "")
	var tool Turn
	for _, tr := range rp.Turns {
		if tr.Kind == "tool" {
			tool = tr
			break
		}
	}
	script := Script(rp)
	first := script(testkit.Received{Messages: []chat.Message{{Role: chat.RoleUser, Content: tool.User}}})
	if len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != ToolName || !strings.Contains(first.ToolCalls[0].Arguments, tool.Report) {
		t.Fatalf("tool turn first reply = %+v", first)
	}
	second := script(testkit.Received{Messages: []chat.Message{{Role: chat.RoleUser, Content: tool.User},
		{Role: chat.RoleAssistant, ToolCalls: first.ToolCalls}, {Role: chat.RoleTool, Content: tool.Result}}})
	if second.Text != tool.Answer || len(second.ToolCalls) != 0 {
		t.Fatalf("after the result the reply is %+v", second)
	}
}

func TestAnalyseCountsEverySideTheSameWay(t *testing.T) {
	rp := NewReplay(9, 10, "")
	fact := rp.Plants[0]
	reqs := []testkit.Received{
		{Messages: []chat.Message{{Role: chat.RoleUser, Content: "[turn 0] hi"}}, InputTokens: 100, MaxTokens: 50},
		{System: summarizer.Instructions, Messages: []chat.Message{{Role: chat.RoleUser, Content: "lines"}}, InputTokens: 400, CachedTokens: 256},
		{System: learner.Instructions, InputTokens: 30},
		{Messages: []chat.Message{{Role: chat.RoleUser, Content: "[turn 1] " + fact.Text}}, InputTokens: 9000, MaxTokens: 10},
	}
	r := &SideResult{Window: 8000}
	analyse(r, reqs, rp, 10)
	want := SideResult{Window: 8000, Sawtooth: [][2]int{{0, 100}, {1, 9000}}, Other: [][2]int{{0, 400}, {0, 30}}, TotalInputTokens: 9530, TurnInputTokens: 9100,
		SummaryInputTokens: 400, LearnInputTokens: 30, Requests: 4, SummaryRequests: 1, LearnRequests: 1,
		LargestRequest: 9000, LargestWithAnswer: 9010, OverWindow: 1,
		// The second chat request's first message is not the first's: a
		// fold, by the order the prompt is read.
		Cache: CacheFigures{PerRequest: [][2]int{{0, 100}, {0, 9000}}, ChatInput: 9100, SummaryInput: 400, SummaryCached: 256, LearnInput: 30,
			Breaks: map[string]int{BreakFold: 1}, BreakUncached: map[string]int{BreakFold: 9000}}}
	f := r.Fidelity
	r.Fidelity = Fidelity{}
	if !reflect.DeepEqual(*r, want) {
		t.Fatalf("analyse = %+v\nwant      %+v", *r, want)
	}
	if inputBefore(r, 1) != 530 || inputBefore(r, 2) != 9530 {
		t.Fatalf("input before turn 1 = %d, before turn 2 = %d", inputBefore(r, 1), inputBefore(r, 2))
	}
	if f.IdentifiersCarried+f.InstructionsCarried != 1 {
		t.Fatalf("the last request carries one planted fact; counted %+v", f)
	}
}

func TestPlotWritesAPictureOfTheSeries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.png")
	pts := [][2]int{{0, 100}, {50, 7000}, {51, 2000}, {100, 6000}}
	if err := PlotSawtooth(path, "test", 8000, []Series{{Name: "agentd", Color: colorAgentd, Points: pts}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	blue, red := 0, 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			switch {
			case r>>8 == 0x1f && g>>8 == 0x77 && bl>>8 == 0xb4:
				blue++
			case r>>8 == 0xd6 && g>>8 == 0x27 && bl>>8 == 0x28:
				red++
			}
		}
	}
	if blue < 500 || red < 100 {
		t.Fatalf("the picture has %d series pixels and %d window pixels", blue, red)
	}
}

func TestQuantiles(t *testing.T) {
	q := quantiles([]float64{5, 1, 4, 2, 3, 100, 6, 7, 8, 9})
	if q.P50 != 6 || q.P99 != 100 || q.Max != 100 || q.N != 10 {
		t.Fatalf("quantiles = %+v", q)
	}
}

func TestBreakReasonNamesTheFirstDifference(t *testing.T) {
	user := chat.Message{Role: chat.RoleUser, Content: "[turn 0] hi"}
	call := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: ToolName, Arguments: "{}"}}}
	result := chat.Message{Role: chat.RoleTool, ToolCallID: "c1", Content: "a long log"}
	prev := testkit.Received{Model: "m", System: "sys", Tools: []string{"a", "b"}, Messages: []chat.Message{user, call, result}}
	stubbed := result
	stubbed.Content = "[tool result of bench_lookup, 10 chars, stubbed — conversation_read …]"
	framed := user
	framed.Content = "<earlier-in-this-chat>…</earlier-in-this-chat>" + user.Content
	with := func(f func(r *testkit.Received)) testkit.Received {
		r := prev
		r.Messages = append(slices.Clone(prev.Messages), chat.Message{Role: chat.RoleUser, Content: "[turn 1] next"})
		f(&r)
		return r
	}
	cases := []struct {
		name string
		cur  testkit.Received
		want string
	}{
		{"extends", with(func(*testkit.Received) {}), ""},
		{"model", with(func(r *testkit.Received) { r.Model = "other" }), BreakModelSwitch},
		{"system", with(func(r *testkit.Received) { r.System = "sys with a new memory" }), BreakMemoryMap},
		{"tools reordered", with(func(r *testkit.Received) { r.Tools = []string{"b", "a"} }), BreakTools},
		{"stub", with(func(r *testkit.Received) { r.Messages[2] = stubbed }), BreakStub},
		{"summary frame", with(func(r *testkit.Received) { r.Messages[0] = framed }), BreakFold},
		{"head dropped", with(func(r *testkit.Received) { r.Messages = r.Messages[3:] }), BreakFold},
	}
	for _, c := range cases {
		if got := breakReason(&prev, &c.cur); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
