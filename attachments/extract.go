package attachments

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// writeIndex extracts the stored file at path into a new unit index in the
// temp directory, filling f with the facts of its kind, and returns the
// temp file's name. A sheet or document past the index bounds keeps what
// was indexed and says so in f.Problem; a PDF past them has no index.
func (s *Store) writeIndex(ctx context.Context, path string, f *Facts) (name string, err error) {
	tmp, err := os.CreateTemp(s.tmpDir(), "idx-*")
	if err != nil {
		return "", fmt.Errorf("index %s: %w", f.ID, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	s.extractions.Add(1)
	w := newIndexWriter(tmp)
	err = s.extract(ctx, path, f, w)
	if errors.Is(err, errIndexFull) && f.Kind != KindPDF {
		f.Problem = fmt.Sprintf("only the first %d units (%d MiB) of its text are readable by the tools", w.units(), indexMaxBytes>>20)
		err = nil
	}
	if err == nil {
		err = w.finish()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	return tmp.Name(), err
}

// extract fills w with the file's units by its format. A panic in a
// parser (a library meeting a file it did not expect) is an error here.
func (s *Store) extract(ctx context.Context, path string, f *Facts, w *indexWriter) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("parser failed: %v", x)
		}
	}()
	switch baseType(f.MediaType) {
	case "application/pdf":
		return extractPDF(ctx, path, w)
	case mediaXLSX:
		return extractXLSX(ctx, path, s.tmpDir(), newSheetBuilder(w, f))
	case mediaODS:
		return extractODS(ctx, path, newSheetBuilder(w, f))
	case mediaCSV, mediaTSV:
		return extractCSV(ctx, path, baseType(f.MediaType) == mediaTSV, newSheetBuilder(w, f))
	case mediaDOCX:
		return extractDOCX(ctx, path, newDocBuilder(w, f, "docx"))
	case mediaODT:
		return extractODT(ctx, path, newDocBuilder(w, f, "odt"))
	case mediaHTML:
		return extractHTML(ctx, path, newDocBuilder(w, f, "html"))
	default: // markdown
		return extractMarkdown(ctx, path, newDocBuilder(w, f, "markdown"))
	}
}

// formatName is the short name of a format, for notes and errors.
func formatName(mt string) string {
	switch baseType(mt) {
	case mediaXLSX:
		return "xlsx"
	case mediaODS:
		return "ods"
	case mediaCSV:
		return "csv"
	case mediaTSV:
		return "tsv"
	case mediaDOCX:
		return "docx"
	case mediaODT:
		return "odt"
	case mediaHTML:
		return "html"
	case mediaMarkdown, "text/x-markdown":
		return "markdown"
	case "application/pdf":
		return "PDF"
	}
	return baseType(mt)
}

// index opens the unit index of a stored file, building it first when it
// is missing (a PDF's first search, or a sidecar lost in a crash). One
// build runs per id however many calls ask; the caller closes the index.
func (s *Store) index(ctx context.Context, facts Facts) (*unitIndex, error) {
	if x, err := s.openIndexFile(facts); err == nil {
		return x, nil
	}
	_, err, _ := s.indexing.Do(facts.ID+"."+facts.reading, func() (any, error) {
		if x, err := s.openIndexFile(facts); err == nil {
			return nil, x.close() // built by a call that just finished
		}
		scratch := facts // the facts were learned at Put; only the units are wanted
		scratch.Sheets, scratch.Doc = nil, nil
		tmp, err := s.writeIndex(ctx, s.blobPath(facts.ID), &scratch)
		if err != nil {
			return nil, err
		}
		defer os.Remove(tmp)
		return nil, os.Rename(tmp, s.indexPath(facts.ID, facts.reading))
	})
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", facts.ID, err)
	}
	return s.openIndexFile(facts)
}

func (s *Store) openIndexFile(facts Facts) (*unitIndex, error) {
	f, err := os.Open(s.indexPath(facts.ID, facts.reading))
	if err != nil {
		return nil, err
	}
	x, err := openIndex(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return x, nil
}

func (x *unitIndex) close() error { return x.f.Close() }
