package attachments

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Speed lives here, never in test assertions. Run with
// go test -run XXX -bench . -benchtime 5x ./attachments/

func BenchmarkPut64MB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.log")
	writeBigText(b, path, 64<<20)
	b.SetBytes(64 << 20)
	for b.Loop() {
		putFile(b, newStore(b, 0), path)
	}
}

func BenchmarkFileReadDeepLine(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.log")
	writeBigText(b, path, 64<<20)
	s := newStore(b, 0)
	r := newRegistry(b, s)
	a := putFile(b, s, path)
	for b.Loop() {
		call(b, r, ToolFileRead, map[string]any{"attachment_id": a.ID, "from_line": 2_000_000, "to_line": 2_000_199})
	}
}

func BenchmarkFileSearch64MB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.log")
	writeBigText(b, path, 64<<20)
	s := newStore(b, 0)
	r := newRegistry(b, s)
	a := putFile(b, s, path)
	b.SetBytes(64 << 20)
	for b.Loop() {
		call(b, r, ToolFileSearch, map[string]any{"attachment_id": a.ID, "words": "line 2000000 lorem"})
	}
}

func BenchmarkPDFReadPage2500(b *testing.B) {
	s := newStore(b, 0)
	r := newRegistry(b, s)
	a := putFile(b, s, makePDF(b, testPDF{Pages: 3000, Group: 100}))
	for b.Loop() {
		call(b, r, ToolPDFRead, map[string]any{"attachment_id": a.ID, "from_page": 2500, "to_page": 2500})
	}
}

// BenchmarkPDFSearch3000Pages is a search once the text is indexed (the
// first search's work is BenchmarkPDFFirstSearch3000Pages).
func BenchmarkPDFSearch3000Pages(b *testing.B) {
	s := newStore(b, 0)
	r := newRegistry(b, s)
	a := putFile(b, s, makePDF(b, testPDF{Pages: 3000, Group: 100}))
	call(b, r, ToolPDFSearch, map[string]any{"attachment_id": a.ID, "words": "marker-1"})
	for b.Loop() {
		call(b, r, ToolPDFSearch, map[string]any{"attachment_id": a.ID, "words": "marker-2999"})
	}
}

func BenchmarkPDFFirstSearch3000Pages(b *testing.B) {
	s := newStore(b, 0)
	r := newRegistry(b, s)
	a := putFile(b, s, makePDF(b, testPDF{Pages: 3000, Group: 100}))
	for b.Loop() {
		b.StopTimer()
		if err := os.Remove(s.indexPath(a.ID, readingOf(a.Name, a.MediaType))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.Fatal(err)
		}
		b.StartTimer()
		call(b, r, ToolPDFSearch, map[string]any{"attachment_id": a.ID, "words": "marker-2999"})
	}
}
