package session

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/prompts"
	"github.com/agentd/agentd/tools"
)

// TestEachStepSeesTheMemoryMapAsItStands: a step planned after a memory
// changed carries the new map, whether the change came between turns or
// between a turn's steps (a tool edits it here), though the session reads
// only the map last built and a build runs off its mailbox.
func TestEachStepSeesTheMemoryMapAsItStands(t *testing.T) {
	ctx := context.Background()
	db, err := persistence.Open("", persistence.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	mem := memory.New(db, memory.Options{})
	_, added, err := mem.Add(ctx, memory.AddInput{Tenant: "t1", Texts: []string{"Keeps bees."}})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(text string) error {
		_, err := mem.Edit(ctx, "t1", added[0].ID, text)
		return err
	}
	reg := tools.NewRegistry()
	err = reg.Add(tools.Tool{Name: "correct", Description: "Corrects the memory.", Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, json.RawMessage) (tools.Result, error) {
			return tools.Result{Text: "done"}, edit("Keeps hornets.")
		}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, 32768, reg, func(_ *harness, d *Deps) {
		d.Prompts, d.Maps = &prompts.Builder{MemoryMap: mem.LastMap}, mem
	}, reply("one"), reply("two"), callTool("c", "correct", "{}"), reply("three"))

	h.turn("first")
	if err := edit("Keeps wasps."); err != nil {
		t.Fatal(err)
	}
	h.turn("second")
	h.turn("third")
	want := []string{"bees", "wasps", "wasps", "hornets"}
	reqs := h.model.requests()
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	for i, r := range reqs {
		if !strings.Contains(r.System, "## What you remember") || !strings.Contains(r.System, "Keeps "+want[i]) {
			t.Errorf("request %d's system prompt lacks %q:\n%s", i, want[i], r.System)
		}
	}
}
