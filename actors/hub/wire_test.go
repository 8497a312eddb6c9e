package hub

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/persistence"
)

// fill sets every exported field of v (a pointer) to a non-zero value, so a
// field the wire conversion forgets shows up as a difference.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 3 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
			v.SetBytes([]byte(`{"type":"object"}`)) // a tool's schema
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.String:
		v.SetString("s-" + v.Type().Name())
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint8:
		v.SetUint(9)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Interface, reflect.Map:
		// none on the wire records
	}
}

func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem(), 0)
	return v
}

func jsonOf(t *testing.T, v any, drop ...string) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	dropAll(m, drop)
	return m
}

// dropAll deletes the keys drop from v's objects, at any depth (a
// message's private field inside a turn's messages too).
func dropAll(v any, drop []string) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range drop {
			delete(v, k)
		}
		for _, e := range v {
			dropAll(e, drop)
		}
	case []any:
		for _, e := range v {
			dropAll(e, drop)
		}
	}
}

// The wire types are separate from the records, but a client reads the
// same JSON as before the split: every field of a record reaches the wire
// under its name (the tenant, and the length of an add stored with its
// key, stay inside the daemon).
func TestWireFormKeepsEveryFieldOfTheRecords(t *testing.T) {
	view := filled[chat.ContextView]()
	prob := filled[chat.Problem]()
	cases := map[string]struct {
		record, wire any
		private      []string
	}{
		"message":            {filled[chat.Message](), wireMessage(filled[chat.Message]()), []string{"keyed_count"}},
		"turn result":        {filled[chat.TurnResult](), wireTurn(filled[chat.TurnResult]()), []string{"keyed_count"}},
		"problem event":      {prob, wireEvent(prob), nil},
		"context":            {view, wireContext(&view), nil},
		"compaction applied": {filled[chat.CompactionApplied](), wireEvent(filled[chat.CompactionApplied]()), nil},
		"healed":             {filled[chat.Healed](), wireEvent(filled[chat.Healed]()), nil},
		"usage event":        {filled[chat.Usage](), wireEvent(filled[chat.Usage]()), nil},
		"tool call event":    {filled[chat.ToolCall](), wireEvent(filled[chat.ToolCall]()), nil},
		"memory":             {filled[memory.Memory](), wireMemory(filled[memory.Memory]()), []string{"tenant"}},
		"memory run":         {filled[memory.Run](), wireRun(filled[memory.Run]()), []string{"tenant"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			want, got := jsonOf(t, c.record, c.private...), jsonOf(t, c.wire)
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("wire JSON differs from the record's:\n record %v\n wire   %v", want, got)
			}
		})
	}
}

func TestWireChatShowsNoStorageFields(t *testing.T) {
	c := filled[persistence.Chat]()
	got := jsonOf(t, wireChat(c, 3))
	for _, k := range []string{"tenant", "no_auto_remember", "shared"} {
		if _, ok := got[k]; ok {
			t.Errorf("wire chat carries the storage field %q: %v", k, got)
		}
	}
	if got["id"] != c.ID || got["messages"] != float64(3) {
		t.Fatalf("wire chat = %v", got)
	}
}

// api is usable alone: it imports nothing of the daemon.
func TestAPIImportsNothingOfTheDaemon(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/agentd/agentd/api").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/agentd/agentd/") && p != "github.com/agentd/agentd/api" {
			t.Errorf("api imports %s", p)
		}
	}
}
