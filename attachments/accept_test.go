package attachments

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

// noteTokens estimates a note's tokens the way the brief counts them.
func noteTokens(note string) int { return len(note) / 4 }

func newStore(t testing.TB, maxBytes int64) *Store {
	t.Helper()
	s, err := NewStore(filepath.Join(t.TempDir(), "attachments"), maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putFile(t testing.TB, s *Store, path string) chat.Attachment {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := s.Put(context.Background(), f, filepath.Base(path), "", Quota{})
	if err != nil {
		t.Fatal(err)
	}
	remember(s, a)
	return a
}

// records keeps what each test Put answered, per store folder, as the
// hub's ownership records do, so the fake owners hand the tools the same
// record, a store reopened on the folder too.
var records sync.Map // recordKey → chat.Attachment

type recordKey struct {
	dir string
	id  string
}

func remember(s *Store, a chat.Attachment) { records.Store(recordKey{s.dir, a.ID}, a) }

// recorded is the record of id that a test Put into s left; an id no test
// helper put is a record with no name and no declared type.
func recorded(s *Store, id string) chat.Attachment {
	if a, ok := records.Load(recordKey{s.dir, id}); ok {
		return a.(chat.Attachment)
	}
	return chat.Attachment{ID: id}
}

// testTenant is the tenant call speaks for; newRegistry lets it hold every
// stored file.
const testTenant = "t1"

// ownersFunc adapts a function to Owners: a tenant it says holds an id gets
// the record a test Put into s left.
type ownersFunc struct {
	s     *Store
	holds func(tenant, id string) bool
}

func (o ownersFunc) Owned(_ context.Context, tenant, id string) (chat.Attachment, bool, error) {
	if !o.holds(tenant, id) {
		return chat.Attachment{}, false, nil
	}
	return recorded(o.s, id), true, nil
}

func newRegistry(t testing.TB, s *Store) *tools.Registry {
	t.Helper()
	return registryOwnedBy(t, s, ownersFunc{s, func(tenant, _ string) bool { return tenant == testTenant }})
}

func registryOwnedBy(t testing.TB, s *Store, o Owners) *tools.Registry {
	t.Helper()
	r := tools.NewRegistry()
	if err := RegisterTools(r, s, o); err != nil {
		t.Fatal(err)
	}
	return r
}

// call runs a tool the way the session's tool loop does, with the JSON a
// model would write, for a chat of testTenant.
func call(t testing.TB, r *tools.Registry, name string, args map[string]any) tools.Result {
	t.Helper()
	return callAs(t, r, testTenant, name, args)
}

func callAs(t testing.TB, r *tools.Registry, tenant, name string, args map[string]any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{Tenant: tenant, ChatID: "chat-of-" + tenant})
	res, err := r.Call(ctx, chat.ToolCall{ID: "c1", Name: name, Arguments: string(raw)}, tools.Limits{})
	if err != nil {
		t.Fatalf("%s %s: %v (%s)", name, raw, err, res.Text)
	}
	return res
}

// allocDuring reports the bytes allocated while fn runs. Total allocation
// bounds peak heap from above, so a small figure proves fn streamed.
func allocDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestAcceptance3000PagePDF(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	a := putFile(t, s, makePDF(t, testPDF{Pages: 3000, Group: 100}))

	if !strings.Contains(a.Note, "3000 pages") || !strings.Contains(a.Note, a.ID) {
		t.Errorf("note lacks the page count or the id: %s", a.Note)
	}
	if !strings.Contains(a.Note, "pdf_read") || !strings.Contains(a.Note, "may take a while") {
		t.Errorf("note of a 3,000-page PDF should name pdf_read and warn that a first read takes time: %s", a.Note)
	}
	if n := noteTokens(a.Note); n > 150 {
		t.Errorf("note is about %d tokens, want ≤ 150 (and far under the 2K budget): %s", n, a.Note)
	}
	if strings.Contains(a.Note, "marker-") {
		t.Errorf("note carries page content: %s", a.Note)
	}

	res := call(t, r, ToolPDFRead, map[string]any{"attachment_id": a.ID, "from_page": 2500, "to_page": 2500})
	if res.IsError || !res.Untrusted {
		t.Fatalf("pdf_read: IsError=%v Untrusted=%v: %s", res.IsError, res.Untrusted, res.Text)
	}
	if !strings.Contains(res.Text, pageLine(2500)) {
		t.Errorf("pdf_read page 2500 = %q, want it to hold %q", res.Text, pageLine(2500))
	}
	for _, other := range []int{2499, 2501} {
		if strings.Contains(res.Text, pageLine(other)) {
			t.Errorf("pdf_read page 2500 also returned page %d: %q", other, res.Text)
		}
	}

	if n := s.extractions.Load(); n != 0 {
		t.Fatalf("%d extractions before any search", n)
	}
	res = call(t, r, ToolPDFSearch, map[string]any{"attachment_id": a.ID, "words": "MARKER-1234"})
	if !strings.Contains(res.Text, "page 1234: ") || !strings.Contains(res.Text, "[1 pages matched") {
		t.Errorf("pdf_search marker-1234 should find exactly page 1234: %s", res.Text)
	}
	// The first search extracted the text once into the index; later
	// searches, and a restarted store, read the index and extract nothing.
	res = call(t, r, ToolPDFSearch, map[string]any{"attachment_id": a.ID, "words": "marker-2999"})
	if !strings.Contains(res.Text, "page 2999: ") || !strings.Contains(res.Text, "[1 pages matched of 3000 searched") {
		t.Errorf("second pdf_search: %s", res.Text)
	}
	if n := s.extractions.Load(); n != 1 {
		t.Errorf("two searches extracted the document %d times, want once", n)
	}
	restarted, err := NewStore(s.dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	res = call(t, newRegistry(t, restarted), ToolPDFSearch, map[string]any{"attachment_id": a.ID, "words": "marker-7 page"})
	if !strings.Contains(res.Text, "page 7: ") || restarted.extractions.Load() != 0 {
		t.Errorf("after a restart: %d extractions, %s", restarted.extractions.Load(), res.Text)
	}

	res = call(t, r, ToolPDFInfo, map[string]any{"attachment_id": a.ID})
	if !strings.Contains(res.Text, "3000 pages") || !strings.Contains(res.Text, "612 x 792 pt") {
		t.Errorf("pdf_info: %s", res.Text)
	}
}

// writeBigText writes lines "line <i> lorem ipsum dolor" until size bytes.
func writeBigText(t testing.TB, path string, size int64) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var n, i int64
	buf := make([]byte, 0, 64)
	for n < size {
		i++
		buf = append(strconv.AppendInt(append(buf[:0], "line "...), i, 10), " lorem ipsum dolor\n"...)
		w.Write(buf)
		n += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return i
}

func TestAcceptance200MBText(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 200 MB file")
	}
	path := filepath.Join(t.TempDir(), "big.log")
	lines := writeBigText(t, path, 200<<20)
	s := newStore(t, 0)
	r := newRegistry(t, s)

	var a chat.Attachment
	if got := allocDuring(func() { a = putFile(t, s, path) }); got > 16<<20 {
		t.Errorf("Put allocated %d bytes for a 200 MB file; it should stream", got)
	}
	if !strings.Contains(a.Note, fmt.Sprintf("%d lines", lines)) {
		t.Errorf("note should count %d lines: %s", lines, a.Note)
	}
	if !strings.Contains(a.Note, "file_read") || !strings.Contains(a.Note, "may take a while") {
		t.Errorf("note of a 200 MB file should name file_read and warn: %s", a.Note)
	}
	if n := noteTokens(a.Note); n > 150 {
		t.Errorf("note is about %d tokens: %s", n, a.Note)
	}

	var res tools.Result
	got := allocDuring(func() {
		res = call(t, r, ToolFileRead, map[string]any{"attachment_id": a.ID, "from_line": 1_000_000, "to_line": 1_000_000})
	})
	if got > 8<<20 {
		t.Errorf("file_read allocated %d bytes; it should seek and stream", got)
	}
	if want := "1000000\tline 1000000 lorem ipsum dolor\n"; !strings.HasPrefix(res.Text, want) {
		t.Errorf("file_read line 1,000,000 = %q, want prefix %q", res.Text, want)
	}
	if !res.Untrusted {
		t.Error("file_read result not marked Untrusted")
	}

	res = call(t, r, ToolFileRead, map[string]any{"attachment_id": a.ID, "from_line": lines - 1})
	want := fmt.Sprintf("%d\tline %d lorem ipsum dolor\n%d\tline %d lorem ipsum dolor\n[lines %d-%d of %d]",
		lines-1, lines-1, lines, lines, lines-1, lines, lines)
	if res.Text != want {
		t.Errorf("file_read of the last two lines = %q, want %q", res.Text, want)
	}
}
