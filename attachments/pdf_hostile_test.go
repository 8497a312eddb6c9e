package attachments

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// costlyPDF writes a two-page PDF whose first page's content stream, shown
// in a font with a ToUnicode map of about mapBytes, inflates to about
// contentBytes of text; the second page is small and shows "page two".
func costlyPDF(t *testing.T, contentBytes, mapBytes int) string {
	t.Helper()
	deflate := func(data []byte) []byte {
		var z bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
		zw.Write(data)
		zw.Close()
		return z.Bytes()
	}
	var content bytes.Buffer
	content.WriteString("BT /F1 12 Tf\n")
	for line := "(" + strings.Repeat("A", 1000) + ") Tj\n"; content.Len() < contentBytes; {
		content.WriteString(line)
	}
	content.WriteString("ET\n")
	var cmap bytes.Buffer
	cmap.WriteString("/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n1 begincodespacerange <00> <FF> endcodespacerange\n")
	for cmap.Len() < mapBytes {
		cmap.WriteString("1 beginbfchar <41> <0041> endbfchar\n")
	}
	cmap.WriteString("endcmap CMapName currentdict /CMap defineresource pop end end\n")

	var b bytes.Buffer
	off := []int{0}
	obj := func(body string) {
		off = append(off, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(off)-1, body)
	}
	stream := func(data []byte) string {
		z := deflate(data)
		return fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", len(z), z)
	}
	b.WriteString("%PDF-1.4\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>")
	obj(stream(content.Bytes()))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 8 0 R >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 7 0 R >>")
	obj(stream([]byte("BT (page two) Tj ET")))
	obj(stream(cmap.Bytes()))
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(off))
	for _, o := range off[1:] {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(off), xref)
	p := filepath.Join(t.TempDir(), "costly.pdf")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestACostlyPDFPageIsNotRead: a page whose streams inflate past
// pdfPageMaxBytes (a few KB of file), or whose content shown through its
// font's map is past pdfPageMaxWork, is not read: pdf_read and pdf_search
// say so for that page and read the others. The library read it whole: a
// 600 KB file that inflated to 256 MiB held one pdf_read for 45 s and a
// gigabyte of memory.
func TestACostlyPDFPageIsNotRead(t *testing.T) {
	old := pdfPageMaxWork
	pdfPageMaxWork = 1 << 30
	t.Cleanup(func() { pdfPageMaxWork = old })
	cases := map[string]struct {
		content, cmap int
		want          string
	}{
		"content inflating past the bound": {content: int(pdfPageMaxBytes) + 1<<20, cmap: 100, want: "over 16.0 MiB unpacked"},
		"content through a big map":        {content: 1 << 20, cmap: 4 << 10, want: "too much work"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 0)
			r := newRegistry(t, s)
			a := putFile(t, s, costlyPDF(t, c.content, c.cmap))
			read := call(t, r, ToolPDFRead, map[string]any{"attachment_id": a.ID, "from_page": 1, "to_page": 2})
			if !strings.Contains(read.Text, "--- page 1 ---\n[text of this page not read: ") || !strings.Contains(read.Text, c.want) || !strings.Contains(read.Text, "page two") {
				t.Errorf("pdf_read: %.300s; want page 1 not read (%q) and page 2 read", read.Text, c.want)
			}
			search := call(t, r, ToolPDFSearch, map[string]any{"attachment_id": a.ID, "words": "page two"})
			if search.IsError || !strings.Contains(search.Text, "page 2:") {
				t.Errorf("pdf_search: %.300s; want page 2 found", search.Text)
			}
		})
	}
}

// xrefPDF writes a one-page PDF whose cross-reference section, at its
// startxref, is the one section returns, given its own offset and those of
// the catalog and the page tree.
func xrefPDF(t *testing.T, section func(at, catalog, pages int) string) string {
	t.Helper()
	body := "%PDF-1.4\n"
	cat := len(body)
	body += "1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
	pages := len(body)
	body += "2 0 obj\n<< /Type /Pages /Kids [] /Count 1 >>\nendobj\n"
	x := len(body)
	body += section(x, cat, pages)
	body += fmt.Sprintf("startxref\n%d\n%%%%EOF\n", x)
	p := filepath.Join(t.TempDir(), "xref.pdf")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAPDFsCrossReferencesAreBoundedBeforeTheLibraryReadsThem: a PDF of a
// few hundred bytes whose cross-reference sections name objects in the
// millions, or link back to themselves, is stored with its note saying
// the page count is unreadable, and costs its upload nothing much. The
// library read them as they were: it sized its table by the largest
// object named (305 MB and 1.5 s for object 10,000,000; a billion took
// the daemon's memory) and followed a /Prev cycle forever, in the upload.
func TestAPDFsCrossReferencesAreBoundedBeforeTheLibraryReadsThem(t *testing.T) {
	table := "xref\n0 3\n0000000000 65535 f \n%010d 00000 n \n%010d 00000 n \n"
	cases := map[string]func(at, catalog, pages int) string{
		"a table naming object 10,000,000": func(_, c, p int) string {
			return fmt.Sprintf(table, c, p) + "10000000 1\n0000000009 00000 n \ntrailer\n<< /Size 3 /Root 1 0 R >>\n"
		},
		"a stream of 8,000,000 objects, its /Size's name escaped": func(int, int, int) string {
			return "3 0 obj\n<< /Type /XRef /S#69ze 8000000 /W [1 4 1] /Root 1 0 R /Length 6 >>\nstream\n\x01\x00\x00\x00\x09\x00\nendstream\nendobj\n"
		},
		"an /Index past the bound behind a comment": func(int, int, int) string {
			return "3 0 obj\n<< /Type /XRef /Size 3 /Index [0 3 % the rest\n 004194300 100] /W [1 4 1] /Root 1 0 R /Length 6 >>\nstream\n\x01\x00\x00\x00\x09\x00\nendstream\nendobj\n"
		},
		"a /Prev linking the table to itself": func(at, c, p int) string {
			return fmt.Sprintf(table, c, p) + fmt.Sprintf("trailer\n<< /Size 3 /Root 1 0 R /Prev %d >>\n", at)
		},
	}
	for name, section := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 0)
			a := putFile(t, s, xrefPDF(t, section))
			facts, err := s.FactsOf(a)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(facts.Problem, "cross-reference sections out of bounds") {
				t.Errorf("problem %q, note %q; want the cross-references refused", facts.Problem, a.Note)
			}
		})
	}
	t.Run("a sound file's sections pass", func(t *testing.T) {
		s := newStore(t, 0)
		a := putFile(t, s, xrefPDF(t, func(_, c, p int) string { return fmt.Sprintf(table, c, p) + "trailer\n<< /Size 3 /Root 1 0 R >>\n" }))
		if facts, err := s.FactsOf(a); err != nil || facts.Problem != "" || facts.Pages != 1 {
			t.Errorf("facts %+v, %v; want 1 page, no problem", facts, err)
		}
	})
}
