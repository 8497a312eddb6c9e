package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
)

// llamaProc is a llama-server this test starts and stops itself.
type llamaProc struct {
	t    *testing.T
	port int
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// newLlamaProc prepares a llama-server on a free port from the build cache
// named by AGENTD_TEST_REALMODEL_DIR, or skips the test.
func newLlamaProc(t *testing.T, ctx int, extra ...string) *llamaProc {
	t.Helper()
	dir := os.Getenv(envRealDir)
	if dir == "" {
		t.Skipf("%s is not set: this test starts and kills its own llama-server (.ci/run sets it)", envRealDir)
	}
	bin, model := filepath.Join(dir, "bin", "llama-server"), filepath.Join(dir, "models", "tiny-wired.gguf")
	for _, p := range []string{bin, model} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s names a build cache without %s: %v", envRealDir, p, err)
		}
	}
	port := freePort(t)
	args := append([]string{"-m", model, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "-c", fmt.Sprint(ctx),
		"-np", "1", "-t", "1", "--jinja", "--alias", realModel, "--no-webui"}, extra...)
	lp := &llamaProc{t: t, port: port, args: append([]string{bin}, args...)}
	t.Cleanup(lp.kill)
	return lp
}

func (lp *llamaProc) url() string { return fmt.Sprintf("http://127.0.0.1:%d", lp.port) }

// start runs the server and waits for /health.
func (lp *llamaProc) start() {
	lp.t.Helper()
	cmd := exec.Command(lp.args[0], lp.args[1:]...)
	logf, err := os.Create(filepath.Join(lp.t.TempDir(), "llama-server.log"))
	if err != nil {
		lp.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		lp.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	lp.cmd, lp.done = cmd, done
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			lp.t.Fatalf("llama-server exited while starting; see %s", logf.Name())
		default:
		}
		if res, err := http.Get(lp.url() + "/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	lp.t.Fatalf("llama-server not healthy within 60s")
}

// kill SIGKILLs the server and waits for it to be gone.
func (lp *llamaProc) kill() {
	if lp.cmd == nil {
		return
	}
	_ = lp.cmd.Process.Signal(syscall.SIGKILL)
	<-lp.done
	lp.cmd = nil
}

// TestRealServerStartedAfterAgentd: agentd starts while nobody listens at
// its llama-server's address; a turn then fails saying the server cannot be
// reached, and once the server is up the same chat works.
func TestRealServerStartedAfterAgentd(t *testing.T) {
	lp := newLlamaProc(t, 2048)
	ref := "llama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, llamaProvider("llama", lp.url(), realModelCfg{ID: realModel}))})
	id := d.newChat(t, ref)
	rt := d.send(t, id, "Hello, is anyone there?")
	if rt.res.Problem == nil || rt.res.Problem.Kind != chat.ProblemNoProvider {
		t.Fatalf("a turn with no server up: problem %+v, want %s", rt.res.Problem, chat.ProblemNoProvider)
	}
	lp.start()
	for i := range 3 {
		answered(t, "turn once the server is up", d.send(t, id, pasted(i)))
	}
}

// TestRealServerKilledMidStream: llama-server is SIGKILLed while it streams
// an answer. The turn ends with a clear provider problem (what streamed is
// kept, marked partial), nothing stored is lost, and after a restart of the
// server the chat goes on.
func TestRealServerKilledMidStream(t *testing.T) {
	lp := newLlamaProc(t, 2048)
	lp.start()
	u, err := url.Parse(lp.url())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var armed sync.Mutex
	kill := false
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(res *http.Response) error {
		armed.Lock()
		k := kill
		armed.Unlock()
		if k && strings.HasSuffix(res.Request.URL.Path, "/chat/completions") {
			res.Body = &killAfterFirstRead{ReadCloser: res.Body, kill: func() { once.Do(lp.kill) }}
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	ref := "llama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, llamaProvider("llama", proxy.URL))})
	d.waitModel(t, ref)
	id := d.newChat(t, ref)
	answered(t, "first turn", d.send(t, id, pasted(0)))
	armed.Lock()
	kill = true
	armed.Unlock()
	rt := d.send(t, id, pasted(1))
	if rt.res.Problem == nil {
		t.Fatalf("the server died mid-answer and the turn reports no problem: %+v", rt.res.Messages)
	}
	for _, m := range rt.res.Messages {
		if m.Role == api.RoleAssistant && !m.Partial {
			t.Errorf("an answer cut by a dead server is stored as whole: %+v", m)
		}
	}
	armed.Lock()
	kill = false
	armed.Unlock()
	lp.start()
	answered(t, "turn after the server's restart", d.send(t, id, pasted(2)))
	ctx, cancel := withTimeout(sendTimeout)
	defer cancel()
	msgs, err := d.Client.Transcript(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, m := range msgs {
		if m.Role == api.RoleUser {
			if m.Content != pasted(users) {
				t.Errorf("user message %d changed", users)
			}
			users++
		}
	}
	if users != 3 {
		t.Errorf("%d user messages stored, want 3", users)
	}
	if n, first := d.panics(); n > 0 {
		t.Errorf("%d panics in agentd's log: %s", n, first)
	}
}

// killAfterFirstRead kills the server once the first bytes of its stream
// have passed: the rest of the answer never comes.
type killAfterFirstRead struct {
	io.ReadCloser
	kill func()
}

func (k *killAfterFirstRead) Read(p []byte) (int, error) {
	n, err := k.ReadCloser.Read(p)
	if n > 0 {
		k.kill()
	}
	return n, err
}

// TestRealAuthRefused: llama-server started with --api-key refuses agentd
// without the key with its real 401 body; the turn ends at once with a
// provider problem that says so, and is not retried.
func TestRealAuthRefused(t *testing.T) {
	lp := newLlamaProc(t, 2048, "--api-key", "sekret")
	lp.start()
	tp := newTap(t, lp.url())
	ref := "llama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, llamaProvider("llama", tp.URL, realModelCfg{ID: realModel, Window: 2048}))})
	id := d.newChat(t, ref)
	rt := d.send(t, id, "Hello")
	if rt.res.Problem == nil || rt.res.Problem.Kind != chat.ProblemProvider || !strings.Contains(rt.res.Problem.Message, "401") {
		t.Fatalf("a 401 from the server: problem %+v, want a provider problem naming 401", rt.res.Problem)
	}
	calls := tp.since(0)
	if len(calls) != 1 || calls[0].Status != http.StatusUnauthorized || !strings.Contains(calls[0].Body, "authentication_error") {
		t.Errorf("want one refused request with llama-server's authentication_error, got %+v", calls)
	}
}

// brokenUTF8 makes llama-server's own model end inside a multi-byte
// character: a logit bias forces token 150 (a lone byte of Qwen2.5's
// byte-level vocabulary) and two tokens end the answer. With tools offered
// llama-server then answers its real 500 ("does not match the expected
// peg-native format"; testkit/realmodel/README.md). Only a non-streamed
// answer carries that 500 — a stream ends empty with finish_reason length
// — so the request goes unstreamed; it never reaches a parser that expects
// a stream, since the answer is the 500.
func brokenUTF8(body []byte) []byte {
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		return body
	}
	req["logit_bias"] = map[string]float64{"150": 100}
	req["max_tokens"] = 2
	req["stream"] = false
	delete(req, "stream_options")
	out, err := json.Marshal(req)
	if err != nil {
		return body
	}
	return out
}

// TestRealInvalidUTF8Output: llama-server's 500 for model output that is
// not valid UTF-8 is a model fault worth another try: once, the turn
// retries and is answered; every time, the turn ends with a provider
// problem carrying the server's words, the person's message stays stored,
// and the chat answers once the server does.
func TestRealInvalidUTF8Output(t *testing.T) {
	url := realURL(t, envLlama)
	tp := newTap(t, url)
	ref := "llama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, llamaProvider("llama", tp.URL))})
	d.waitModel(t, ref)
	id := d.newChat(t, ref)

	var mu sync.Mutex
	left := 1
	tp.setRewrite(func(kind string, body []byte) []byte {
		mu.Lock()
		defer mu.Unlock()
		if kind != "turn" || left == 0 {
			return body
		}
		left--
		return brokenUTF8(body)
	})
	before := tp.count()
	answered(t, "a turn whose first answer was broken UTF-8", d.send(t, id, "Hello there, one line please."))
	calls := tp.since(before)
	if len(calls) < 2 || calls[0].Status != http.StatusInternalServerError || !strings.Contains(calls[0].Body, "peg-native") {
		t.Fatalf("want llama-server's 500 (peg-native) and then an answer, the server said %+v", calls)
	}

	mu.Lock()
	left = -1 // every turn request from now on
	mu.Unlock()
	rt := d.send(t, id, "And a second line?")
	if rt.res.Problem == nil || rt.res.Problem.Kind != chat.ProblemProvider || !strings.Contains(rt.res.Problem.Message, "peg-native") {
		t.Fatalf("a server that always answers broken UTF-8: problem %+v, want a provider problem with the server's words", rt.res.Problem)
	}

	tp.setRewrite(nil)
	answered(t, "a turn once the server answers again", d.send(t, id, "Third line?"))
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	msgs, err := d.Client.Transcript(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, m := range msgs {
		if m.Role == api.RoleUser {
			said = append(said, m.Content)
		}
	}
	if want := []string{"Hello there, one line please.", "And a second line?", "Third line?"}; !slices.Equal(said, want) {
		t.Errorf("the person's messages stored %q, want %q", said, want)
	}
}
