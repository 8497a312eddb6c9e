package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
)

// tap is a reverse proxy between agentd and a real server that records what
// the server itself said of each chat request: its status, its own token
// counts (usage.prompt_tokens and cached_tokens on llama-server,
// prompt_eval_count on Ollama), its own timings, and the wall time.
type tap struct {
	URL string

	mu    sync.Mutex
	calls []tapCall
	num   []int // options.num_ctx of each Ollama chat request
	// rewrite, when set, changes a chat request's body before the server
	// sees it (what is recorded is what agentd sent).
	rewrite func(kind string, body []byte) []byte
}

// setRewrite installs (or, with nil, removes) the tap's request rewrite.
func (tp *tap) setRewrite(f func(kind string, body []byte) []byte) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.rewrite = f
}

// tapCall is one chat request as the server answered it.
type tapCall struct {
	Status  int
	Prompt  int // the server's count of the prompt (Ollama: the tokens it evaluated)
	Cached  int // llama-server: prompt tokens served from its cache
	Output  int
	Server  time.Duration // the server's own prompt + generation time
	Wall    time.Duration // request sent to body read, at the proxy
	Body    string        // the error body of a non-200
	Stream  bool
	Kind    string // turn, summary or learner
	Request []byte // the request body agentd sent
	Started time.Time
}

// maxTapBody bounds what the tap keeps of one response.
const maxTapBody = 4 << 20

func newTap(t *testing.T, upstream string) *tap {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(res *http.Response) error {
		if !isChatPath(res.Request.URL.Path) {
			return nil
		}
		info, _ := res.Request.Context().Value(tapStart{}).(tapReq)
		res.Body = &tapBody{ReadCloser: res.Body, done: func(b []byte) {
			c := parseTapped(res.StatusCode, b)
			c.Kind, c.Request, c.Started, c.Wall = info.kind, info.body, info.start, time.Since(info.start)
			tp.mu.Lock()
			tp.calls = append(tp.calls, c)
			tp.mu.Unlock()
		}}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := tapReq{start: time.Now(), kind: "turn"}
		if isChatPath(r.URL.Path) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
			info.kind, info.body = requestKind(body), body
			tp.mu.Lock()
			rewrite := tp.rewrite
			tp.mu.Unlock()
			if rewrite != nil {
				body = rewrite(info.kind, body)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			var req struct {
				Options map[string]any `json:"options"`
			}
			if json.Unmarshal(body, &req) == nil {
				if n, ok := req.Options["num_ctx"].(float64); ok {
					tp.mu.Lock()
					tp.num = append(tp.num, int(n))
					tp.mu.Unlock()
				}
			}
		}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tapStart{}, info)))
	}))
	t.Cleanup(srv.Close)
	tp.URL = srv.URL
	return tp
}

func isChatPath(p string) bool {
	return strings.HasSuffix(p, "/chat/completions") || p == "/api/chat"
}

// tapStart keys a request's tapReq in its context.
type tapStart struct{}

// tapReq is what the tap knows of a request before its answer.
type tapReq struct {
	start time.Time
	kind  string
	body  []byte
}

// requestKind tells the summariser's and the learner's requests from a
// chat's turns by their instructions.
func requestKind(body []byte) string {
	for kind, instructions := range map[string]string{"summary": summarizer.Instructions, "learner": learner.Instructions} {
		first, _, _ := strings.Cut(instructions, "\n")
		if bytes.Contains(body, []byte(first)) {
			return kind
		}
	}
	return "turn"
}

// since returns the calls recorded from index i on.
func (tp *tap) since(i int) []tapCall {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tapCall(nil), tp.calls[min(i, len(tp.calls)):]...)
}

func (tp *tap) count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.calls)
}

func (tp *tap) numCtx() []int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]int(nil), tp.num...)
}

// tapBody keeps up to maxTapBody of a body and reports it once read or closed.
type tapBody struct {
	io.ReadCloser
	buf  bytes.Buffer
	once sync.Once
	done func([]byte)
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if room := maxTapBody - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(n, room)])
	}
	if err != nil {
		b.once.Do(func() { b.done(b.buf.Bytes()) })
	}
	return n, err
}

func (b *tapBody) Close() error {
	b.once.Do(func() { b.done(b.buf.Bytes()) })
	return b.ReadCloser.Close()
}

// parseTapped reads the server's own figures from a chat response: the
// usage (and llama-server's timings) of an OpenAI-style body or SSE stream,
// or the final done:true line of Ollama's NDJSON.
func parseTapped(status int, body []byte) tapCall {
	c := tapCall{Status: status}
	if status != http.StatusOK {
		c.Body = string(body)
		return c
	}
	type final struct {
		Usage *struct {
			Prompt  int `json:"prompt_tokens"`
			Output  int `json:"completion_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Timings *struct {
			PromptMS    float64 `json:"prompt_ms"`
			PredictedMS float64 `json:"predicted_ms"`
		} `json:"timings"`
		Done               bool  `json:"done"`
		PromptEvalCount    int   `json:"prompt_eval_count"`
		EvalCount          int   `json:"eval_count"`
		PromptEvalDuration int64 `json:"prompt_eval_duration"`
		EvalDuration       int64 `json:"eval_duration"`
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), maxTapBody)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			c.Stream = true
			line = bytes.TrimSpace(rest)
		}
		var f final
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &f) != nil {
			continue
		}
		if f.Usage != nil {
			c.Prompt, c.Output, c.Cached = f.Usage.Prompt, f.Usage.Output, f.Usage.Details.Cached
		}
		if f.Timings != nil {
			c.Server = time.Duration((f.Timings.PromptMS + f.Timings.PredictedMS) * float64(time.Millisecond))
		}
		if f.Done {
			c.Prompt, c.Output = f.PromptEvalCount, f.EvalCount
			c.Server = time.Duration(f.PromptEvalDuration + f.EvalDuration)
		}
	}
	return c
}
