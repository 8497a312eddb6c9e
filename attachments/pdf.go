package attachments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ledongthuc/pdf"

	"github.com/agentd/agentd/tools"
)

// Why github.com/ledongthuc/pdf (a maintained fork of rsc.io/pdf) and not
// pdfcpu: pdfcpu v0.15.0 reads a whole document into its context (every
// object of the xref table is dereferenced) before it answers PageCount, and
// it has no text extraction. ledongthuc/pdf reads only the trailer and the
// cross-reference index when it opens a file and resolves objects lazily, so
// the page count is the page tree root's /Count reached through
// trailer → /Root → /Pages, and reading page 2,500 touches only the tree
// nodes above it and that page's own objects.

// pdfWalkBudget bounds the page-tree nodes one walk may visit, so a
// malicious tree whose kids point back at their ancestors cannot loop.
const (
	pdfWalkBudget = 1 << 22
	pdfMaxDepth   = 64
)

// openPDF opens a PDF for lazy reading, once checkXrefs finds its
// cross-reference sections within bounds. The library panics on some
// damaged files; the panic is turned into an error here, at our package
// line.
func openPDF(f *os.File) (r *pdf.Reader, err error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkXrefs(f, info.Size()); err != nil {
		return nil, err
	}
	defer recoverPDF(&err)
	return pdf.NewReader(fixHeader(f), info.Size())
}

func recoverPDF(err *error) {
	if x := recover(); x != nil {
		*err = fmt.Errorf("damaged PDF: %v", x)
	}
}

// pdfPageCount reads the page count from the document's own index.
func pdfPageCount(path string) (n int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := openPDF(f)
	if err != nil {
		return 0, err
	}
	defer recoverPDF(&err)
	n = r.NumPage()
	if n <= 0 {
		return 0, errors.New("page tree has no /Count")
	}
	return n, nil
}

// headerFixer presents a header the library accepts. It insists on
// "%PDF-1.0".."%PDF-1.7" followed by an end of line, which refuses PDF 2.0
// files and headers followed by a comment on the same line; only the xref
// offsets matter for reading, so the first nine bytes are shown as
// "%PDF-1.7\n" whenever they differ from an accepted form.
type headerFixer struct {
	r    io.ReaderAt
	head []byte
}

func fixHeader(r io.ReaderAt) io.ReaderAt {
	head := make([]byte, 9)
	if n, _ := r.ReadAt(head, 0); n < 9 || !bytes.HasPrefix(head, []byte("%PDF-")) {
		return r // not a PDF: let the library say so
	}
	if bytes.HasPrefix(head, []byte("%PDF-1.")) && head[7] >= '0' && head[7] <= '7' && (head[8] == '\n' || head[8] == '\r') {
		return r
	}
	return headerFixer{r: r, head: []byte("%PDF-1.7\n")}
}

func (h headerFixer) ReadAt(p []byte, off int64) (int, error) {
	n, err := h.r.ReadAt(p, off)
	for i := 0; i < n && off+int64(i) < int64(len(h.head)); i++ {
		p[i] = h.head[off+int64(i)]
	}
	return n, err
}

// pdfProgressPages is how many pages a walk reads between two progress
// reports; a shorter walk reports nothing.
const pdfProgressPages = 100

// narrated wraps a walk's visit so a long walk of a big document tells the
// caller how far it is (tools.ReportProgress), at its start and every
// pdfProgressPages pages: a first search of 3,000 pages is not silence.
func narrated(ctx context.Context, verb string, from, to int, visit func(n int, p pdf.Page) bool) func(n int, p pdf.Page) bool {
	total := to - from + 1
	if total < pdfProgressPages {
		return visit
	}
	tools.ReportProgress(ctx, tools.Progress{Message: fmt.Sprintf("%s %d pages (%d-%d)", verb, total, from, to), Total: total})
	return func(n int, p pdf.Page) bool {
		if done := n - from + 1; done%pdfProgressPages == 0 {
			tools.ReportProgress(ctx, tools.Progress{Message: fmt.Sprintf("%s page %d of %d", verb, n, to), Done: done, Total: total})
		}
		return visit(n, p)
	}
}

// walkPages calls visit for pages from..to (1-based, inclusive) in order,
// skipping whole subtrees before from by their /Count. visit returns false
// to stop.
func walkPages(ctx context.Context, r *pdf.Reader, from, to int, visit func(n int, p pdf.Page) bool) (err error) {
	defer recoverPDF(&err)
	n, budget := 0, pdfWalkBudget
	var walk func(node pdf.Value, depth int) (bool, error)
	walk = func(node pdf.Value, depth int) (bool, error) {
		if depth > pdfMaxDepth {
			return false, errors.New("page tree too deep")
		}
		kids := node.Key("Kids")
		for i := 0; i < kids.Len(); i++ {
			if budget--; budget < 0 {
				return false, errors.New("page tree too large or cyclic")
			}
			if err := ctx.Err(); err != nil {
				return false, err
			}
			kid := kidAt(kids, i)
			if isPagesNode(kid) {
				if c := int(kid.Key("Count").Int64()); c > 0 && n+c < from {
					n += c
					continue
				}
				if more, err := walk(kid, depth+1); !more || err != nil {
					return false, err
				}
				continue
			}
			n++
			if n < from {
				continue
			}
			if n > to || !visit(n, pdf.Page{V: kid}) {
				return false, nil
			}
		}
		return true, nil
	}
	_, err = walk(r.Trailer().Key("Root").Key("Pages"), 0)
	return err
}

// inherited looks a page attribute up the tree, as the spec lets pages
// inherit MediaBox and Resources from their ancestors.
func inherited(v pdf.Value, key string) pdf.Value {
	for depth := 0; !v.IsNull() && depth <= pdfMaxDepth; depth++ {
		if r := v.Key(key); !r.IsNull() {
			return r
		}
		v = v.Key("Parent")
	}
	return pdf.Value{}
}

// kidAt resolves one kid; an unreadable one comes back null, which
// pageText reports for that page alone.
func kidAt(kids pdf.Value, i int) (kid pdf.Value) {
	defer func() {
		if recover() != nil {
			kid = pdf.Value{}
		}
	}()
	return kids.Index(i)
}

// isPagesNode tells an inner node of the page tree from a page. A kid that
// cannot be read is taken for a page, so that one damaged page object costs
// that page's text (pageText marks it), not the whole range.
func isPagesNode(v pdf.Value) (inner bool) {
	defer func() {
		if recover() != nil {
			inner = false
		}
	}()
	t := v.Key("Type").Name()
	return t == "Pages" || t == "" && v.Key("Kids").Kind() == pdf.Array
}

// The library reads a page's text whole, with no way to stop it: its
// content streams unpacked into memory at a few MB a second, each code
// shown looked up through every entry of its font's ToUnicode map. So a
// page is read only within these bounds, measured first by unpacking its
// streams into nothing: its content streams and its fonts' ToUnicode maps
// unpacked (pdfPageMaxBytes), and the maps' bytes times the content's
// (pdfPageMaxWork, which a real page with a full CJK map is far below).
// A 600 KB PDF whose page inflated to 256 MiB held a pdf_read for 45 s
// and a gigabyte of memory. Variables only so a test can lower them.
var (
	pdfPageMaxBytes int64 = 16 << 20
	pdfPageMaxWork  int64 = 1 << 37
)

// pageText extracts one page's text; a page the library cannot read, or
// past the bounds above, yields a marker rather than failing the whole
// range.
func pageText(p pdf.Page) (text string) {
	defer func() {
		if x := recover(); x != nil {
			text = fmt.Sprintf("[text of this page unreadable: %v]", x)
		}
	}()
	if p.V.IsNull() {
		return "[this page's object is unreadable]"
	}
	if why := pageTooCostly(p); why != "" {
		return "[text of this page not read: " + why + "]"
	}
	t, err := p.GetPlainText(nil)
	if err != nil {
		return fmt.Sprintf("[text of this page unreadable: %v]", err)
	}
	return strings.TrimSpace(t)
}

// pageTooCostly says why reading p's text would pass the bounds, or "".
// It may panic on a damaged page, as the library does.
func pageTooCostly(p pdf.Page) string {
	content := streamsBytes(p.V.Key("Contents"), pdfPageMaxBytes)
	maps := int64(0)
	fonts := p.Resources().Key("Font")
	for _, name := range fonts.Keys() {
		if content+maps > pdfPageMaxBytes {
			break
		}
		maps += streamsBytes(fonts.Key(name).Key("ToUnicode"), pdfPageMaxBytes-content-maps)
	}
	switch {
	case content+maps > pdfPageMaxBytes:
		return fmt.Sprintf("its content and fonts' maps are over %s unpacked", humanSize(pdfPageMaxBytes))
	case maps > 0 && content > pdfPageMaxWork/maps:
		return fmt.Sprintf("its %s of content through %s of fonts' maps is too much work", humanSize(content), humanSize(maps))
	}
	return ""
}

// streamsBytes unpacks v (a stream, or an array of streams as a page's
// contents may be) into nothing, and returns its bytes, or limit+1 once it
// is over limit. What is not a stream counts nothing.
func streamsBytes(v pdf.Value, limit int64) int64 {
	if v.Kind() == pdf.Array {
		var n int64
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += streamsBytes(v.Index(i), limit-n)
		}
		return min(n, limit+1)
	}
	if v.Kind() != pdf.Stream {
		return 0
	}
	r := v.Reader()
	defer r.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(r, limit+1))
	return n
}

// pdfInfoText describes the document: page count, version, metadata and
// the first page's size.
func pdfInfoText(f *os.File, facts Facts) (text string, err error) {
	r, err := openPDF(f)
	if err != nil {
		return "", err
	}
	defer recoverPDF(&err)
	var b strings.Builder
	fmt.Fprintf(&b, "PDF, %d pages, %s.\n", r.NumPage(), humanSize(facts.Size))
	head := make([]byte, 8)
	if _, err := f.ReadAt(head, 0); err == nil {
		fmt.Fprintf(&b, "Version: %s\n", strings.TrimPrefix(string(head), "%PDF-"))
	}
	info := r.Trailer().Key("Info")
	for _, k := range []string{"Title", "Author", "Subject", "Creator", "Producer", "CreationDate"} {
		if v := info.Key(k); v.Kind() == pdf.String && v.Text() != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, clip(v.Text(), 200))
		}
	}
	if r.Trailer().Key("Encrypt").Kind() != pdf.Null {
		b.WriteString("Encrypted: yes\n")
	}
	_ = walkPages(context.Background(), r, 1, 1, func(_ int, p pdf.Page) bool {
		if box := inherited(p.V, "MediaBox"); box.Len() == 4 {
			w := box.Index(2).Float64() - box.Index(0).Float64()
			h := box.Index(3).Float64() - box.Index(1).Float64()
			fmt.Fprintf(&b, "Page 1 size: %.0f x %.0f pt\n", w, h)
		}
		return false
	})
	b.WriteString("Use pdf_search to find pages by words and pdf_read for page ranges.")
	return b.String(), nil
}

// pdfReadText returns the text of pages from..to, stopping before the text
// passes maxBytes and saying where to go on.
func pdfReadText(ctx context.Context, f *os.File, from, to, maxBytes int) (string, error) {
	r, err := openPDF(f)
	if err != nil {
		return "", err
	}
	total := pdfNumPage(r)
	if from > total {
		return fmt.Sprintf("The document has %d pages; from_page %d is past the end.", total, from), nil
	}
	to = min(to, total)
	var b strings.Builder
	last := from - 1
	err = walkPages(ctx, r, from, to, narrated(ctx, "reading", from, to, func(n int, p pdf.Page) bool {
		page := fmt.Sprintf("--- page %d ---\n%s\n", n, pageText(p))
		if b.Len() > 0 && b.Len()+len(page) > maxBytes {
			return false
		}
		if len(page) > maxBytes {
			page = page[:maxBytes] + fmt.Sprintf("\n[page %d cut at %d bytes]\n", n, maxBytes)
		}
		b.WriteString(page)
		last = n
		return true
	}))
	if err != nil {
		return "", err
	}
	switch {
	case last < to:
		fmt.Fprintf(&b, "[pages %d-%d of %d shown; the rest did not fit in one call: call pdf_read with from_page=%d]", from, last, total, last+1)
	default:
		fmt.Fprintf(&b, "[pages %d-%d of %d]", from, last, total)
	}
	return b.String(), nil
}

func pdfNumPage(r *pdf.Reader) (n int) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return r.NumPage()
}

// pageSource yields the text of pages from one on, in order, until visit
// returns false: from the unit index, or by walking the page tree.
type pageSource func(ctx context.Context, from int, visit func(n int, text string) bool) error

// indexPages reads pages from a unit index: page n is unit n-1.
func indexPages(x *unitIndex) pageSource {
	return func(ctx context.Context, from int, visit func(n int, text string) bool) error {
		return x.each(from-1, func(i int, unit []byte) (bool, error) {
			if i%256 == 0 && ctx.Err() != nil {
				return false, ctx.Err()
			}
			return visit(i+1, string(unit)), nil
		})
	}
}

// walkedPages extracts each page's text from the document itself; a long
// walk is narrated with verb.
func walkedPages(r *pdf.Reader, verb string) pageSource {
	return func(ctx context.Context, from int, visit func(n int, text string) bool) error {
		to := pdfNumPage(r)
		return walkPages(ctx, r, from, to, narrated(ctx, verb, from, to, func(n int, p pdf.Page) bool { return visit(n, pageText(p)) }))
	}
}

// extractPDF writes every page's text into w, one unit a page.
func extractPDF(ctx context.Context, path string, w *indexWriter) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := openPDF(f)
	if err != nil {
		return err
	}
	var addErr error
	err = walkedPages(r, "indexing")(ctx, 1, func(_ int, text string) bool {
		addErr = w.add([]byte(text))
		return addErr == nil
	})
	return errors.Join(err, addErr)
}

// pdfSearchText finds the pages, from fromPage on, whose text holds every
// word (case-insensitive), with a snippet around the first word.
func pdfSearchText(ctx context.Context, pages pageSource, total int, words []string, fromPage, maxHits int) (string, error) {
	m := newMatcher(words)
	var b strings.Builder
	hits, more, lastShown := 0, 0, 0
	err := pages(ctx, fromPage, func(n int, text string) bool {
		if !m.match([]byte(text)) {
			return true
		}
		if hits >= maxHits {
			more++
			return true
		}
		hits++
		lastShown = n
		fmt.Fprintf(&b, "page %d: %s\n", n, m.snippet(text, 160))
		return true
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "[%d pages matched of %d searched (pages %d-%d)", hits+more, max(0, total-fromPage+1), fromPage, total)
	if more > 0 {
		fmt.Fprintf(&b, "; %d more after page %d: call pdf_search with from_page=%d", more, lastShown, lastShown+1)
	}
	b.WriteString("]")
	return b.String(), nil
}
