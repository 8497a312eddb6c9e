package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRealWindows: agentd reads llama-server's window from /v1/models
// (meta.n_ctx) and /props, and Ollama's from /api/show and /api/ps, and says
// where each came from; the num_ctx it asks Ollama for is what /api/ps then
// reports, the same on every request (no reload).
func TestRealWindows(t *testing.T) {
	t.Run("llama-server", func(t *testing.T) {
		url := realURL(t, envLlama)
		var list struct {
			Data []struct {
				ID   string `json:"id"`
				Meta struct {
					NCtx int `json:"n_ctx"`
				} `json:"meta"`
			} `json:"data"`
		}
		getJSON(t, url+"/v1/models", &list)
		if len(list.Data) != 1 || list.Data[0].ID != realModel {
			t.Fatalf("llama-server lists %+v, want the one model %s", list.Data, realModel)
		}
		nctx := llamaNCtx(t, url)
		if list.Data[0].Meta.NCtx != nctx {
			t.Fatalf("/v1/models meta.n_ctx %d and /props n_ctx %d differ", list.Data[0].Meta.NCtx, nctx)
		}
		d := startReal(t, daemonConfig{Providers: realYAML("llama/"+realModel, llamaProvider("llama", url))})
		m := d.waitModel(t, "llama/"+realModel)
		if m.Window != nctx || m.WindowSource != "list" || !m.Local || !m.Loaded {
			t.Fatalf("agentd says %+v, want window %d from the list, local and loaded (llama-server serves it)", m, nctx)
		}
	})
	t.Run("ollama", func(t *testing.T) {
		url := realURL(t, envOllama)
		tp := newTap(t, url)
		var show struct {
			ModelInfo map[string]any `json:"model_info"`
		}
		postJSON(t, url+"/api/show", `{"model":"`+realModel+`"}`, &show)
		trained, _ := show.ModelInfo["llama.context_length"].(float64)
		if trained <= 0 {
			t.Fatalf("/api/show names no llama.context_length: %v", show.ModelInfo)
		}
		ref := "ollama/" + realModel + ":latest"
		d := startReal(t, daemonConfig{Providers: realYAML(ref, ollamaProvider("ollama", tp.URL))})
		m := d.waitModel(t, ref)
		if m.WindowSource != "list" || m.Window <= 0 || m.Window > int(trained) || !m.Local {
			t.Fatalf("agentd says %+v, want a window sized from /api/show, at most the trained %d", m, int(trained))
		}
		id := d.newChat(t, ref)
		for i := range 3 {
			answered(t, "turn", d.send(t, id, pasted(i)))
			if got := ollamaLoaded(t, url, realModel); got != m.Window {
				t.Fatalf("after turn %d /api/ps reports context_length %d, agentd asked for %d", i, got, m.Window)
			}
		}
		for _, n := range tp.numCtx() {
			if n != m.Window {
				t.Fatalf("agentd asked num_ctx %v, want %d on every request", tp.numCtx(), m.Window)
			}
		}
	})
}

// TestRealHealing: a model configured with an overstated window (32K, a
// name llama-server does not list, on a 2K server) is refused with
// llama-server's real exceed_context_size_error; the turn heals without a
// problem, and the window is learned and persisted across a restart.
func TestRealHealing(t *testing.T) {
	url := realURL(t, envLlama)
	nctx := llamaNCtx(t, url)
	tp := newTap(t, url)
	ref := "llama/tiny-32k"
	cfg := daemonConfig{Providers: realYAML(ref, llamaProvider("llama", tp.URL, realModelCfg{ID: "tiny-32k", Window: 32768}))}
	d := startReal(t, cfg)
	if m := d.waitModel(t, ref); m.Window != 32768 || m.WindowSource != "config" {
		t.Fatalf("agentd says %+v, want the configured 32768", m)
	}
	id := d.newChat(t, ref)
	healed := 0
	for i := 0; i < 40 && healed == 0; i++ {
		rt := d.send(t, id, pasted(i))
		answered(t, "turn", rt)
		healed += len(rt.healed)
		for _, h := range rt.healed {
			if h.WindowLearnt != nctx {
				t.Errorf("healed with window %d, the server's is %d", h.WindowLearnt, nctx)
			}
		}
	}
	if healed == 0 {
		t.Fatal("40 turns of pasted text on a 2K server configured as 32K and never refused")
	}
	refusals := 0
	for _, c := range tp.since(0) {
		if c.Status == 400 {
			refusals++
			if !strings.Contains(c.Body, "exceed_context_size_error") {
				t.Errorf("the refusal is not llama-server's exceed_context_size_error: %s", c.Body)
			}
		}
	}
	if refusals != 1 {
		t.Errorf("%d refusals, want exactly the one that taught the window", refusals)
	}
	for i := range 5 {
		rt := d.send(t, id, pasted(40+i))
		answered(t, "turn after healing", rt)
		if len(rt.healed) > 0 {
			t.Errorf("turn %d after learning the window was refused again", i)
		}
	}
	want := func(when string) {
		for _, m := range d.models(t) {
			if m.ID == ref && (m.Window != nctx || m.WindowSource != "refusal") {
				t.Errorf("%s agentd says %+v, want the learned window %d from the refusal", when, m, nctx)
			}
		}
	}
	want("after healing")
	d.kill()
	d.start()
	want("after a restart")
}

// TestRealOllamaWindowBound is issue 16's bug: window: 65536 configured for
// a model Ollama runs at its trained length (here 32768). The window the
// server reports must bound the configured one, so agentd neither plans
// past it nor asks for more than the server runs.
func TestRealOllamaWindowBound(t *testing.T) {
	url := realURL(t, envOllama)
	tp := newTap(t, url)
	ref := "ollama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, ollamaProvider("ollama", tp.URL, realModelCfg{ID: realModel, Window: 65536}))})
	// The configured window is known at once; the server's list is read in
	// the background, and must then bound it.
	m := d.waitModel(t, ref)
	for deadline := time.Now().Add(30 * time.Second); m.WindowSource == "config" && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		for _, got := range d.models(t) {
			if got.ID == ref {
				m = got
			}
		}
	}
	if m.Window != 32768 || m.WindowSource != "list" {
		t.Fatalf("agentd says %+v, want the server's 32768 (trained length) to bound the configured 65536", m)
	}
	id := d.newChat(t, ref)
	answered(t, "turn", d.send(t, id, pasted(1)))
	if got := ollamaLoaded(t, url, realModel); got != 32768 {
		t.Errorf("/api/ps reports context_length %d, want 32768", got)
	}
	for _, n := range tp.numCtx() {
		if n > 32768 {
			t.Errorf("agentd asked num_ctx %d, over the 32768 the server runs", n)
		}
	}
}

// TestRealMonsterTurn: one message twice the window is answered: the request
// keeps its head and its tail, fits the window by the server's own count,
// and the stored message is whole.
func TestRealMonsterTurn(t *testing.T) {
	url := realURL(t, envLlama)
	nctx := llamaNCtx(t, url)
	tp := newTap(t, url)
	ref := "llama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, llamaProvider("llama", tp.URL))})
	d.waitModel(t, ref)
	id := d.newChat(t, ref)
	var b strings.Builder
	b.WriteString("HEAD-MARKER first row of the export\n")
	middle := false
	for i := 0; b.Len() < nctx*2*4; i++ { // CSV is under 4 bytes a token: over twice the window
		b.WriteString(pasted(1 + 4*i))
		if !middle && b.Len() >= nctx*4 {
			b.WriteString("\nMIDDLE-MARKER\n")
			middle = true
		}
	}
	b.WriteString("\nTAIL-MARKER last row of the export")
	msg := b.String()
	rt := d.send(t, id, msg)
	answered(t, "monster turn", rt)
	var turn *tapCall
	for _, c := range tp.since(0) {
		c := c
		if c.Status != 200 {
			t.Errorf("the server answered %d: %s", c.Status, c.Body)
		}
		if c.Prompt+c.Output > nctx {
			t.Errorf("a request of %d+%d tokens by the server's count, over its %d", c.Prompt, c.Output, nctx)
		}
		if c.Kind == "turn" {
			turn = &c
		}
	}
	if turn == nil {
		t.Fatal("no turn request reached the server")
	}
	for _, mark := range []string{"HEAD-MARKER", "TAIL-MARKER"} {
		if !strings.Contains(string(turn.Request), mark) {
			t.Errorf("the shortened message lost its %s", mark)
		}
	}
	if strings.Contains(string(turn.Request), "MIDDLE-MARKER") {
		t.Error("the message was sent whole; it is twice the window")
	}
	ctx, cancel := withTimeout(sendTimeout)
	defer cancel()
	msgs, err := d.Client.Transcript(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) == 0 || msgs[0].Content != msg {
		t.Fatal("the stored message is not the whole message sent")
	}
}

// postJSON POSTs body to url and decodes the JSON answer into out.
func postJSON(t *testing.T, url, body string, out any) {
	t.Helper()
	ctx, cancel := withTimeout(sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
}
