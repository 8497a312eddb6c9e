package attachments

import (
	"mime"
	"net/http"
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

// kindOf maps a media type to the tools that can read it.
func kindOf(mt string) Kind {
	t := baseType(mt)
	switch {
	case t == "application/pdf":
		return KindPDF
	case t == "image/png", t == "image/jpeg", t == "image/gif", t == "image/webp":
		return KindImage
	case strings.HasPrefix(t, "text/"),
		t == "application/json", t == "application/xml", t == "application/yaml",
		t == "application/x-yaml", t == "application/javascript", t == "application/x-ndjson",
		strings.HasSuffix(t, "+json"), strings.HasSuffix(t, "+xml"):
		return KindText
	}
	return KindBinary
}

// addKindFacts reads the facts particular to the kind from the file at path.
// A failure is recorded as the Problem, not returned: a damaged PDF is still
// stored and still reachable through file_read.
func addKindFacts(path string, f *Facts) {
	switch f.Kind {
	case KindPDF:
		n, err := pdfPageCount(path)
		if err != nil {
			f.Problem = "page count unreadable: " + err.Error()
			return
		}
		f.Pages = n
	case KindImage:
		w, h, err := imageSize(path)
		if err != nil {
			f.Problem = "dimensions unreadable: " + err.Error()
			return
		}
		f.Width, f.Height = w, h
	}
}
