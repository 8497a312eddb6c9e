package attachments

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// naiveLines is the reference split: "\n" ends a line, a "\r" before it is
// part of the end of line, and a last line without "\n" still counts.
func naiveLines(content string) []string {
	if content == "" {
		return nil
	}
	terminated := strings.HasSuffix(content, "\n")
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	for i := range lines {
		if i < len(lines)-1 || terminated {
			lines[i] = strings.TrimSuffix(lines[i], "\r")
		}
	}
	return lines
}

// indexed writes content in the given chunk sizes through an indexer with a
// tiny stride, so that marks and their thinning happen on small inputs.
func indexed(t *rapid.T, dir, content string, stride int64, limit int, chunks []int) (*os.File, Facts) {
	idx := newLineIndexerSized(stride, limit)
	rest := content
	for _, n := range chunks {
		n = min(n, len(rest))
		idx.Write([]byte(rest[:n]))
		rest = rest[n:]
	}
	idx.Write([]byte(rest))
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return f, Facts{Lines: idx.lines(), Size: idx.n, marks: idx.marks}
}

var contentGen = rapid.StringOf(rapid.SampledFrom([]rune("ab \n\n\r")))

func TestPropertyLineIndexMarksAreLineStarts(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		content := contentGen.Draw(t, "content")
		stride := rapid.Int64Range(1, 16).Draw(t, "stride")
		limit := rapid.IntRange(2, 8).Draw(t, "limit")
		chunks := rapid.SliceOf(rapid.IntRange(0, 7)).Draw(t, "chunks")
		f, facts := indexed(t, dir, content, stride, limit, chunks)
		f.Close()
		if want := int64(len(naiveLines(content))); facts.Lines != want {
			t.Fatalf("lines = %d, want %d", facts.Lines, want)
		}
		if len(facts.marks) >= limit {
			t.Fatalf("%d marks kept, limit %d", len(facts.marks), limit)
		}
		for i, m := range facts.marks {
			// Line L starts right after the (L-1)th newline.
			if got := int64(strings.Count(content[:m.Off], "\n")) + 1; got != m.Line || content[m.Off-1] != '\n' {
				t.Fatalf("mark %d = %+v, but line %d starts there", i, m, got)
			}
			if i > 0 && m.Off <= facts.marks[i-1].Off {
				t.Fatalf("marks out of order: %+v", facts.marks)
			}
		}
	})
}

func TestPropertyFileReadMatchesNaiveSplit(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		content := contentGen.Draw(t, "content")
		f, facts := indexed(t, dir, content, rapid.Int64Range(1, 16).Draw(t, "stride"),
			rapid.IntRange(2, 8).Draw(t, "limit"), nil)
		defer f.Close()
		lines := naiveLines(content)
		if len(lines) == 0 {
			return
		}
		from := rapid.Int64Range(1, int64(len(lines))).Draw(t, "from")
		to := rapid.Int64Range(from, int64(len(lines))+3).Draw(t, "to")
		got, err := fileReadText(context.Background(), f, facts, from, to, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		last := min(to, int64(len(lines)))
		for i := from; i <= last; i++ {
			fmt.Fprintf(&want, "%d\t%s\n", i, lines[i-1])
		}
		fmt.Fprintf(&want, "[lines %d-%d of %d]", from, last, len(lines))
		if got != want.String() {
			t.Fatalf("file_read %d-%d of %q\n got %q\nwant %q", from, to, content, got, want.String())
		}
	})
}

var continueRe = regexp.MustCompile(`call file_read with from_line=(\d+)\]$`)

// Following the "call file_read with from_line=N" pointers from line 1
// yields every line exactly once: a per-call cap never hides content.
func TestPropertyFileReadContinuationReachesEverything(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		lines := rapid.SliceOfN(rapid.StringMatching(`[a-z ]{0,30}`), 1, 60).Draw(t, "lines")
		content := strings.Join(lines, "\n") + "\n"
		f, facts := indexed(t, dir, content, 8, 4, nil)
		defer f.Close()
		maxBytes := rapid.IntRange(48, 400).Draw(t, "maxBytes")
		var got []string
		from := int64(1)
		for calls := 0; ; calls++ {
			if calls > len(lines) {
				t.Fatal("continuation does not advance")
			}
			text, err := fileReadText(context.Background(), f, facts, from, int64(len(lines)), maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			body, footer, _ := strings.Cut(text, "[lines ")
			for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
				if l != "" || body != "" {
					_, line, _ := strings.Cut(l, "\t")
					got = append(got, line)
				}
			}
			m := continueRe.FindStringSubmatch(footer)
			if m == nil {
				break
			}
			from, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if strings.Join(got, "\n") != strings.Join(lines, "\n") {
			t.Fatalf("reassembled %q, want %q", got, lines)
		}
	})
}

func TestFileReadCutsAHugeLineAndSaysSo(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	long := strings.Repeat("x", 100_000)
	a := putFile(t, s, writeTemp(t, "min.js", "first\n"+long+"\nlast\n"))
	res := call(t, r, ToolFileRead, map[string]any{"attachment_id": a.ID, "from_line": 2})
	if len(res.Text) > fileReadMaxBytes+200 {
		t.Errorf("result of %d bytes passes the per-call cap", len(res.Text))
	}
	if !strings.Contains(res.Text, "of 100000 bytes shown") || !strings.Contains(res.Text, "from_line=3") {
		t.Errorf("a cut line must say so and where to go on: %s", res.Text[len(res.Text)-200:])
	}
}

func TestFileSearch(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	var b strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&b, "row %d %s\r\n", i, map[bool]string{true: "Needle in Hay", false: "hay only"}[i%10 == 0])
	}
	a := putFile(t, s, writeTemp(t, "data.csv", b.String()))
	cases := map[string]struct {
		args map[string]any
		want []string // substrings, in order
	}{
		"all words any case": {map[string]any{"words": "needle HAY"},
			[]string{"10: row 10 Needle in Hay\n", "50: row 50 Needle in Hay\n", "[5 lines matched"}},
		"max hits and continuation": {map[string]any{"words": "needle", "max_hits": 2},
			[]string{"10: ", "20: ", "[5 lines matched", "3 more after line 20: call file_search with from_line=21]"}},
		"from line": {map[string]any{"words": "needle", "from_line": 41},
			[]string{"50: ", "[1 lines matched from line 41"}},
		"no hit": {map[string]any{"words": "needle absent"}, []string{"[0 lines matched"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			c.args["attachment_id"] = a.ID
			res := call(t, r, ToolFileSearch, c.args)
			at := 0
			for _, w := range c.want {
				i := strings.Index(res.Text[at:], w)
				if i < 0 {
					t.Fatalf("result lacks %q after byte %d:\n%s", w, at, res.Text)
				}
				at += i + len(w)
			}
			if strings.Contains(res.Text, "\r") {
				t.Errorf("CRLF leaked into the result: %q", res.Text)
			}
		})
	}
}
