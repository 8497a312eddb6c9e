package attachments

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/agentd/agentd/tools"
)

// A search or read of a big document narrates how far it is; a short one
// stays quiet.
func TestPDFWalksOfABigDocumentReportProgress(t *testing.T) {
	cases := map[string]struct {
		pages int
		walk  func(ctx context.Context, f *os.File) error
		want  []tools.Progress
	}{
		// A first search builds the document's text index: that walk is told.
		"a first search's index of 250 pages": {250, func(ctx context.Context, f *os.File) error {
			return extractPDF(ctx, f.Name(), newIndexWriter(io.Discard))
		}, []tools.Progress{
			{Message: "indexing 250 pages (1-250)", Total: 250},
			{Message: "indexing page 100 of 250", Done: 100, Total: 250},
			{Message: "indexing page 200 of 250", Done: 200, Total: 250},
		}},
		// A document past the index's bounds is searched by walking it.
		"a walked search of 250 pages": {250, func(ctx context.Context, f *os.File) error {
			return walkedSearch(ctx, f, "marker-249")
		}, []tools.Progress{
			{Message: "searching 250 pages (1-250)", Total: 250},
			{Message: "searching page 100 of 250", Done: 100, Total: 250},
			{Message: "searching page 200 of 250", Done: 200, Total: 250},
		}},
		"a read of pages 51-250": {250, func(ctx context.Context, f *os.File) error {
			_, err := pdfReadText(ctx, f, 51, 250, 1<<20)
			return err
		}, []tools.Progress{
			{Message: "reading 200 pages (51-250)", Total: 200},
			{Message: "reading page 150 of 250", Done: 100, Total: 200},
			{Message: "reading page 250 of 250", Done: 200, Total: 200},
		}},
		"a search of 12 pages": {12, func(ctx context.Context, f *os.File) error {
			return walkedSearch(ctx, f, "marker-3")
		}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(makePDF(t, testPDF{Pages: c.pages, Group: 16}))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var got []tools.Progress
			ctx := tools.WithProgress(context.Background(), func(p tools.Progress) { got = append(got, p) })
			if err := c.walk(ctx, f); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("reports %+v, want %+v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("report %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// walkedSearch searches f for word by walking its pages, as pdf_search does
// for a document it cannot index.
func walkedSearch(ctx context.Context, f *os.File, word string) error {
	r, err := openPDF(f)
	if err != nil {
		return err
	}
	_, err = pdfSearchText(ctx, walkedPages(r, "searching"), pdfNumPage(r), []string{word}, 1, 10)
	return err
}
