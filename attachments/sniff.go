package attachments

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
)

// sniffLen is how much of the start http.DetectContentType looks at.
const sniffLen = 512

// sniffer keeps the first bytes of a stream for content sniffing.
type sniffer struct{ head []byte }

func (s *sniffer) Write(p []byte) (int, error) {
	if room := sniffLen - len(s.head); room > 0 {
		s.head = append(s.head, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (s *sniffer) sniff() string { return http.DetectContentType(s.head) }

// newFacts decides the kind from the content first: what the bytes are is
// what the tools can read, whatever a client declared. The declared type
// only decides when the bytes say nothing ("application/octet-stream").
func newFacts(id string, size int64, sniffed, declared string, idx *lineIndexer) Facts {
	mt := sniffed
	if baseType(sniffed) == "application/octet-stream" && size > 0 && declared != "" {
		mt = declared
	}
	if size == 0 {
		mt = "text/plain"
	}
	return Facts{
		ID: id, Size: size, MediaType: mt, Kind: kindOf(mt),
		Lines: idx.lines(), marks: idx.marks,
	}
}

func baseType(mt string) string {
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(mt))
	}
	return t
}

// Media types of the office formats agentd reads.
const (
	mediaXLSX     = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	mediaDOCX     = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	mediaODS      = "application/vnd.oasis.opendocument.spreadsheet"
	mediaODT      = "application/vnd.oasis.opendocument.text"
	mediaCSV      = "text/csv"
	mediaTSV      = "text/tab-separated-values"
	mediaMarkdown = "text/markdown"
	mediaHTML     = "text/html"
)

// kindOf maps a media type to the tools that can read it.
func kindOf(mt string) Kind {
	t := baseType(mt)
	switch {
	case t == "application/pdf":
		return KindPDF
	case t == "image/png", t == "image/jpeg", t == "image/gif", t == "image/webp":
		return KindImage
	case t == mediaXLSX, t == mediaODS, t == mediaCSV, t == mediaTSV:
		return KindSheet
	case t == mediaDOCX, t == mediaODT, t == mediaMarkdown, t == "text/x-markdown", t == mediaHTML:
		return KindDoc
	case strings.HasPrefix(t, "text/"),
		t == "application/json", t == "application/xml", t == "application/yaml",
		t == "application/x-yaml", t == "application/javascript", t == "application/x-ndjson",
		strings.HasSuffix(t, "+json"), strings.HasSuffix(t, "+xml"):
		return KindText
	}
	return KindBinary
}

// refineKind tells the formats sniffing cannot: an office file is a zip to
// http.DetectContentType, so its entries decide; csv and markdown are plain
// text to it, so the declared type or the name's extension decides for
// plain text alone (never turning, say, a PDF into a csv).
func refineKind(path, name, declared string, f *Facts) {
	switch t := baseType(f.MediaType); {
	case t == "application/zip" || t == "application/octet-stream":
		if mt := officeType(path); mt != "" {
			f.MediaType = mt
		} else if mt := officeByName(name, declared); mt != "" {
			f.MediaType = mt // not a readable office file: its note will say why
		}
	case t == "text/plain":
		if k := kindOf(declared); k == KindSheet || k == KindDoc {
			f.MediaType = baseType(declared)
			break
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".csv":
			f.MediaType = mediaCSV
		case ".tsv", ".tab":
			f.MediaType = mediaTSV
		case ".md", ".markdown":
			f.MediaType = mediaMarkdown
		}
	}
	f.Kind = kindOf(f.MediaType)
}

// officeByName is the office format a name or a declared type claims.
func officeByName(name, declared string) string {
	if k := kindOf(declared); (k == KindSheet || k == KindDoc) && !strings.HasPrefix(baseType(declared), "text/") {
		return baseType(declared)
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".xlsx", ".xlsm":
		return mediaXLSX
	case ".docx":
		return mediaDOCX
	case ".ods":
		return mediaODS
	case ".odt":
		return mediaODT
	}
	return ""
}

// addKindFacts reads the facts particular to the kind from the file at path.
// A failure is recorded as the Problem, not returned: a damaged PDF is still
// stored and still reachable through file_read. A sheet or a document is
// read whole here, once: its unit index is written to a temp file whose
// name is returned for commit to put in place ("" when there is none).
func (s *Store) addKindFacts(ctx context.Context, path string, f *Facts) string {
	switch f.Kind {
	case KindPDF:
		n, err := pdfPageCount(path)
		if err != nil {
			f.Problem = "page count unreadable: " + err.Error()
			return ""
		}
		f.Pages = n
	case KindImage:
		w, h, err := imageSize(path)
		if err != nil {
			f.Problem = "dimensions unreadable: " + err.Error()
			return ""
		}
		f.Width, f.Height = w, h
	case KindSheet, KindDoc:
		tmp, err := s.writeIndex(ctx, path, f)
		if err != nil {
			f.Problem = fmt.Sprintf("unreadable as %s: %v", formatName(f.MediaType), err)
			f.Sheets, f.Doc = nil, nil
			return ""
		}
		return tmp
	}
	return ""
}
