// Package pdfgen writes minimal valid PDFs of any number of pages, each page
// carrying a known line, so attachment tests can check what was read.
package pdfgen

import (
	"bufio"
	"fmt"
	"io"
)

// Spec describes a PDF for Write to generate.
type Spec struct {
	Pages int
	// group puts pages under intermediate /Pages nodes of this many kids,
	// as real writers do; 0 hangs every page off the root.
	Group int
	// version goes in the header ("1.4", "2.0").
	Version string
	// brokenPages writes garbage where the page objects should be, leaving
	// the trailer, xref and page tree root intact: the page count must
	// still be read, from the index alone.
	BrokenPages bool
}

// PageLine is the text generated on page n; the tests look for it.
func PageLine(n int) string { return fmt.Sprintf("page %d marker-%d", n, n) }

// Write streams a minimal valid PDF (PDF 32000-1:2008 §7.5: header, body,
// cross-reference table, trailer) whose page n shows PageLine(n) in
// Helvetica. Object numbers: 1 catalog, 2 page tree root, 3 font, then the
// intermediate nodes, then a page and its content stream for each page.
func Write(w io.Writer, spec Spec) error {
	bw := bufio.NewWriter(w)
	cw := &countWriter{w: bw}
	groups := 0
	if spec.Group > 0 {
		groups = (spec.Pages + spec.Group - 1) / spec.Group
	}
	firstPage := 4 + groups
	pageID := func(i int) int { return firstPage + 2*i } // i is 0-based
	total := firstPage + 2*spec.Pages
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

	if spec.Version == "" {
		spec.Version = "1.4"
	}
	fmt.Fprintf(cw, "%%PDF-%s\n%%\xe2\xe3\xcf\xd3\n", spec.Version)
	obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	var rootKids []int
	parentOf := func(i int) int { return 2 }
	if groups > 0 {
		for g := range groups {
			rootKids = append(rootKids, 4+g)
		}
		parentOf = func(i int) int { return 4 + i/spec.Group }
	} else {
		for i := range spec.Pages {
			rootKids = append(rootKids, pageID(i))
		}
	}
	obj(2, fmt.Sprintf("<< /Type /Pages /Kids %s /Count %d >>", kids(rootKids), spec.Pages))
	obj(3, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for g := range groups {
		var ids []int
		for i := g * spec.Group; i < min(spec.Pages, (g+1)*spec.Group); i++ {
			ids = append(ids, pageID(i))
		}
		obj(4+g, fmt.Sprintf("<< /Type /Pages /Parent 2 0 R /Kids %s /Count %d >>", kids(ids), len(ids)))
	}
	for i := range spec.Pages {
		if spec.BrokenPages {
			offsets[pageID(i)] = cw.n
			fmt.Fprintf(cw, "garbage %d ]]>> not an object\n", i)
		} else {
			obj(pageID(i), fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] "+
				"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", parentOf(i), pageID(i)+1))
		}
		content := fmt.Sprintf("BT /F1 24 Tf 72 720 Td (%s) Tj ET", PageLine(i+1))
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
