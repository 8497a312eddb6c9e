package persistence

import (
	"reflect"
	"slices"
	"testing"

	"github.com/agentd/agentd/chat"
)

// TestTheRequestLogCodecKnowsEveryField: appendRequests writes the fields
// of chat.RequestLog it was written for, and encodeSnapshot writes them
// after the rest of a snapshot; a field added to either must be taught to
// them (or a snapshot would lose it, or order it wrong, without a word).
func TestTheRequestLogCodecKnowsEveryField(t *testing.T) {
	var tags []string
	rt := reflect.TypeFor[chat.RequestLog]()
	for i := range rt.NumField() {
		tags = append(tags, rt.Field(i).Name+" "+rt.Field(i).Type.String()+" "+rt.Field(i).Tag.Get("json"))
	}
	want := []string{"At time.Time at", "Estimate int estimate", "Reported int reported",
		"Budget int budget", "Window int window", "Kind string kind,omitempty"}
	if !slices.Equal(tags, want) {
		t.Fatalf("chat.RequestLog's fields are %q; appendRequests writes %q: teach it the new ones", tags, want)
	}
	st := reflect.TypeFor[Snapshot]()
	if last := st.Field(st.NumField() - 1); last.Name != "Requests" || last.Tag.Get("json") != "requests,omitempty" {
		t.Fatalf("Snapshot's last field is %s %q; encodeSnapshot writes Requests last", last.Name, last.Tag)
	}
}
