package providers

import "testing"

// The bodies a real llama-server and a real Ollama answered agentd's
// real-server tests (testdata/realmodel_*.jsonl, each line with the server
// and version that sent it): the detector and the window readers must read
// them as recorded.
func TestRealServerRefusals(t *testing.T) {
	for _, r := range loadJSONL[refusal](t, "testdata/realmodel_too_long.jsonl") {
		t.Run(r.ID+"_"+r.Provider, func(t *testing.T) {
			if r.Source == "" {
				t.Fatal("no source")
			}
			got := DetectTooLong(r.Provider, r.status(), r.Body)
			if got.TooLong != r.Overflow {
				t.Fatalf("TooLong = %v, want %v; body: %s", got.TooLong, r.Overflow, r.Body)
			}
			if r.Window != nil && got.Window != *r.Window {
				t.Errorf("Window = %d, want %d", got.Window, *r.Window)
			}
			if r.Requested != nil && got.Requested != *r.Requested {
				t.Errorf("Requested = %d, want %d", got.Requested, *r.Requested)
			}
		})
	}
}

func TestRealServerModelLists(t *testing.T) {
	for _, r := range loadJSONL[listing](t, "testdata/realmodel_model_lists.jsonl") {
		t.Run(r.ID+"_"+r.Provider, func(t *testing.T) {
			if r.Source == "" || r.Window == nil {
				t.Fatal("a record needs its source and its window")
			}
			got, err := WindowsFromModelList(r.Provider, []byte(r.Body))
			if err != nil {
				t.Fatal(err)
			}
			id := UnnamedModel
			if r.ModelID != nil {
				id = *r.ModelID
			}
			if got[id] != *r.Window {
				t.Errorf("%q window = %d, want %d; all: %v", id, got[id], *r.Window, got)
			}
		})
	}
}
