package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/tools"
	"github.com/agentd/agentd/window"
)

// memStore keeps chats in memory, as the session sees persistence.
type memStore struct {
	mu    sync.Mutex
	chats map[string]persistence.Chat
	msgs  map[string][]chat.Message
	snaps map[string]persistence.Snapshot
	acts  map[string][]persistence.Activity
	// writes counts the writes that would each be a sync on disk;
	// unsynced the writes that need none.
	writes, unsynced int
	// keyReads counts the look-ups of idempotency keys in the whole log.
	keyReads int
	// synced, when set, is what AppendThen's sync does; committing,
	// when set, runs before AppendThen commits, and its error fails the
	// write with nothing stored; answering is committing for
	// AppendWithSnapshotThen.
	synced, committing, answering func() error
	// lost, when set, runs once a write of messages (Append, AppendThen,
	// AppendUnsynced, AppendWithSnapshotThen) has stored them, and its
	// error fails the write as if nothing were stored: a commit whose
	// answer was lost (Postgres's connection cut mid-answer).
	lost func() error
	// saving, when set, runs before a snapshot's save stores anything.
	saving func()
	// reading, when set, runs before Messages reads, and its error fails
	// the read.
	reading func() error
	// writer runs the writes that report through a then, off the caller,
	// as the store's writer does.
	writer sync.WaitGroup
}

func newMemStore() *memStore {
	return &memStore{chats: map[string]persistence.Chat{}, msgs: map[string][]chat.Message{}, snaps: map[string]persistence.Snapshot{}, acts: map[string][]persistence.Activity{}}
}

func (m *memStore) AppendActivity(_ context.Context, chatID string, a persistence.Activity) (persistence.Activity, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	return m.appendActivityLocked(chatID, a), nil
}

func (m *memStore) AppendActivityUnsynced(_ context.Context, chatID string, a persistence.Activity) (persistence.Activity, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unsynced++
	return m.appendActivityLocked(chatID, a), nil
}

func (m *memStore) appendActivityLocked(chatID string, a persistence.Activity) persistence.Activity {
	a.ID, a.AfterSeq = int64(len(m.acts[chatID])+1), int64(len(m.msgs[chatID]))
	m.acts[chatID] = append(m.acts[chatID], a)
	return a
}

func (m *memStore) Chat(_ context.Context, id string) (persistence.Chat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.chats[id]
	if !ok {
		return c, persistence.ErrNotFound
	}
	return c, nil
}

// Claim: one memStore is one node, the only writer of its chats.
func (m *memStore) Claim(context.Context, string) error { return nil }

func (m *memStore) UpdateChat(_ context.Context, c persistence.Chat) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	m.chats[c.ID] = c
	return nil
}

func (m *memStore) Append(_ context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	stored := m.appendLocked(chatID, msgs)
	if m.lost != nil {
		if err := m.lost(); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

func (m *memStore) AppendThen(_ context.Context, chatID string, msgs []chat.Message, then func([]chat.Message, error)) {
	m.writer.Go(func() {
		m.mu.Lock()
		committing := m.committing
		m.mu.Unlock()
		if committing != nil {
			if err := committing(); err != nil {
				then(nil, err)
				return
			}
		}
		m.mu.Lock()
		m.writes++
		stored, synced, lost := m.appendLocked(chatID, msgs), m.synced, m.lost
		m.mu.Unlock()
		if lost != nil {
			if err := lost(); err != nil {
				then(nil, err)
				return
			}
		}
		var err error
		if synced != nil {
			err = synced()
		}
		then(stored, err)
	})
}

func (m *memStore) AppendUnsynced(_ context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unsynced++
	stored := m.appendLocked(chatID, msgs)
	if m.lost != nil {
		if err := m.lost(); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

func (m *memStore) AppendWithSnapshotThen(_ context.Context, chatID string, snap func(int64) persistence.Snapshot, acts []persistence.Activity, msgs []chat.Message,
	then func([]chat.Message, error)) {
	m.writer.Go(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.writes++
		if m.answering != nil {
			if err := m.answering(); err != nil {
				then(nil, err)
				return
			}
		}
		for _, a := range acts {
			m.appendActivityLocked(chatID, a)
		}
		out := m.appendLocked(chatID, msgs)
		m.snaps[chatID] = snap(out[len(out)-1].Seq)
		if m.lost != nil {
			if err := m.lost(); err != nil {
				then(nil, err)
				return
			}
		}
		then(out, nil)
	})
}

func (m *memStore) appendLocked(chatID string, msgs []chat.Message) []chat.Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Seq = int64(len(m.msgs[chatID]) + 1)
		m.msgs[chatID] = append(m.msgs[chatID], out[i])
	}
	return out
}

func (m *memStore) Messages(_ context.Context, chatID string, from, to int64) ([]chat.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reading != nil {
		if err := m.reading(); err != nil {
			return nil, err
		}
	}
	var out []chat.Message
	for _, msg := range m.msgs[chatID] {
		if msg.Seq >= from && (to == 0 || msg.Seq <= to) {
			out = append(out, msg)
		}
	}
	return out, nil
}

func (m *memStore) KeyedMessage(_ context.Context, chatID, key string) (chat.Message, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keyReads++
	msgs := m.msgs[chatID]
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].IdempotencyKey == key {
			return msgs[i], true, nil
		}
	}
	return chat.Message{}, false, nil
}

func (m *memStore) LoadSnapshot(_ context.Context, chatID string) (persistence.Snapshot, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.snaps[chatID]
	return s, ok, nil
}

func (m *memStore) SaveSnapshot(_ context.Context, chatID string, snap persistence.Snapshot, acts ...persistence.Activity) error {
	return m.saveSnapshot(chatID, snap, acts, &m.writes)
}

func (m *memStore) SaveSnapshotUnsynced(_ context.Context, chatID string, snap persistence.Snapshot, acts ...persistence.Activity) error {
	return m.saveSnapshot(chatID, snap, acts, &m.unsynced)
}

// saveSnapshot saves snap and acts, counted as a write of the kind count
// counts.
func (m *memStore) saveSnapshot(chatID string, snap persistence.Snapshot, acts []persistence.Activity, count *int) error {
	m.mu.Lock()
	saving := m.saving
	m.mu.Unlock()
	if saving != nil {
		saving()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	*count++
	for _, a := range acts {
		m.appendActivityLocked(chatID, a)
	}
	m.snaps[chatID] = snap
	return nil
}

// scripted answers each model call with the next of its replies and keeps
// every request it was sent.
type scripted struct {
	mu      sync.Mutex
	replies []providers.Response
	seen    []providers.Request
}

func (p *scripted) Stream(_ context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, req)
	if len(p.replies) == 0 {
		return providers.Response{}, fmt.Errorf("the script has no reply for call %d", len(p.seen))
	}
	r := p.replies[0]
	p.replies = p.replies[1:]
	emit(providers.Event{Kind: providers.EventText, Text: r.Message.Content})
	return r, nil
}

func (p *scripted) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

func (p *scripted) requests() []providers.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// oneModel is a catalog of one model.
type oneModel struct {
	client providers.Client
	info   providers.ModelInfo
}

func (c oneModel) Resolve(string) (providers.Client, providers.ModelInfo, error) {
	return c.client, c.info, nil
}
func (c oneModel) Learn(_ context.Context, _ string, w int) (int, error) { return w, nil }
func (c oneModel) Bigger(int) (string, int, bool)                        { return "", 0, false }
func (c oneModel) Default(string) string                                 { return "fake/m" }

type fixedPrompt string

func (p fixedPrompt) System(string, bool) string { return string(p) }

// harness runs a session registry over fakes.
type harness struct {
	t        *testing.T
	system   *actor.ActorSystem
	registry *actor.PID
	store    *memStore
	bus      *eventbus.Bus
	model    *scripted
}

func newHarness(t *testing.T, window int, reg *tools.Registry, replies ...providers.Response) *harness {
	t.Helper()
	return newHarnessWith(t, window, reg, func(*harness, *Deps) {}, replies...)
}

// newHarnessWith is newHarness with its deps changed by set.
func newHarnessWith(t *testing.T, window int, reg *tools.Registry, set func(*harness, *Deps), replies ...providers.Response) *harness {
	t.Helper()
	h := &harness{t: t, system: actor.NewActorSystem(), store: newMemStore(), bus: eventbus.New(time.Second, nil), model: &scripted{replies: replies}}
	if reg == nil {
		reg = tools.NewRegistry()
	}
	deps := &Deps{
		Store: h.store, Catalog: oneModel{client: h.model, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: window}},
		Tools: reg, Bus: h.bus, Prompts: fixedPrompt("You help."), Log: zerolog.Nop(),
		DefaultModel: "fake/m", IdleAfter: time.Hour, TurnsPerChat: 4, ToolTimeout: time.Minute, ToolResultBytes: 16 << 10,
		TurnTimeout: time.Minute, ModelIdle: time.Minute, FoldWait: time.Minute,
	}
	set(h, deps)
	h.registry = h.system.Root.Spawn(Props(deps))
	t.Cleanup(func() {
		// The sessions stopped, no write comes: those under way end.
		_ = h.system.Root.StopFuture(h.registry).Wait()
		h.store.writer.Wait()
	})
	h.store.chats["c1"] = persistence.Chat{ID: "c1", Tenant: "t1", Model: "fake/m"}
	return h
}

// turn submits text and returns the turn's result and the events it caused.
// holdSaves holds every snapshot save until release: held takes one
// value as each save starts. The test's cleanup releases them first, so a
// failed test leaves no write held.
func (h *harness) holdSaves(t *testing.T) (held <-chan struct{}, release func()) {
	c, gate := make(chan struct{}, 1), make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	h.store.mu.Lock()
	h.store.saving = func() { c <- struct{}{}; <-gate }
	h.store.mu.Unlock()
	return c, release
}

func (h *harness) turn(text string) (chat.TurnResult, []eventbus.Event) {
	h.t.Helper()
	return h.submit(&SubmitTurn{TurnID: "t-" + text, Message: chat.Message{Content: text}})
}

// submit sends m to chat c1 and returns its turn's result and events.
func (h *harness) submit(m *SubmitTurn) (chat.TurnResult, []eventbus.Event) {
	h.t.Helper()
	return h.submitTo("c1", m)
}

// submitTo is submit to chat chatID.
func (h *harness) submitTo(chatID string, m *SubmitTurn) (chat.TurnResult, []eventbus.Event) {
	h.t.Helper()
	sub := h.bus.Subscribe(chatID, 1024)
	defer sub.Close()
	res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: chatID, Msg: m}, time.Minute).Result()
	if err != nil {
		h.t.Fatalf("submit: %v", err)
	}
	if r, ok := res.(*Rejected); ok {
		h.t.Fatalf("submit rejected: %v", r.Err)
	}
	var evs []eventbus.Event
	for ev := range sub.C {
		evs = append(evs, *ev)
		if ev.Type == chat.EventTurnCompleted {
			return ev.Data.(chat.TurnResult), evs
		}
	}
	h.t.Fatal("the event stream closed before the turn completed")
	return chat.TurnResult{}, nil
}

func reply(text string) providers.Response {
	return providers.Response{Message: chat.Message{Content: text}, FinishReason: providers.FinishStop}
}

func callTool(id, name, args string) providers.Response {
	return providers.Response{Message: chat.Message{ToolCalls: []chat.ToolCall{{ID: id, Name: name, Arguments: args}}}, FinishReason: providers.FinishToolCalls}
}

func echoTools(t *testing.T) *tools.Registry {
	reg := tools.NewRegistry()
	err := reg.Add(tools.Tool{Name: "echo", Description: "Says its text back.", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Run: func(_ context.Context, args json.RawMessage) (tools.Result, error) {
			return tools.Result{Text: "echo:" + string(args)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestATurnRunsToolsAndAnswersWithTheResultsInTheNextRequest(t *testing.T) {
	h := newHarness(t, 128_000, echoTools(t), callTool("k1", "echo", `{"text":"hi"}`), reply("done"))
	res, _ := h.turn("say hi")
	if res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	roles := []chat.Role{}
	for _, m := range res.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []chat.Role{chat.RoleUser, chat.RoleAssistant, chat.RoleTool, chat.RoleAssistant}) {
		t.Fatalf("stored roles = %v", roles)
	}
	reqs := h.model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != chat.RoleTool || last.Content != `echo:{"text":"hi"}` || last.ToolCallID != "k1" {
		t.Fatalf("the second request ends with %+v, want echo's result", last)
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "echo" || reqs[0].System != "You help." {
		t.Fatalf("first request: system %q tools %+v", reqs[0].System, reqs[0].Tools)
	}
}

func TestAPlainTurnWritesTwiceAndItsAnswerLandsWithTheSnapshot(t *testing.T) {
	h := newHarness(t, 128_000, nil, reply("hello"), reply("again"))
	for _, text := range []string{"hi", "more"} {
		h.store.mu.Lock()
		before := h.store.writes
		h.store.mu.Unlock()
		res, _ := h.turn(text)
		if res.Problem != nil {
			t.Fatalf("problem: %+v", res.Problem)
		}
		h.store.mu.Lock()
		writes, snap, log := h.store.writes-before, h.store.snaps["c1"], h.store.msgs["c1"]
		h.store.mu.Unlock()
		if writes != 2 {
			t.Fatalf("turn %q wrote %d times, want 2 (its message; the answer with the snapshot)", text, writes)
		}
		if last := log[len(log)-1]; last.Role != chat.RoleAssistant || snap.LastSeqSent != last.Seq {
			t.Fatalf("snapshot's last seq sent %d, the log ends with %+v", snap.LastSeqSent, last)
		}
	}
}

// TestAToolTurnSyncsTwiceHoweverManyRoundsItTakes: a turn's tool calls and
// their results are stored unsynced, in order and with their seqs, and the
// answer's synced write with the snapshot covers them: two syncs a turn.
//
// On a lean window the tool the model calls by name is loaded, and the
// turn's tools.loaded item is one more unsynced write, not a third sync.
func TestAToolTurnSyncsTwiceHoweverManyRoundsItTakes(t *testing.T) {
	for _, tc := range []struct {
		rounds, window int
		loaded         int // tools.loaded items: the call by name loads echo once
	}{{1, 128_000, 0}, {3, 128_000, 0}, {2, 8_000, 1}} {
		rounds := tc.rounds
		t.Run(fmt.Sprintf("%d rounds on %d", rounds, tc.window), func(t *testing.T) {
			var replies []providers.Response
			for i := range rounds {
				replies = append(replies, callTool(fmt.Sprintf("k%d", i), "echo", `{"text":"hi"}`))
			}
			h := newHarness(t, tc.window, echoTools(t), append(replies, reply("done"))...)
			res, evs := h.turn("say hi")
			if res.Problem != nil {
				t.Fatalf("problem: %+v", res.Problem)
			}
			h.store.mu.Lock()
			writes, unsynced, snap, log, acts := h.store.writes, h.store.unsynced, h.store.snaps["c1"], slices.Clone(h.store.msgs["c1"]), slices.Clone(h.store.acts["c1"])
			h.store.mu.Unlock()
			loaded := 0
			for _, a := range acts {
				if a.Type == chat.EventToolsLoaded {
					loaded++
				}
			}
			if writes != 2 || loaded != tc.loaded || unsynced != 2*rounds+loaded {
				t.Fatalf("%d synced writes, %d unsynced and %d tools.loaded items; want 2 (the message; the answer with the snapshot), %d and %d", writes, unsynced, loaded, 2*rounds+tc.loaded, tc.loaded)
			}
			if len(log) != 2+2*rounds || snap.LastSeqSent != log[len(log)-1].Seq {
				t.Fatalf("log of %d messages, snapshot's last seq sent %d", len(log), snap.LastSeqSent)
			}
			// Each tool message was announced with its stored seq as it came.
			var announced []int64
			for _, ev := range evs {
				if m, ok := ev.Data.(chat.Message); ok && ev.Type == chat.EventToolResult {
					announced = append(announced, m.Seq)
				}
			}
			if len(announced) != rounds || announced[0] != 3 {
				t.Fatalf("tool results announced with seqs %v", announced)
			}
		})
	}
}

// TestALogEndingInAToolCallWithoutResultsGoesOn: a crash may lose a
// running turn's unsynced tool results and leave its call: the chat loads,
// and the next request gives the call a marked empty result.
func TestALogEndingInAToolCallWithoutResultsGoesOn(t *testing.T) {
	h := newHarness(t, 128_000, echoTools(t), reply("ok"))
	_, _ = h.store.Append(context.Background(), "c1", chat.Message{Role: chat.RoleUser, Content: "say hi"},
		chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "k1", Name: "echo", Arguments: "{}"}}})
	res, _ := h.turn("still there?")
	if res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	msgs := h.model.requests()[0].Messages
	i := slices.IndexFunc(msgs, func(m chat.Message) bool { return len(m.ToolCalls) > 0 })
	if i < 0 || i+1 >= len(msgs) || msgs[i+1].Role != chat.RoleTool || msgs[i+1].ToolCallID != "k1" || !msgs[i+1].IsError {
		t.Fatalf("the call is not followed by a marked empty result: %+v", msgs)
	}
}

func TestAnAnswerCutByItsRoomContinuesAtMostThreeTimes(t *testing.T) {
	cut := providers.Response{Message: chat.Message{Content: "part"}, FinishReason: providers.FinishLength}
	h := newHarness(t, 128_000, nil, cut, cut, cut, cut, reply("never asked"))
	res, _ := h.turn("write a lot")
	if n := len(h.model.requests()); n != 1+maxContinues {
		t.Fatalf("model calls = %d, want %d", n, 1+maxContinues)
	}
	if res.Problem != nil || len(res.Messages) != 1+1+maxContinues {
		t.Fatalf("result: problem %+v, %d messages", res.Problem, len(res.Messages))
	}
}

// TestAnAnswerCutAtTheChatsCapIsNotContinued: a length stop of a request
// whose room was the chat's settings.max_output_tokens is the client's own
// cut: the turn ends with that answer, marked, and asks for no rest.
func TestAnAnswerCutAtTheChatsCapIsNotContinued(t *testing.T) {
	cut := providers.Response{Message: chat.Message{Content: "part"}, FinishReason: providers.FinishLength}
	h := newHarness(t, 128_000, nil, cut, reply("never asked"))
	h.store.chats["c1"] = persistence.Chat{ID: "c1", Tenant: "t1", Model: "fake/m", Settings: chat.Settings{MaxOutputTokens: new(5)}}
	res, _ := h.turn("write a lot")
	reqs := h.model.requests()
	if len(reqs) != 1 || reqs[0].MaxTokens != 5 {
		t.Fatalf("model calls = %d (first max_tokens %d), want one capped at 5", len(reqs), reqs[0].MaxTokens)
	}
	if res.Problem != nil || !res.MaxOutputReached || len(res.Messages) != 2 || !res.Messages[1].MaxOutputReached {
		t.Fatalf("result: problem %+v, max_output_reached %v, messages %+v", res.Problem, res.MaxOutputReached, res.Messages)
	}
	h.store.mu.Lock()
	stored := slices.Clone(h.store.msgs["c1"])
	h.store.mu.Unlock()
	if last := stored[len(stored)-1]; last.Content != "part" || !last.MaxOutputReached {
		t.Fatalf("stored answer %+v: want it marked as stopped at the cap", last)
	}
}

// TestAnAnswerCutByItsRoomUnderTheCapContinues: a cap over agentd's room
// leaves the room as the bound, so a cut there still continues, unmarked.
func TestAnAnswerCutByItsRoomUnderTheCapContinues(t *testing.T) {
	cut := providers.Response{Message: chat.Message{Content: "part"}, FinishReason: providers.FinishLength}
	h := newHarness(t, 128_000, nil, cut, reply(" and the rest"))
	h.store.chats["c1"] = persistence.Chat{ID: "c1", Tenant: "t1", Model: "fake/m", Settings: chat.Settings{MaxOutputTokens: new(10_000_000)}}
	res, _ := h.turn("write a lot")
	if n := len(h.model.requests()); n != 2 {
		t.Fatalf("model calls = %d, want the answer and its continuation", n)
	}
	if res.MaxOutputReached || slices.ContainsFunc(res.Messages, func(m chat.Message) bool { return m.MaxOutputReached }) {
		t.Fatalf("a cut by agentd's room is marked as the chat's cap: %+v", res)
	}
}

func TestARequestThatDoesNotFitFoldsFirstAndTheModelSeesTheDigest(t *testing.T) {
	h := newHarness(t, 4096, nil)
	// Earlier turns, stored directly: far more than a 4K window holds.
	for i := range 12 {
		_, _ = h.store.Append(context.Background(), "c1",
			chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d about file%d.txt: %s", i, i, strings.Repeat("words ", 300))},
			chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("answer ", 300)})
	}
	h.model.replies = []providers.Response{reply("ok")}
	res, evs := h.turn("and now?")
	if res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	var folded *chat.Compacted
	for _, ev := range evs {
		if c, ok := ev.Data.(chat.Compacted); ok && ev.Type == chat.EventCompacted {
			folded = &c
		}
	}
	if folded == nil || folded.FirstKeptSeq <= 1 || folded.Digest == "" {
		t.Fatalf("no fold with a digest before the call: %+v", folded)
	}
	req := h.model.requests()[0]
	if !strings.Contains(req.Messages[0].Content, window.SummaryOpen) {
		t.Fatalf("the request does not start with the folded part's frame: %.200q", req.Messages[0].Content)
	}
	for _, m := range req.Messages[1:] {
		if m.Seq < folded.FirstKeptSeq {
			t.Fatalf("a folded message (seq %d) was sent word for word", m.Seq)
		}
	}
	// On 4K a fold may keep only this message: it may carry the frame too.
	if !strings.HasSuffix(req.Messages[len(req.Messages)-1].Content, "and now?") {
		t.Fatalf("the request does not end with the message: %+v", req.Messages[len(req.Messages)-1])
	}
	if got := h.store.snaps["c1"].FirstKeptSeq; got != folded.FirstKeptSeq {
		t.Fatalf("snapshot first kept = %d, announced %d", got, folded.FirstKeptSeq)
	}
}

// TestAChatWithoutCompactThresholdTakesTheDaemonsOwn: on a 128K window a
// chat that sets no compact_threshold is held to the daemon's (lean under
// 16K: find_tools alone); one that sets its own above it keeps it.
func TestAChatWithoutCompactThresholdTakesTheDaemonsOwn(t *testing.T) {
	reg := tools.NewRegistry()
	for i := range 3 {
		if err := tools.Register(reg, fmt.Sprintf("tool%d", i), "A tool.", func(context.Context, struct{}) (tools.Result, error) {
			return tools.Result{Text: "ok"}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		own      *int
		wantLean bool
	}{{"default", nil, true}, {"own", ptr(100_000), false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, 128_000, reg, func(_ *harness, d *Deps) { d.CompactThreshold = 14_000 }, reply("ok"))
			c := h.store.chats["c1"]
			c.Settings.CompactThreshold = tc.own
			h.store.chats["c1"] = c
			if res, _ := h.turn("hello"); res.Problem != nil {
				t.Fatalf("problem: %+v", res.Problem)
			}
			req := h.model.requests()[0]
			lean := len(req.Tools) == 1 && req.Tools[0].Name == findToolsName
			if lean != tc.wantLean {
				t.Fatalf("tools sent %v: lean %v, want %v", toolNames(req.Tools), lean, tc.wantLean)
			}
		})
	}
}

// TestASmallWindowHoldsAChatToItsWorkingSize: on an 8K window, where the
// daemon's compact_threshold would hold nothing, a chat that sets none is
// held to its working size; a chat's own threshold, and a daemon without
// one (-1), keep theirs.
func TestASmallWindowHoldsAChatToItsWorkingSize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		daemon int
		own    *int
		want   int // the whole request's limit
	}{
		{"default", 12_000, nil, 8_000 * window.WorkingPercent / 100},
		{"own", 12_000, ptr(5_000), 5_000},
		// 90% of the window less the answer room (15%).
		{"none", -1, nil, 8_000*9/10 - 8_000*15/100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, 8_000, nil, func(_ *harness, d *Deps) { d.CompactThreshold = tc.daemon }, reply("ok"))
			c := h.store.chats["c1"]
			c.Settings.CompactThreshold = tc.own
			h.store.chats["c1"] = c
			res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &GetContext{}}, time.Minute).Result()
			if err != nil {
				t.Fatal(err)
			}
			v, ok := res.(*chat.ContextView)
			if !ok {
				t.Fatalf("context answered %#v", res)
			}
			if limit := v.Budget.System + v.Budget.Tools + v.Budget.Transcript; limit != tc.want {
				t.Fatalf("the budget holds requests to %d tokens, want %d: %+v", limit, tc.want, v.Budget)
			}
		})
	}
}

// TestOnAWorkingSizeABigResultRidesWholeForOneExchange: the turn after a
// tool turn sends the big result as its stub on a small window's working
// size, and whole (for two exchanges) on the whole window.
func TestOnAWorkingSizeABigResultRidesWholeForOneExchange(t *testing.T) {
	reg := tools.NewRegistry()
	big := strings.Repeat("a line of a long report\n", 120) // 2,880 chars: stale once old
	if err := tools.Register(reg, "report", "Reads the report.", func(context.Context, struct{}) (tools.Result, error) {
		return tools.Result{Text: big}, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		daemon   int
		wantStub bool
	}{{"working size", 12_000, true}, {"whole window", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, 8_000, reg, func(_ *harness, d *Deps) { d.CompactThreshold = tc.daemon },
				callTool("k1", "report", `{}`), reply("read"), reply("ok"))
			for _, text := range []string{"read the report", "and now?"} {
				if res, _ := h.turn(text); res.Problem != nil {
					t.Fatalf("%s: problem %+v", text, res.Problem)
				}
			}
			reqs := h.model.requests()
			var sent string
			for _, m := range reqs[len(reqs)-1].Messages {
				if m.Role == chat.RoleTool {
					sent = m.Content
				}
			}
			if stub := strings.Contains(sent, "stubbed"); stub != tc.wantStub || (!stub && sent != big) {
				t.Fatalf("the next turn sent the result as %.120q, want stubbed %v", sent, tc.wantStub)
			}
		})
	}
}

func TestTooManyToolRoundsEndTheTurnWithAProblem(t *testing.T) {
	replies := make([]providers.Response, maxToolRounds)
	for i := range replies {
		replies[i] = callTool(fmt.Sprintf("k%d", i), "echo", `{}`)
	}
	h := newHarness(t, 128_000, echoTools(t), replies...)
	res, _ := h.turn("loop")
	if res.Problem == nil || !strings.Contains(res.Problem.Message, "asked for tools") {
		t.Fatalf("problem = %+v, want the rounds limit", res.Problem)
	}
	if n := len(h.model.requests()); n != maxToolRounds {
		t.Fatalf("model calls = %d, want %d", n, maxToolRounds)
	}
}

func (h *harness) addMessages(msgs ...chat.Message) *Added {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &AddMessages{Messages: msgs}}, time.Minute).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	a, ok := res.(*Added)
	if !ok || len(a.Messages) != len(msgs) || a.Messages[0].Seq != 1 || a.Messages[len(msgs)-1].Seq != int64(len(msgs)) {
		h.t.Fatalf("add answered %#v", res)
	}
	return a
}

func TestAddedMessagesAreStoredInBatches(t *testing.T) {
	h := newHarness(t, 128_000, nil)
	big := strings.Repeat("x", addBatchBytes/2+1) // two of these do not share a batch
	writes := h.store.writes
	h.addMessages(chat.Message{Role: chat.RoleUser, Content: big}, chat.Message{Role: chat.RoleAssistant, Content: big}, chat.Message{Role: chat.RoleUser, Content: "small"})
	if n := h.store.writes - writes; n != 2 {
		t.Fatalf("%d writes for two batches", n)
	}
	stored, _ := h.store.Messages(context.Background(), "c1", 0, 0)
	if len(stored) != 3 || stored[1].Role != chat.RoleAssistant || stored[2].Content != "small" {
		t.Fatalf("stored %d messages", len(stored))
	}
}

func TestTheTurnAfterAddedMessagesReadsThem(t *testing.T) {
	h := newHarness(t, 128_000, nil, reply("go on"))
	h.addMessages(chat.Message{Role: chat.RoleUser, Content: "from elsewhere"}, chat.Message{Role: chat.RoleAssistant, Content: "an old answer"})
	h.turn("next")
	reqs := h.model.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls", len(reqs))
	}
	sent := reqs[0].Messages
	if len(sent) != 3 || sent[0].Content != "from elsewhere" || sent[1].Content != "an old answer" || !strings.HasSuffix(sent[2].Content, "next") {
		t.Fatalf("the turn's request does not carry the added messages: %+v", sent)
	}
}

func ptr[T any](v T) *T { return &v }

func toolNames(specs []chat.ToolSpec) []string {
	out := make([]string, len(specs))
	for i, sp := range specs {
		out[i] = sp.Name
	}
	return out
}
