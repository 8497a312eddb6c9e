package attachments

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// testPDF describes a PDF for writePDF to generate.
type testPDF struct {
	pages int
	// group puts pages under intermediate /Pages nodes of this many kids,
	// as real writers do; 0 hangs every page off the root.
	group int
	// version goes in the header ("1.4", "2.0").
	version string
	// brokenPages writes garbage where the page objects should be, leaving
	// the trailer, xref and page tree root intact: the page count must
	// still be read, from the index alone.
	brokenPages bool
}

// pageLine is the text generated on page n; the tests look for it.
func pageLine(n int) string { return fmt.Sprintf("page %d marker-%d", n, n) }

// writePDF streams a minimal valid PDF (PDF 32000-1:2008 §7.5: header, body,
// cross-reference table, trailer) whose page n shows pageLine(n) in
// Helvetica. Object numbers: 1 catalog, 2 page tree root, 3 font, then the
// intermediate nodes, then a page and its content stream for each page.
func writePDF(w io.Writer, spec testPDF) error {
	bw := bufio.NewWriter(w)
	cw := &countWriter{w: bw}
	groups := 0
	if spec.group > 0 {
		groups = (spec.pages + spec.group - 1) / spec.group
	}
	firstPage := 4 + groups
	pageID := func(i int) int { return firstPage + 2*i } // i is 0-based
	total := firstPage + 2*spec.pages
	offsets := make([]int64, total)

	obj := func(id int, body string) {
		offsets[id] = cw.n
		fmt.Fprintf(cw, "%d 0 obj\n%s\nendobj\n", id, body)
	}
	kids := func(ids []int) string {
		s := "["
		for _, id := range ids {
			s += fmt.Sprintf("%d 0 R ", id)
		}
		return s + "]"
	}

	fmt.Fprintf(cw, "%%PDF-%s\n%%\xe2\xe3\xcf\xd3\n", spec.version)
	obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	var rootKids []int
	parentOf := func(i int) int { return 2 }
	if groups > 0 {
		for g := range groups {
			rootKids = append(rootKids, 4+g)
		}
		parentOf = func(i int) int { return 4 + i/spec.group }
	} else {
		for i := range spec.pages {
			rootKids = append(rootKids, pageID(i))
		}
	}
	obj(2, fmt.Sprintf("<< /Type /Pages /Kids %s /Count %d >>", kids(rootKids), spec.pages))
	obj(3, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for g := range groups {
		var ids []int
		for i := g * spec.group; i < min(spec.pages, (g+1)*spec.group); i++ {
			ids = append(ids, pageID(i))
		}
		obj(4+g, fmt.Sprintf("<< /Type /Pages /Parent 2 0 R /Kids %s /Count %d >>", kids(ids), len(ids)))
	}
	for i := range spec.pages {
		if spec.brokenPages {
			offsets[pageID(i)] = cw.n
			fmt.Fprintf(cw, "garbage %d ]]>> not an object\n", i)
		} else {
			obj(pageID(i), fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] "+
				"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", parentOf(i), pageID(i)+1))
		}
		content := fmt.Sprintf("BT /F1 24 Tf 72 720 Td (%s) Tj ET", pageLine(i+1))
		obj(pageID(i)+1, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	}

	xref := cw.n
	fmt.Fprintf(cw, "xref\n0 %d\n0000000000 65535 f \n", total)
	for id := 1; id < total; id++ {
		fmt.Fprintf(cw, "%010d 00000 n \n", offsets[id]) // each entry is exactly 20 bytes
	}
	fmt.Fprintf(cw, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", total, xref)
	return bw.Flush()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// makePDF writes the PDF to a file in t.TempDir and returns its path.
func makePDF(t testing.TB, spec testPDF) string {
	t.Helper()
	if spec.version == "" {
		spec.version = "1.4"
	}
	p := filepath.Join(t.TempDir(), "doc.pdf")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := writePDF(f, spec); err != nil {
		t.Fatal(err)
	}
	return p
}
