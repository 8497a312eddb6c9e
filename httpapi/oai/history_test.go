package oai

import (
	"testing"
	"time"
)

func user(s string) HistoryMessage      { return HistoryMessage{Role: "user", Content: s} }
func assistant(s string) HistoryMessage { return HistoryMessage{Role: "assistant", Content: s} }

func TestStepSeparatesFields(t *testing.T) {
	var zero Digest
	pairs := []struct {
		name string
		a, b HistoryMessage
	}{
		{"bytes moved from role to content", HistoryMessage{Role: "user", Content: "x"}, HistoryMessage{Role: "use", Content: "rx"}},
		{"content vs tool call id", HistoryMessage{Role: "tool", Content: "ab"}, HistoryMessage{Role: "tool", Content: "a", ToolCallID: "b"}},
		{"call name vs arguments", HistoryMessage{Role: "assistant", ToolCalls: []HistoryCall{{ID: "1", Name: "ab", Arguments: "c"}}},
			HistoryMessage{Role: "assistant", ToolCalls: []HistoryCall{{ID: "1", Name: "a", Arguments: "bc"}}}},
		{"one call vs none", HistoryMessage{Role: "assistant", ToolCalls: []HistoryCall{{}}}, HistoryMessage{Role: "assistant"}},
		{"other role", user("hi"), assistant("hi")},
	}
	for _, p := range pairs {
		if Step(zero, p.a) == Step(zero, p.b) {
			t.Errorf("%s: same digest", p.name)
		}
	}
	if a, b := user("hi"), user("hi"); Step(zero, a) != Step(zero, b) {
		t.Error("two equal messages hash differently")
	}
}

func TestChainIsRolling(t *testing.T) {
	h := []HistoryMessage{user("a"), assistant("b"), user("c")}
	c := Chain(h)
	if len(c) != 4 || c[0] != (Digest{}) {
		t.Fatalf("chain of 3 has %d digests, first %x", len(c), c[0])
	}
	for i, m := range h {
		if Step(c[i], m) != c[i+1] {
			t.Errorf("digest %d is not the step of the one before", i+1)
		}
	}
	// Splitting one message into two, or reordering, changes the digest.
	if Chain([]HistoryMessage{user("ab")})[1] == Chain([]HistoryMessage{user("a"), user("b")})[2] {
		t.Error("one message and two share a digest")
	}
	if Chain([]HistoryMessage{user("a"), user("b")})[2] == Chain([]HistoryMessage{user("b"), user("a")})[2] {
		t.Error("order does not count")
	}
}

func TestHistoriesMatch(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := []HistoryMessage{user("hello"), assistant("hi there")}
	second := append(append([]HistoryMessage{}, first...), user("and now?"), assistant("this"))
	type want struct {
		chat  string
		known int
		ok    bool
	}
	cases := []struct {
		name    string
		setup   func(h *Histories)
		tenant  string
		history []HistoryMessage
		at      time.Time
		want    want
	}{
		{"unknown history", func(h *Histories) {}, "t", append(first, user("x")), t0, want{}},
		{"one message appended continues the chat",
			func(h *Histories) { h.Remember("t", "c1", Chain(first)[2], 2, t0) },
			"t", append(first[:2:2], user("next")), t0, want{"c1", 2, true}},
		{"several appended: the known part is the tip",
			func(h *Histories) { h.Remember("t", "c1", Chain(first)[2], 2, t0) },
			"t", append(first[:2:2], user("a"), user("b")), t0, want{"c1", 2, true}},
		{"exactly the tip: nothing new",
			func(h *Histories) { h.Remember("t", "c1", Chain(first)[2], 2, t0) },
			"t", first, t0, want{"c1", 2, true}},
		{"another tenant's history is unknown",
			func(h *Histories) { h.Remember("other", "c1", Chain(first)[2], 2, t0) },
			"t", append(first[:2:2], user("next")), t0, want{}},
		{"a branch from an older point is unknown once the chat moved on",
			func(h *Histories) {
				h.Remember("t", "c1", Chain(first)[2], 2, t0)
				h.Remember("t", "c1", Chain(second)[4], 4, t0)
			},
			"t", append(first[:2:2], user("edited")), t0, want{}},
		{"the newest tip continues",
			func(h *Histories) {
				h.Remember("t", "c1", Chain(first)[2], 2, t0)
				h.Remember("t", "c1", Chain(second)[4], 4, t0)
			},
			"t", append(second[:4:4], user("more")), t0, want{"c1", 4, true}},
		{"the longest known prefix wins",
			func(h *Histories) {
				h.Remember("t", "short", Chain(first)[2], 2, t0)
				h.Remember("t", "long", Chain(second)[4], 4, t0)
			},
			"t", append(second[:4:4], user("more")), t0, want{"long", 4, true}},
		{"a changed old message is another history",
			func(h *Histories) { h.Remember("t", "c1", Chain(second)[4], 4, t0) },
			"t", []HistoryMessage{user("HELLO"), assistant("hi there"), user("and now?"), assistant("this"), user("x")}, t0, want{}},
		{"idle past the bound is forgotten",
			func(h *Histories) { h.Remember("t", "c1", Chain(first)[2], 2, t0) },
			"t", append(first[:2:2], user("next")), t0.Add(historyIdle + time.Second), want{}},
		{"just inside the idle bound is kept",
			func(h *Histories) { h.Remember("t", "c1", Chain(first)[2], 2, t0) },
			"t", append(first[:2:2], user("next")), t0.Add(historyIdle), want{"c1", 2, true}},
		{"the same history answered in two chats: the newest wins",
			func(h *Histories) {
				h.Remember("t", "c1", Chain(first)[2], 2, t0)
				h.Remember("t", "c2", Chain(first)[2], 2, t0)
			},
			"t", append(first[:2:2], user("next")), t0, want{"c2", 2, true}},
		{"a forgotten chat is unknown",
			func(h *Histories) {
				h.Remember("t", "c1", Chain(first)[2], 2, t0)
				h.Forget("c1")
			},
			"t", append(first[:2:2], user("next")), t0, want{}},
		{"a failed history again is its open tip: the chat holds it whole",
			func(h *Histories) {
				h.Remember("t", "c1", Chain(first)[2], 2, t0)
				h.RememberOpen("t", "c1", Chain(append(first[:2:2], user("failed")))[3], 3, t0)
			},
			"t", append(first[:2:2], user("failed")), t0, want{"c1", 3, true}},
		{"something else after a failure continues from the answer's tip",
			func(h *Histories) {
				h.Remember("t", "c1", Chain(first)[2], 2, t0)
				h.RememberOpen("t", "c1", Chain(append(first[:2:2], user("failed")))[3], 3, t0)
			},
			"t", append(first[:2:2], user("instead")), t0, want{"c1", 2, true}},
		{"a new open tip replaces the chat's older one",
			func(h *Histories) {
				h.RememberOpen("t", "c1", Chain(append(first[:2:2], user("failed")))[3], 3, t0)
				h.RememberOpen("t", "c1", Chain(append(first[:2:2], user("failed again")))[3], 3, t0)
			},
			"t", append(first[:2:2], user("failed")), t0, want{}},
		{"an answer drops the open tip",
			func(h *Histories) {
				h.RememberOpen("t", "c1", Chain(append(first[:2:2], user("and now?")))[3], 3, t0)
				h.Remember("t", "c1", Chain(second)[4], 4, t0)
			},
			"t", append(first[:2:2], user("and now?")), t0, want{}},
		{"a forgotten chat's open tip is unknown",
			func(h *Histories) {
				h.RememberOpen("t", "c1", Chain(append(first[:2:2], user("failed")))[3], 3, t0)
				h.Forget("c1")
			},
			"t", append(first[:2:2], user("failed")), t0, want{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := NewHistories(historyTips, historyIdle)
			c.setup(h)
			chat, known, ok := h.Match(c.tenant, Chain(c.history), c.at)
			if (want{chat, known, ok}) != c.want {
				t.Errorf("Match = %q %d %v, want %q %d %v", chat, known, ok, c.want.chat, c.want.known, c.want.ok)
			}
		})
	}
}

func TestHistoriesBoundPerTenant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewHistories(3, time.Hour)
	hist := func(i int) []HistoryMessage { return []HistoryMessage{user(string(rune('a' + i))), assistant("ok")} }
	for i := range 4 {
		h.Remember("t", string(rune('A'+i)), Chain(hist(i))[2], 2, t0.Add(time.Duration(i)*time.Second))
	}
	h.Remember("other", "Z", Chain(hist(9))[2], 2, t0)
	if _, _, ok := h.Match("t", Chain(hist(0)), t0.Add(5*time.Second)); ok {
		t.Error("the least recently used tip past the bound is still kept")
	}
	for i := 1; i < 4; i++ {
		if c, _, ok := h.Match("t", Chain(hist(i)), t0.Add(5*time.Second)); !ok || c != string(rune('A'+i)) {
			t.Errorf("tip %d: %q %v", i, c, ok)
		}
	}
	if c, _, ok := h.Match("other", Chain(hist(9)), t0.Add(5*time.Second)); !ok || c != "Z" {
		t.Errorf("another tenant's tip went with this tenant's bound: %q %v", c, ok)
	}
	// A match counts as a use: B, used last, outlives C and D.
	h.Match("t", Chain(hist(1)), t0.Add(6*time.Second))
	h.Remember("t", "E", Chain(hist(4))[2], 2, t0.Add(7*time.Second))
	h.Remember("t", "F", Chain(hist(5))[2], 2, t0.Add(8*time.Second))
	if c, _, ok := h.Match("t", Chain(hist(1)), t0.Add(9*time.Second)); !ok || c != "B" {
		t.Errorf("the recently matched tip was evicted: %q %v", c, ok)
	}
	if _, _, ok := h.Match("t", Chain(hist(2)), t0.Add(9*time.Second)); ok {
		t.Error("C, least recently used, is still kept")
	}
}

// TestHistoriesAsked: a chat's asked tip, the history its last answer
// answered, is found by MatchAsked alone, exactly, in its tenant; the next
// answer's Remember, and Forget, drop it; Match never finds it, so a
// history continuing from it is unknown.
func TestHistoriesAsked(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	asked := []HistoryMessage{user("hello")}
	answered := append(asked[:1:1], assistant("hi there"))
	h := NewHistories(historyTips, historyIdle)
	h.Remember("t", "c1", Chain(answered)[2], 2, t0)
	h.RememberAsked("t", "c1", Chain(asked)[1], 1, t0)
	if c, n, ok := h.MatchAsked("t", Chain(asked)[1], t0); !ok || c != "c1" || n != 1 {
		t.Fatalf("MatchAsked of the asked history = %q %d %v, want c1 1", c, n, ok)
	}
	if _, _, ok := h.MatchAsked("other", Chain(asked)[1], t0); ok {
		t.Error("another tenant's asked tip was found")
	}
	if _, _, ok := h.MatchAsked("t", Chain(answered)[2], t0); ok {
		t.Error("MatchAsked found the answer's tip")
	}
	if c, _, ok := h.Match("t", Chain(append(asked[:1:1], user("more"))), t0); ok {
		t.Errorf("Match found the asked tip (chat %q): a history continuing from a request is not that chat's", c)
	}
	if c, n, ok := h.Match("t", Chain(answered), t0); !ok || c != "c1" || n != 2 {
		t.Errorf("the answer's tip beside the asked one: %q %d %v", c, n, ok)
	}
	h.Remember("t", "c1", Chain(append(answered[:2:2], user("next"), assistant("ok")))[4], 4, t0)
	if _, _, ok := h.MatchAsked("t", Chain(asked)[1], t0); ok {
		t.Error("the next answer left the old asked tip")
	}
	h.RememberAsked("t", "c1", Chain(asked)[1], 1, t0)
	h.Forget("c1")
	if _, _, ok := h.MatchAsked("t", Chain(asked)[1], t0); ok {
		t.Error("Forget left the asked tip")
	}
	h.RememberAsked("t", "c1", Chain(asked)[1], 1, t0)
	if _, _, ok := h.MatchAsked("t", Chain(asked)[1], t0.Add(historyIdle+time.Second)); ok {
		t.Error("an asked tip idle past historyIdle was found")
	}
}
