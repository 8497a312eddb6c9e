package summarizer

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// heldModel is a provider whose summaries take as long as the test says:
// each call names its chat on started, then waits until the test finishes
// that chat (or the call's context ends).
type heldModel struct {
	started  chan string
	mu       sync.Mutex
	done     map[string]chan struct{}
	finished map[string]bool
}

func newHeldModel() *heldModel {
	return &heldModel{started: make(chan string, 64), done: map[string]chan struct{}{}, finished: map[string]bool{}}
}

func (h *heldModel) gate(chatID string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.done[chatID]
	if !ok {
		g = make(chan struct{})
		h.done[chatID] = g
	}
	return g
}

// finish lets chatID's calls end; finishing it again does nothing.
func (h *heldModel) finish(chatID string) {
	g := h.gate(chatID)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.finished[chatID] {
		h.finished[chatID] = true
		close(g)
	}
}

func (h *heldModel) Stream(ctx context.Context, req providers.Request, _ func(providers.Event)) (providers.Response, error) {
	prompt := req.Messages[len(req.Messages)-1].Content
	i := strings.Index(prompt, "chat ")
	chatID := strings.Fields(prompt[i+len("chat "):])[0]
	h.started <- chatID
	select {
	case <-h.gate(chatID):
	case <-ctx.Done():
		return providers.Response{}, ctx.Err()
	}
	return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: "The person said hello in chat " + chatID + "."}}, nil
}

func (h *heldModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// fairRig is a real summariser in a real actor system on one held provider.
type fairRig struct {
	t       *testing.T
	system  *actor.ActorSystem
	pid     *actor.PID
	a       *summarizerActor
	model   *heldModel
	replies []*actor.Future
}

func newFairRig(t *testing.T, perProvider, perTenant int) *fairRig {
	model := newHeldModel()
	cfg := Config{Catalog: oneModel{model}, Log: zerolog.Nop(), PerProvider: perProvider, PerTenant: perTenant}.withDefaults()
	a := newSummarizer(cfg)
	system := actors.NewSystem(zerolog.Nop())
	r := &fairRig{t: t, system: system, a: a, model: model,
		pid: system.Root.Spawn(actors.Props(cfg.Log, func() actor.Actor { return a }))}
	t.Cleanup(func() { _ = system.Root.StopFuture(r.pid).Wait() })
	return r
}

// fold asks for chatID's fold as tenant; its reply is checked by finishAll.
func (r *fairRig) fold(tenant, chatID string) {
	f := &Fold{ReqID: chatID, ChatID: chatID, Tenant: tenant, Model: "p/m", Turns: []chat.Message{
		{Role: chat.RoleUser, Content: "hello from chat " + chatID},
		{Role: chat.RoleAssistant, Content: "hi"},
	}}
	r.replies = append(r.replies, r.system.Root.RequestFuture(r.pid, f, time.Minute))
}

// reached waits until n requests reached the provider's slots, holding
// one or waiting for one. A barrier, not a clock: nothing is timed.
func (r *fairRig) reached(n int) {
	// The provider's slots exist once the first fold was received; the
	// first start the test saw came after that.
	s := r.a.slots["p"]
	for {
		if held, waiting := s.Counts(); held+waiting == n {
			return
		}
		runtime.Gosched()
	}
}

func (r *fairRig) starts(n int) []string {
	var out []string
	for range n {
		out = append(out, <-r.model.started)
	}
	return out
}

// finishAll lets every call end and checks that every fold got its summary.
func (r *fairRig) finishAll(chats ...string) {
	for _, c := range chats {
		r.model.finish(c)
	}
	for _, f := range r.replies {
		res, err := f.Result()
		if err != nil {
			r.t.Fatalf("fold: %v", err)
		}
		if got := res.(*Folded); !got.OK {
			r.t.Fatalf("fold %s: %s", got.ChatID, got.Err)
		}
	}
}

func bobsChats(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("b%d", i)
	}
	return out
}

// TestAnotherTenantsFoldsCannotStarveOne: bob folds 8 chats on a provider
// whose summaries do not end; alice's one fold starts at once, because bob
// may hold no more than 3 of the provider's 4 slots (before the fix bob
// held all 4 and alice waited behind his whole queue).
func TestAnotherTenantsFoldsCannotStarveOne(t *testing.T) {
	r := newFairRig(t, 4, 0)
	bob := bobsChats(8)
	for _, c := range bob {
		r.fold("bob", c)
	}
	for _, c := range r.starts(3) {
		if !strings.HasPrefix(c, "b") {
			t.Fatalf("start %q, want one of bob's", c)
		}
	}
	r.reached(8) // bob's other five wait, though a slot is free
	r.fold("alice", "a0")
	if c := r.starts(1)[0]; c != "a0" {
		t.Fatalf("next start %q, want alice's a0 while bob's calls hang", c)
	}
	r.finishAll(append(bob, "a0")...)
}

// TestAFreedSlotGoesToTheTenantHoldingFewest: with no per-tenant cap bob
// holds all 4 slots and queues 4 more; alice's fold, asked after them,
// gets the first slot that frees, before any of bob's queued folds.
func TestAFreedSlotGoesToTheTenantHoldingFewest(t *testing.T) {
	r := newFairRig(t, 4, 4)
	bob := bobsChats(8)
	for _, c := range bob {
		r.fold("bob", c)
	}
	first := r.starts(4)
	r.reached(8)
	r.fold("alice", "a0")
	r.reached(9)
	r.model.finish(first[0])
	if c := r.starts(1)[0]; c != "a0" {
		t.Fatalf("after one of bob's calls ended, %q started; want alice's a0 before bob's queued folds", c)
	}
	r.finishAll(append(bob, "a0")...)
}
