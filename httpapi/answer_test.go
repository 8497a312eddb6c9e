package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
)

// pagedHub is a chat of total messages of size bytes each, made as they
// are read, that records every seq window it is asked for: what a
// handler holds for its client is what it asked for. A page holds at most
// pageBytes of content, past its first message, as the store's (0: no
// bound).
type pagedHub struct {
	Hub
	total     int64
	size      int
	pageBytes int
	activity  []api.ActivityItem

	mu      sync.Mutex
	windows [][2]int64
}

func (*pagedHub) Owner(context.Context, string, string) (string, error) { return "", nil }

// TenantRecords finds no record (the start's sweep of the pause index).
func (*pagedHub) TenantRecords(context.Context, string, string, func(string, func(any) error) error) error {
	return nil
}

var exportedAt = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func (h *pagedHub) Chat(_ context.Context, _, id string) (api.Chat, error) {
	if id != "c1" {
		return api.Chat{}, fmt.Errorf("chat %s: %w", id, hub.ErrNotFound)
	}
	return api.Chat{ID: id, Model: "m/1", Title: "a <long> chat", Messages: h.total, CreatedAt: exportedAt}, nil
}

func (h *pagedHub) ExportHead(ctx context.Context, tenant, id string) (api.ChatExport, error) {
	c, err := h.Chat(ctx, tenant, id)
	return api.ChatExport{Format: api.ExportFormat, ExportedAt: exportedAt, Chat: c, Summary: "before & after", FirstKeptSeq: 2}, err
}

func (h *pagedHub) message(seq int64) api.Message {
	return api.Message{Seq: seq, Role: api.RoleUser, Content: strings.Repeat("x", h.size) + fmt.Sprintf(" <%d>", seq), CreatedAt: exportedAt}
}

func (h *pagedHub) TranscriptPage(_ context.Context, _, _ string, from, to int64) ([]api.Message, error) {
	h.mu.Lock()
	h.windows = append(h.windows, [2]int64{from, to})
	h.mu.Unlock()
	if to <= 0 {
		to = h.total
	}
	out := []api.Message{}
	held := 0
	for seq := max(from, 1); seq <= min(to, h.total) && (h.pageBytes == 0 || held < h.pageBytes); seq++ {
		m := h.message(seq)
		out, held = append(out, m), held+len(m.Content)
	}
	return out, nil
}

func (h *pagedHub) Activity(_ context.Context, _, _ string, after int64, limit int) ([]api.ActivityItem, bool, error) {
	var out []api.ActivityItem
	for _, a := range h.activity {
		if a.ID > after && len(out) < limit {
			out = append(out, a)
		}
	}
	return out, len(out) > 0 && out[len(out)-1].ID < h.activity[len(h.activity)-1].ID, nil
}

// asked returns the windows asked for so far.
func (h *pagedHub) asked() [][2]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][2]int64(nil), h.windows...)
}

func testServer(h Hub, tokens map[string]string, change func(*configs.Config)) (*Server, *bytes.Buffer) {
	var cfg configs.Config
	cfg.ApplyDefaults()
	if change != nil {
		change(&cfg)
	}
	var logs bytes.Buffer
	return New(h, cfg, tokens, zerolog.New(&logs)), &logs
}

func serveOne(s *Server, r *http.Request) *httptest.ResponseRecorder {
	r.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec
}

func TestATranscriptIsWrittenAPageAtATimeAndAClientThatReadsNothingIsCut(t *testing.T) {
	// 80 MB: far more than the kernel buffers of a connection hold.
	h := &pagedHub{total: 20000, size: 4096}
	s, _ := testServer(h, nil, func(c *configs.Config) { c.HTTP.WriteTimeout.Duration = 50 * time.Millisecond })
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /v1/chats/c1/transcript HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing; its handler must end by itself. (The
	// minute is a guard against a hang, far over the 50 ms bound.)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the handler is still writing to a client that reads nothing")
	}
	windows := h.asked()
	for _, w := range windows {
		if w[1] <= 0 || w[1]-w[0]+1 > messagePage {
			t.Fatalf("the handler asked for seqs %d..%d at once; want pages of at most %d", w[0], w[1], messagePage)
		}
	}
	if n := int64(len(windows)); n*messagePage >= h.total {
		t.Fatalf("the handler read all %d pages for a client that read nothing", n)
	}
	// The server closed the connection: what the kernel held, then EOF.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	n, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection is still open after %d bytes", n)
	}
	if n >= h.total*int64(h.size) {
		t.Fatalf("read %d bytes, the whole transcript", n)
	}
}

func TestATranscriptAndAnExportStreamTheBytesOfTheWholeAnswer(t *testing.T) {
	for _, pageBytes := range []int{0, 100} {
		t.Run(fmt.Sprint("page bytes ", pageBytes), func(t *testing.T) { wholeAnswers(t, pageBytes) })
	}
}

// wholeAnswers checks transcripts and exports of a chat whose pages hold
// at most pageBytes (0: 64 messages each), and that each page is asked for
// from the seq after the last one the page before returned.
func wholeAnswers(t *testing.T, pageBytes int) {
	h := &pagedHub{total: 2*messagePage + 3, size: 10}
	all, _ := h.TranscriptPage(context.Background(), "", "", 0, 0)
	h.windows, h.pageBytes = nil, pageBytes
	marshal := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	exp, _ := h.ExportHead(context.Background(), "", "c1")
	exp.Messages = all
	withActivity := exp
	withActivity.Activity = []api.ActivityItem{{ID: 1, Type: "compacted", Data: json.RawMessage(`{"a":1}`)}, {ID: 7, Type: "x"}}
	cases := map[string]struct {
		path     string
		activity []api.ActivityItem
		want     string
	}{
		"transcript":               {"/v1/chats/c1/transcript", nil, marshal(map[string]any{"messages": all})},
		"transcript from":          {"/v1/chats/c1/transcript?from_seq=60", nil, marshal(map[string]any{"messages": all[59:]})},
		"transcript from to":       {"/v1/chats/c1/transcript?from_seq=3&to_seq=70", nil, marshal(map[string]any{"messages": all[2:70]})},
		"transcript past the end":  {"/v1/chats/c1/transcript?from_seq=500", nil, marshal(map[string]any{"messages": []api.Message{}})},
		"export":                   {"/v1/chats/c1/export", nil, marshal(exp)},
		"export with its activity": {"/v1/chats/c1/export", withActivity.Activity, marshal(withActivity)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h.activity = c.activity
			s, _ := testServer(h, nil, nil)
			h.windows = nil
			rec := serveOne(s, httptest.NewRequest(http.MethodGet, c.path, nil))
			if rec.Code != http.StatusOK || rec.Body.String() != c.want {
				t.Fatalf("status %d, body\n%.300s\nwant\n%.300s", rec.Code, rec.Body.String(), c.want)
			}
			windows := h.asked()
			for i := 1; i < len(windows); i++ {
				got, _ := h.TranscriptPage(context.Background(), "", "", windows[i-1][0], windows[i-1][1])
				if next := got[len(got)-1].Seq + 1; windows[i][0] != next {
					t.Fatalf("page %d asked from seq %d; the page before ended at %d", i, windows[i][0], next-1)
				}
			}
		})
	}
}

func TestAMarkdownExportHasEveryMessage(t *testing.T) {
	h := &pagedHub{total: messagePage + 5, size: 3}
	s, _ := testServer(h, nil, nil)
	rec := serveOne(s, httptest.NewRequest(http.MethodGet, "/v1/chats/c1/export?format=markdown", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/markdown; charset=utf-8" {
		t.Fatalf("status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if n := strings.Count(body, "\n### user · #"); n != int(h.total) || !strings.Contains(body, "- messages: 69\n") ||
		!strings.Contains(body, "#69 · ") || !strings.Contains(body, "## Summary of messages before seq 2\n\nbefore & after") {
		t.Fatalf("%d messages in\n%.600s", n, body)
	}
}

func TestTranscriptSeqsMustBeWholeNumbers(t *testing.T) {
	h := &pagedHub{total: 3, size: 1}
	s, _ := testServer(h, nil, nil)
	for _, q := range []string{"from_seq=abc", "from_seq=-1", "to_seq=x", "to_seq=-5", "from_seq=1.5"} {
		rec := serveOne(s, httptest.NewRequest(http.MethodGet, "/v1/chats/c1/transcript?"+q, nil))
		var e api.Error
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != http.StatusBadRequest || e.Kind != "bad_request" {
			t.Fatalf("%s: status %d %s; want 400 bad_request", q, rec.Code, rec.Body.String())
		}
	}
}

func TestABodyAnnouncedOverTheLimitIsRefusedBeforeItIsRead(t *testing.T) {
	// Without the check the body's wait ends at the read timeouts: 408.
	s, _ := testServer(&pagedHub{}, nil, func(c *configs.Config) {
		c.HTTP.ReadTimeout.Duration, c.HTTP.UploadTimeout.Duration = time.Second, time.Second
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, path := range []string{"/v1/chats", "/v1/chats/import", "/v1/attachments"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Announce a terabyte and send a byte of it.
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, int64(1)<<40)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
				t.Fatalf("status %d, close %v; want 413 and the connection closed", resp.StatusCode, resp.Close)
			}
		})
	}
}

func TestTheAuthSchemeIsCaseInsensitive(t *testing.T) {
	s, _ := testServer(&pagedHub{}, map[string]string{"tok": "alice"}, nil)
	cases := map[string]int{"Bearer tok": 200, "bearer tok": 200, "BEARER tok": 200, "Basic tok": 401, "bearer": 401, "bearer other": 401}
	for auth, want := range cases {
		r := httptest.NewRequest(http.MethodGet, "/v1/chats/c1", nil)
		r.Header.Set("Authorization", auth)
		if rec := serveOne(s, r); rec.Code != want {
			t.Errorf("Authorization %q: status %d, want %d", auth, rec.Code, want)
		}
	}
}

// goneHub fails as the hub does for a client that left while its turn
// waited in the queue.
type goneHub struct{ pagedHub }

func (*goneHub) Chat(ctx context.Context, _, id string) (api.Chat, error) {
	return api.Chat{}, fmt.Errorf("chat %s: the caller went away before the message's turn started: %w", id, ctx.Err())
}

func TestAClientThatLeftIsNotAnInternalError(t *testing.T) {
	s, logs := testServer(&goneHub{}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := serveOne(s, httptest.NewRequest(http.MethodGet, "/v1/chats/c1", nil).WithContext(ctx))
	if rec.Code != statusClientGone || strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), `"level":"debug"`) {
		t.Fatalf("status %d, log %s; want %d and one debug line", rec.Code, logs.String(), statusClientGone)
	}
}

// TestAnOpenAIClientThatLeftIsNotAnInternalError: on the OpenAI-compatible
// routes too, a client that left before its turn started is logged at
// debug as 499, not answered and logged as an internal error.
func TestAnOpenAIClientThatLeftIsNotAnInternalError(t *testing.T) {
	for path, body := range map[string]string{
		"/v1/responses":        `{"model":"fake/m","conversation":"conv_` + hub.NewID() + `","input":"hi"}`,
		"/v1/chat/completions": `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`,
	} {
		s, logs := testServer(&goneHub{}, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)).WithContext(ctx)
		r.Header.Set("X-Agentd-Chat", "c1")
		rec := serveOne(s, r)
		if rec.Code != statusClientGone || strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), `"level":"debug"`) {
			t.Errorf("%s: status %d, log %s; want %d and one debug line", path, rec.Code, logs.String(), statusClientGone)
		}
	}
}

func TestAnErrorClipsTheIDItRepeats(t *testing.T) {
	s, _ := testServer(&pagedHub{}, nil, nil)
	id := strings.Repeat("a", 60<<10)
	for name, tc := range map[string]struct {
		path   string
		status int
	}{
		"unknown chat":     {"/v1/chats/" + id, http.StatusNotFound},
		"no such route":    {"/v1/chats/" + id + "/nothing", http.StatusNotFound},
		"another method's": {"/v1/chats/" + id + "/compact", http.StatusMethodNotAllowed}, // compact is POST
	} {
		t.Run(name, func(t *testing.T) {
			rec := serveOne(s, httptest.NewRequest(http.MethodGet, tc.path, nil))
			var e api.Error
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != tc.status || len(e.Message) > 2*echoLimit || !strings.Contains(e.Message, strings.Repeat("a", echoLimit/2)+"…") {
				t.Fatalf("status %d, message of %d bytes: %.300s", rec.Code, len(e.Message), e.Message)
			}
		})
	}
}
