package attachments

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestPDFPageCountComesFromTheIndex(t *testing.T) {
	cases := map[string]struct {
		spec      testPDF
		wantPages int
	}{
		"flat tree":  {testPDF{Pages: 7}, 7},
		"two levels": {testPDF{Pages: 250, Group: 16}, 250},
		"PDF 2.0":    {testPDF{Pages: 3, Version: "2.0"}, 3},
		// Every page object is garbage: only the root's /Count can give 40,
		// so a right count proves no page was parsed for the note.
		"page objects unreadable": {testPDF{Pages: 40, Group: 8, BrokenPages: true}, 40},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 0)
			a := putFile(t, s, makePDF(t, c.spec))
			if want := fmt.Sprintf(", %d pages)", c.wantPages); !strings.Contains(a.Note, want) {
				t.Errorf("note lacks %q: %s", want, a.Note)
			}
		})
	}
}

func TestPDFReadPages(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	flat := putFile(t, s, makePDF(t, testPDF{Pages: 12}))
	v2 := putFile(t, s, makePDF(t, testPDF{Pages: 12, Group: 5, Version: "2.0"}))
	broken := putFile(t, s, makePDF(t, testPDF{Pages: 4, BrokenPages: true}))
	cases := map[string]struct {
		id         string
		from, to   int
		want, deny []string
		isError    bool
	}{
		"one page of a flat tree":  {id: flat.ID, from: 7, to: 7, want: []string{pageLine(7), "[pages 7-7 of 12]"}, deny: []string{pageLine(6), pageLine(8)}},
		"range across tree nodes":  {id: v2.ID, from: 4, to: 11, want: []string{pageLine(4), pageLine(5), pageLine(6), pageLine(10), pageLine(11), "[pages 4-11 of 12]"}, deny: []string{pageLine(3), pageLine(12)}},
		"default range is 5 pages": {id: flat.ID, from: 2, want: []string{pageLine(2), pageLine(6)}, deny: []string{pageLine(7)}},
		"range past the end":       {id: flat.ID, from: 11, to: 99, want: []string{pageLine(12), "[pages 11-12 of 12]"}},
		"start past the end":       {id: flat.ID, from: 13, to: 14, want: []string{"has 12 pages"}},
		"backwards":                {id: flat.ID, from: 5, to: 3, isError: true, want: []string{"before from_page"}},
		"unreadable page":          {id: broken.ID, from: 2, to: 2, want: []string{"--- page 2 ---\n[this page's object is unreadable]", "[pages 2-2 of 4]"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			args := map[string]any{"attachment_id": c.id, "from_page": c.from}
			if c.to > 0 {
				args["to_page"] = c.to
			}
			res := call(t, r, ToolPDFRead, args)
			if res.IsError != c.isError {
				t.Fatalf("IsError = %v: %s", res.IsError, res.Text)
			}
			for _, w := range c.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("lacks %q:\n%s", w, res.Text)
				}
			}
			for _, d := range c.deny {
				if strings.Contains(res.Text, d) {
					t.Errorf("holds %q:\n%s", d, res.Text)
				}
			}
		})
	}
}

var pdfContinueRe = regexp.MustCompile(`call pdf_read with from_page=(\d+)\]$`)

// Reading a whole 3,000-page document by following the continuation
// pointers returns every page exactly once and in order.
func TestPDFReadContinuationCoversEveryPage(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	a := putFile(t, s, makePDF(t, testPDF{Pages: 3000, Group: 64}))
	next, calls := 1, 0
	var seen []int
	pageRe := regexp.MustCompile(`--- page (\d+) ---\npage (\d+) marker-(\d+)\n`)
	for {
		calls++
		res := call(t, r, ToolPDFRead, map[string]any{"attachment_id": a.ID, "from_page": next, "to_page": 3000})
		if len(res.Text) > pdfReadMaxBytes+200 {
			t.Fatalf("call %d returned %d bytes, over the per-call cap", calls, len(res.Text))
		}
		for _, m := range pageRe.FindAllStringSubmatch(res.Text, -1) {
			if m[1] != m[2] || m[2] != m[3] {
				t.Fatalf("page header %s holds the text of page %s", m[1], m[2])
			}
			n, _ := strconv.Atoi(m[1])
			seen = append(seen, n)
		}
		m := pdfContinueRe.FindStringSubmatch(res.Text)
		if m == nil {
			break
		}
		next, _ = strconv.Atoi(m[1])
	}
	if calls < 2 {
		t.Errorf("3,000 pages fit in one call of %d bytes?", pdfReadMaxBytes)
	}
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("page %d read as the %dth page", n, i+1)
		}
	}
	if len(seen) != 3000 {
		t.Errorf("read %d pages, want 3000", len(seen))
	}
}

func TestDamagedPDFStaysReachable(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	a := putFile(t, s, writeTemp(t, "cut.pdf", "%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\n(the words survive)\n"))
	if !strings.Contains(a.Note, "page count unreadable") {
		t.Errorf("note should say the page count is unreadable: %s", a.Note)
	}
	res := call(t, r, ToolPDFRead, map[string]any{"attachment_id": a.ID})
	if !res.IsError || !strings.Contains(res.Text, "file_read") {
		t.Errorf("pdf_read of a damaged PDF should point to file_read: %+v", res)
	}
	res = call(t, r, ToolFileRead, map[string]any{"attachment_id": a.ID})
	if res.IsError || !strings.Contains(res.Text, "the words survive") {
		t.Errorf("file_read of a damaged PDF: %+v", res)
	}
}

func TestPDFToolsRefuseOtherKinds(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	text := putFile(t, s, writeTemp(t, "a.txt", "hello\n"))
	pdf := putFile(t, s, makePDF(t, testPDF{Pages: 1}))
	cases := map[string]struct {
		tool string
		args map[string]any
		hint string
	}{
		"pdf_read of text":   {ToolPDFRead, map[string]any{"attachment_id": text.ID}, "file_read"},
		"pdf_info of text":   {ToolPDFInfo, map[string]any{"attachment_id": text.ID}, "file_read"},
		"file_read of pdf":   {ToolFileRead, map[string]any{"attachment_id": pdf.ID}, "pdf_read"},
		"file_search of pdf": {ToolFileSearch, map[string]any{"attachment_id": pdf.ID, "words": "x"}, "pdf_search"},
		"unknown id":         {ToolPDFRead, map[string]any{"attachment_id": strings.Repeat("0", 64)}, "No attachment"},
		"not an id":          {ToolFileRead, map[string]any{"attachment_id": "../../etc/passwd"}, "64-character id"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res := call(t, r, c.tool, c.args)
			if !res.IsError || !strings.Contains(res.Text, c.hint) {
				t.Errorf("want a model-visible error naming %q, got %+v", c.hint, res)
			}
		})
	}
}

func TestHeaderFixer(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"accepted as is":      {"%PDF-1.4\nrest", "%PDF-1.4\nrest"},
		"2.0 shown as 1.7":    {"%PDF-2.0\nrest", "%PDF-1.7\nrest"},
		"comment on the line": {"%PDF-1.5 %x\nrest", "%PDF-1.7\n%x\nrest"},
		"not a PDF":           {"hello world", "hello world"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := writeTemp(t, "x", c.in)
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := make([]byte, len(c.in))
			n, _ := fixHeader(f).ReadAt(got, 0)
			if string(got[:n]) != c.want {
				t.Errorf("read %q, want %q", got[:n], c.want)
			}
		})
	}
}
