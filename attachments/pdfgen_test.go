package attachments

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd/agentd/testkit/pdfgen"
)

type testPDF = pdfgen.Spec

var pageLine = pdfgen.PageLine

// makePDF writes the PDF to a file in t.TempDir and returns its path.
func makePDF(t testing.TB, spec pdfgen.Spec) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "doc.pdf")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pdfgen.Write(f, spec); err != nil {
		t.Fatal(err)
	}
	return p
}
