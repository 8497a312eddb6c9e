package attachments

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// putAs stores the file at path under name, declaring mediaType.
func putAs(t testing.TB, s *Store, path, name, mediaType string) Facts {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := s.Put(context.Background(), f, name, mediaType, Quota{})
	if err != nil {
		t.Fatal(err)
	}
	remember(s, a)
	facts, err := s.FactsOf(a)
	if err != nil {
		t.Fatal(err)
	}
	if n := noteTokens(a.Note); n > 180 {
		t.Errorf("note of about %d tokens: %s", n, a.Note)
	}
	return facts
}

func wantAll(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func denyAll(t *testing.T, what, text string, deny ...string) {
	t.Helper()
	for _, d := range deny {
		if strings.Contains(text, d) {
			t.Errorf("%s holds %q:\n%s", what, d, text)
		}
	}
}

func TestDocumentsOfEveryFormatGetTheirFactsAndParagraphs(t *testing.T) {
	const title = "Report 2026"
	words, headings := 0, 0
	for _, b := range sampleBlocks {
		words += len(strings.Fields(b.text))
		if b.level > 0 {
			headings++
		}
	}
	cases := map[string]struct {
		path, name, declared string
		format               string
		pages                int
	}{
		"docx":                 {path: writeZip(t, "r.docx", docxParts(sampleBlocks, title, 7)), name: "r.docx", format: "docx", pages: 7},
		"odt":                  {path: writeZip(t, "r.odt", odtParts(sampleBlocks, title, 3)), name: "r.odt", format: "odt", pages: 3},
		"html":                 {path: writeTemp(t, "r.html", htmlDoc(sampleBlocks, title)), name: "r.html", format: "html"},
		"markdown by name":     {path: writeTemp(t, "r.md", markdownDoc(sampleBlocks, title)), name: "r.md", format: "markdown"},
		"markdown by its type": {path: writeTemp(t, "r.txt", markdownDoc(sampleBlocks, title)), name: "notes", declared: "text/markdown; charset=utf-8", format: "markdown"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 0)
			r := newRegistry(t, s)
			facts := putAs(t, s, c.path, c.name, c.declared)
			if facts.Kind != KindDoc || facts.Doc == nil || facts.Problem != "" {
				t.Fatalf("facts = %+v", facts)
			}
			d := *facts.Doc
			want := DocFacts{Format: c.format, Title: title, Pages: c.pages, Words: words, Paragraphs: len(sampleBlocks), Headings: headings}
			if d != want {
				t.Errorf("doc facts = %+v, want %+v", d, want)
			}
			a := s.attachment(facts, c.name, "")
			wantAll(t, "note", a.Note, c.format, fmt.Sprintf("%d words", words), fmt.Sprintf("%d headings", headings), `Title: "Report 2026"`, "doc_read")
			if c.pages > 0 {
				wantAll(t, "note", a.Note, fmt.Sprintf("%d pages", c.pages))
			}

			// every paragraph, in order, with its level
			res := call(t, r, ToolDocRead, map[string]any{"attachment_id": facts.ID, "to_paragraph": 100})
			var want2 strings.Builder
			for i, b := range sampleBlocks {
				want2.WriteString(renderPara(i+1, b.level, b.text))
			}
			want2.WriteString(fmt.Sprintf("[paragraphs 1-%d of %d]", len(sampleBlocks), len(sampleBlocks)))
			if res.IsError || res.Text != want2.String() {
				t.Errorf("doc_read =\n%s\nwant\n%s", res.Text, want2.String())
			}
			denyAll(t, "doc_read", res.Text, "secret", "color: red", "author", "enable scripts")

			res = call(t, r, ToolDocRead, map[string]any{"attachment_id": facts.ID, "section": "costs"})
			wantAll(t, "section", res.Text, "## Costs", "unicorn budget", "### Details", "Hay and glitter")
			denyAll(t, "section", res.Text, "Outlook", "twelve")

			res = call(t, r, ToolDocSearch, map[string]any{"attachment_id": facts.ID, "words": "UNICORN"})
			wantAll(t, "doc_search", res.Text, `¶7 (under "Costs"): The unicorn budget doubled.`, `¶11 (under "Outlook")`, "[2 paragraphs matched")

			res = call(t, r, ToolDocInfo, map[string]any{"attachment_id": facts.ID})
			wantAll(t, "doc_info", res.Text, "Title: Report 2026", "¶1 # Annual Report", "¶8 ### Details", fmt.Sprintf("%d words", words))
		})
	}
}

func TestMarkdownBlocks(t *testing.T) {
	md := "Intro line one\nline two\n\nSetext Title\n============\n\n```go\n# not a heading\nfmt.Println()\n```\n\n- item one\n- item two\n\n***\n\nSub\n---\n  ## Closed ##\n"
	s := newStore(t, 0)
	r := newRegistry(t, s)
	facts := putAs(t, s, writeTemp(t, "a.md", md), "a.md", "")
	res := call(t, r, ToolDocRead, map[string]any{"attachment_id": facts.ID})
	want := "¶1 Intro line one line two\n¶2 # Setext Title\n¶3 # not a heading\nfmt.Println()\n¶4 - item one\n¶5 - item two\n¶6 ## Sub\n¶7 ## Closed\n[paragraphs 1-7 of 7]"
	if res.Text != want {
		t.Errorf("doc_read =\n%s\nwant\n%s", res.Text, want)
	}
	if facts.Doc.Headings != 3 || facts.Doc.Title != "Setext Title" {
		t.Errorf("facts = %+v", facts.Doc)
	}
}

func TestDocReadContinuationCoversEveryParagraph(t *testing.T) {
	var blocks []block
	for i := 1; i <= 400; i++ {
		lvl := 0
		if i%50 == 1 {
			lvl = 1
		}
		blocks = append(blocks, block{lvl, fmt.Sprintf("paragraph-%d %s", i, strings.Repeat("filler ", 20))})
	}
	s := newStore(t, 0)
	r := newRegistry(t, s)
	facts := putAs(t, s, writeZip(t, "long.docx", docxParts(blocks, "Long", 40)), "long.docx", "")
	next := regexp.MustCompile(`call doc_read with from_paragraph=(\d+)\]$`)
	seen := map[int]bool{}
	from, calls := 1, 0
	for calls = 0; calls < 100; calls++ {
		res := call(t, r, ToolDocRead, map[string]any{"attachment_id": facts.ID, "from_paragraph": from, "to_paragraph": 400})
		if len(res.Text) > docReadMaxBytes+200 {
			t.Fatalf("one call returned %d bytes", len(res.Text))
		}
		for _, m := range regexp.MustCompile(`¶(\d+) `).FindAllStringSubmatch(res.Text, -1) {
			var n int
			fmt.Sscan(m[1], &n)
			seen[n] = true
		}
		m := next.FindStringSubmatch(res.Text)
		if m == nil {
			break
		}
		fmt.Sscan(m[1], &from)
	}
	if len(seen) != 400 || calls < 2 {
		t.Errorf("continuation reached %d of 400 paragraphs in %d calls", len(seen), calls+1)
	}
}

func TestSpreadsheetsGetSheetsAndCells(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	xlsx := putAs(t, s, makeXLSX(t), "sales.xlsx", "")
	want := []SheetFacts{
		{Name: "Sales", Rows: 200, Cols: 6, HeaderRow: 1, Header: []string{"Region", "Product", "Units", "Price"}, First: 0},
		{Name: "Notes", Rows: 2, Cols: 1, HeaderRow: 1, Header: []string{"Comment"}, First: 200},
		{Name: "Empty", First: 202},
	}
	if fmt.Sprint(xlsx.Sheets) != fmt.Sprint(want) || xlsx.MediaType != mediaXLSX || xlsx.Kind != KindSheet {
		t.Errorf("xlsx facts = %s %s %+v\nwant %+v", xlsx.MediaType, xlsx.Kind, xlsx.Sheets, want)
	}
	note := s.attachment(xlsx, "sales.xlsx", "").Note
	wantAll(t, "note", note, "xlsx, 3 sheets", `"Sales" 200 rows x 6 cols, row 1: Region | Product | Units | Price`, `"Empty" 0 rows x 0 cols`, "sheet_read")

	res := call(t, r, ToolSheetRead, map[string]any{"attachment_id": xlsx.ID, "range": "B10:D11"})
	wantAll(t, "sheet_read", res.Text, "rows 10-11, columns B-D:\nrow\tB\tC\tD\n10\twidget-10\t100\t10.5\n11\twidget-11\t110\t11.5\n[B10:D11]")
	denyAll(t, "sheet_read", res.Text, "Region", "widget-9", "widget-12")

	res = call(t, r, ToolSheetRead, map[string]any{"attachment_id": xlsx.ID, "sheet": "notes"})
	wantAll(t, "sheet_read Notes", res.Text, "2\tthe unicorn budget / spans two lines\n")

	res = call(t, r, ToolSheetRead, map[string]any{"attachment_id": xlsx.ID, "sheet": "Nope"})
	if !res.IsError {
		t.Errorf("unknown sheet answered: %s", res.Text)
	}
	wantAll(t, "unknown sheet", res.Text, `"Sales", "Notes", "Empty"`)

	res = call(t, r, ToolSheetRead, map[string]any{"attachment_id": xlsx.ID, "range": "F200"})
	wantAll(t, "one cell", res.Text, "200\taudited by the unicorn\n[F200:F200]")

	res = call(t, r, ToolSheetSearch, map[string]any{"attachment_id": xlsx.ID, "words": "unicorn"})
	wantAll(t, "sheet_search", res.Text, "Sales!200: F200=audited by the unicorn", "Notes!2: A2=the unicorn budget", "[2 rows matched of 202 searched")

	res = call(t, r, ToolSheetSearch, map[string]any{"attachment_id": xlsx.ID, "words": "widget", "sheet": "Sales", "max_hits": 5})
	wantAll(t, "paged search", res.Text, "Sales!6: B6=widget-6", "[120 rows matched", `115 more after Sales!6: call sheet_search with sheet="Sales" from_row=7]`)

	ods := putAs(t, s, writeZip(t, "b.ods", odsParts()), "b.ods", "")
	want = []SheetFacts{
		{Name: "Budget", Rows: 5, Cols: 3, HeaderRow: 1, Header: []string{"Item", "Cost", "Owner"}},
		{Name: "Second", Rows: 1, Cols: 1, HeaderRow: 1, Header: []string{"alone"}, First: 5},
	}
	if fmt.Sprint(ods.Sheets) != fmt.Sprint(want) || ods.MediaType != mediaODS {
		t.Errorf("ods facts = %s %+v\nwant %+v", ods.MediaType, ods.Sheets, want)
	}
	res = call(t, r, ToolSheetRead, map[string]any{"attachment_id": ods.ID})
	wantAll(t, "ods read", res.Text, "1\tItem\tCost\tOwner\n2\thay\t7\t7\n3\thay\t7\t7\n4\thay\t7\t7\n5\tglitter\t\tthe  unicorn\n[A1:C5]")

	csvFacts := putAs(t, s, writeTemp(t, "x.csv", "\xef\xbb\xbfname;note\nann;\"semi;colon\"\nbob;\"two\nlines\"\n"), "x.csv", "")
	if fmt.Sprint(csvFacts.Sheets) != fmt.Sprint([]SheetFacts{{Name: "Sheet1", Rows: 3, Cols: 2, HeaderRow: 1, Header: []string{"name", "note"}}}) {
		t.Errorf("csv facts = %+v", csvFacts.Sheets)
	}
	res = call(t, r, ToolSheetRead, map[string]any{"attachment_id": csvFacts.ID, "range": "A2:B3"})
	wantAll(t, "csv read", res.Text, "2\tann\tsemi;colon\n3\tbob\ttwo / lines\n")
	// csv is text too: its raw lines stay readable
	if res := call(t, r, ToolFileRead, map[string]any{"attachment_id": csvFacts.ID}); res.IsError {
		t.Errorf("file_read of a csv: %s", res.Text)
	}
	tsv := putAs(t, s, writeTemp(t, "x.tsv", "a,b\tc\n"), "x.tsv", "")
	if fmt.Sprint(tsv.Sheets[0].Header) != "[a,b c]" {
		t.Errorf("tsv header = %q", tsv.Sheets[0].Header)
	}
}

func TestSheetReadContinuationCoversEveryRow(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&b, "row-%d,%s\n", i, strings.Repeat("x", 40))
	}
	s := newStore(t, 0)
	r := newRegistry(t, s)
	facts := putAs(t, s, writeTemp(t, "big.csv", b.String()), "big.csv", "")
	next := regexp.MustCompile(`range="A(\d+):B3000"\]$`)
	seen := map[string]bool{}
	args := map[string]any{"attachment_id": facts.ID, "range": "A1:B3000"}
	calls := 0
	for ; calls < 100; calls++ {
		res := call(t, r, ToolSheetRead, args)
		if len(res.Text) > sheetReadMaxBytes+300 {
			t.Fatalf("one call returned %d bytes", len(res.Text))
		}
		for _, m := range regexp.MustCompile(`\trow-(\d+)\t`).FindAllStringSubmatch(res.Text, -1) {
			seen[m[1]] = true
		}
		m := next.FindStringSubmatch(res.Text)
		if m == nil {
			break
		}
		args["range"] = "A" + m[1] + ":B3000"
	}
	if len(seen) != 3000 || calls < 2 {
		t.Errorf("continuation reached %d of 3000 rows in %d calls", len(seen), calls+1)
	}
}

func TestParseRange(t *testing.T) {
	sh := SheetFacts{Rows: 100, Cols: 8}
	cases := map[string]struct {
		in   string
		want cellRange
		bad  bool
	}{
		"block":       {in: "B2:D40", want: cellRange{2, 2, 4, 40}},
		"one cell":    {in: "c7", want: cellRange{3, 7, 3, 7}},
		"absolute":    {in: "$A$1:$B$2", want: cellRange{1, 1, 2, 2}},
		"columns":     {in: "B:D", want: cellRange{2, 1, 4, 100}},
		"one column":  {in: "E", want: cellRange{5, 1, 5, 100}},
		"rows":        {in: "3:10", want: cellRange{1, 3, 8, 10}},
		"wide column": {in: "AA1:AB2", want: cellRange{27, 1, 28, 2}},
		"backwards":   {in: "D4:B2", bad: true},
		"garbage":     {in: "1A", bad: true},
		"empty side":  {in: "A1:", bad: true},
		"past XFD":    {in: "XFE1", bad: true},
		"row zero":    {in: "A0", bad: true},
		"not a range": {in: "Sales!A1", bad: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseRange(c.in, sh)
			if (err != nil) != c.bad {
				t.Fatalf("err = %v", err)
			}
			if !c.bad && got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestALostIndexIsRebuiltOnceFromTheFile(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	facts := putAs(t, s, makeXLSX(t), "sales.xlsx", "")
	if n := s.extractions.Load(); n != 1 {
		t.Fatalf("Put extracted %d times, want once", n)
	}
	if err := os.Remove(s.indexPath(facts.ID, facts.reading)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		res := call(t, r, ToolSheetRead, map[string]any{"attachment_id": facts.ID, "range": "B5"})
		if !strings.Contains(res.Text, "5\twidget-5\n") {
			t.Fatalf("sheet_read after the index was lost: %s", res.Text)
		}
	}
	if n := s.extractions.Load(); n != 2 {
		t.Errorf("%d extractions, want the Put's and one rebuild", n)
	}
	// a torn index is not trusted either
	if err := os.Truncate(s.indexPath(facts.ID, facts.reading), 100); err != nil {
		t.Fatal(err)
	}
	if res := call(t, r, ToolSheetSearch, map[string]any{"attachment_id": facts.ID, "words": "widget-77"}); !strings.Contains(res.Text, "Sales!77: B77=widget-77") {
		t.Errorf("sheet_search after the index was torn: %s", res.Text)
	}
}

func TestSheetsAndDocumentsRefuseTheOtherKindsTools(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	sheet := putAs(t, s, makeXLSX(t), "sales.xlsx", "")
	doc := putAs(t, s, writeTemp(t, "a.md", "# A\n"), "a.md", "")
	cases := []struct {
		tool, id, want string
	}{
		{ToolDocRead, sheet.ID, "use sheet_read or sheet_search"},
		{ToolSheetRead, doc.ID, "use doc_info, doc_read or doc_search"},
		{ToolPDFRead, sheet.ID, "use sheet_read"},
		{ToolFileRead, sheet.ID, "use sheet_read"}, // an xlsx's raw bytes are zip
	}
	for _, c := range cases {
		res := call(t, r, c.tool, map[string]any{"attachment_id": c.id})
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s: %+v", c.tool, res)
		}
	}
}
