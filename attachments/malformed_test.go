package attachments

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// truncated keeps the first half of the file at path.
func truncated(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, "cut-"+filepath.Base(path), string(b[:len(b)/2]))
}

func manyEntries(t *testing.T) string {
	parts := [][2]string{{"word/document.xml", "<w:document/>"}}
	for i := 0; i < zipMaxEntries; i++ {
		parts = append(parts, [2]string{fmt.Sprintf("junk/%d", i), ""})
	}
	return writeZip(t, "many.docx", parts)
}

func TestMalformedOfficeFilesGetAClearProblemAndStayReachable(t *testing.T) {
	old := zipMaxEntryBytes
	zipMaxEntryBytes = 1 << 20
	t.Cleanup(func() { zipMaxEntryBytes = old })
	// 4 MiB of markup that deflates to a few KiB: a small zip bomb
	bomb := docxParts(nil, "x", 1)
	bomb[1][1] = `<w:document ` + wNS + `><w:body>` + strings.Repeat("<w:p/>", 700_000) + `</w:body></w:document>`
	deep := docxParts(nil, "x", 1)
	deep[1][1] = `<w:document ` + wNS + `>` + strings.Repeat("<w:p>", 300) + strings.Repeat("</w:p>", 300) + `</w:document>`
	badXLSX := [][2]string{{"[Content_Types].xml", "<Types/>"}, {"xl/workbook.xml", "<workbook><<<"}}
	cases := map[string]struct {
		path, name string
		tool       string
		want       string
	}{
		"not a zip, named xlsx":  {path: writeTemp(t, "a.xlsx", "\x00\x01\x02 no spreadsheet"), name: "a.xlsx", tool: ToolSheetRead, want: "unreadable as xlsx"},
		"truncated docx":         {path: truncated(t, writeZip(t, "r.docx", docxParts(sampleBlocks, "t", 1))), name: "r.docx", tool: ToolDocRead, want: "unreadable as docx: zip: not a valid zip file"},
		"truncated xlsx":         {path: truncated(t, makeXLSX(t)), name: "s.xlsx", tool: ToolSheetSearch, want: "unreadable as xlsx"},
		"zip bomb":               {path: writeZip(t, "bomb.docx", bomb), name: "bomb.docx", tool: ToolDocInfo, want: "over 1.0 MiB unpacked"},
		"XML nested too deep":    {path: writeZip(t, "deep.docx", deep), name: "deep.docx", tool: ToolDocSearch, want: "XML nested over 256 deep"},
		"too many entries":       {path: manyEntries(t), name: "many.docx", tool: ToolDocRead, want: "entries, over the 10000 read"},
		"xlsx with broken parts": {path: writeZip(t, "b.xlsx", badXLSX), name: "b.xlsx", tool: ToolSheetRead, want: "unreadable as xlsx"},
		"odt without content":    {path: writeZip(t, "e.odt", [][2]string{{"mimetype", mediaODT}}), name: "e.odt", tool: ToolDocRead, want: "content.xml: no such part"},
		"csv with a huge line":   {path: writeTemp(t, "h.csv", "a,b\n"+strings.Repeat("x", csvMaxLine+10)+"\n"), name: "h.csv", tool: ToolSheetRead, want: "a line is over 4 MiB"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, 0)
			r := newRegistry(t, s)
			facts := putAs(t, s, c.path, c.name, "")
			note := s.attachment(facts, c.name, "").Note
			if !strings.Contains(note, c.want) || !strings.Contains(note, "file_read") {
				t.Errorf("note lacks %q or file_read: %s", c.want, note)
			}
			args := map[string]any{"attachment_id": facts.ID}
			if strings.HasSuffix(c.tool, "_search") {
				args["words"] = "x"
			}
			res := call(t, r, c.tool, args)
			if !res.IsError || !strings.Contains(res.Text, "could not be read") || !strings.Contains(res.Text, "file_read") {
				t.Errorf("%s on a malformed file: %+v", c.tool, res)
			}
			args["words"] = "x"
			if res := call(t, r, ToolFileSearch, args); res.IsError {
				t.Errorf("file_search of a malformed file: %s", res.Text)
			}
		})
	}
}

func TestHTMLThatIsNotWellFormedStillReads(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	facts := putAs(t, s, writeTemp(t, "p.html", "<html><h2>Open <i>heading<p>first para<div>second &amp; <span>last</table></li>"), "p.html", "")
	res := call(t, r, ToolDocRead, map[string]any{"attachment_id": facts.ID})
	want := "¶1 ## Open heading\n¶2 first para\n¶3 second & last\n[paragraphs 1-3 of 3]"
	if res.Text != want {
		t.Errorf("doc_read =\n%s\nwant\n%s", res.Text, want)
	}
}

func TestUnitIndexRefusesATornFile(t *testing.T) {
	var buf bytes.Buffer
	w := newIndexWriter(&buf)
	for _, u := range []string{"one", "", "three"} {
		if err := w.add([]byte(u)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	for cut := 0; cut < len(whole); cut++ {
		p := filepath.Join(t.TempDir(), "idx")
		if err := os.WriteFile(p, whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := openIndex(f); err == nil {
			t.Errorf("an index cut at %d of %d bytes was accepted", cut, len(whole))
		}
		f.Close()
	}
}

func TestReadPartStopsAtTheBound(t *testing.T) {
	old := zipMaxEntryBytes
	zipMaxEntryBytes = 1000
	t.Cleanup(func() { zipMaxEntryBytes = old })
	p := writeZip(t, "z.zip", [][2]string{{"big", strings.Repeat("a", 1001)}, {"exact", strings.Repeat("b", 1000)}})
	zr, err := zip.OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	read := func(name string) (int64, error) {
		var n int64
		err := readPart(zr, name, func(r io.Reader) error {
			var err error
			n, err = io.Copy(io.Discard, r)
			return err
		})
		return n, err
	}
	if n, err := read("big"); err == nil || !strings.Contains(err.Error(), "over 1000 B unpacked") {
		t.Errorf("a part past the bound read %d bytes, err %v", n, err)
	}
	if n, err := read("exact"); err != nil || n != 1000 {
		t.Errorf("a part at the bound: %d bytes, err %v", n, err)
	}
}

func TestPropertyUnitIndexGivesBackWhatWasAdded(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		units := rapid.SliceOf(rapid.SliceOfN(rapid.Byte(), 0, 300)).Draw(rt, "units")
		p := filepath.Join(dir, "idx")
		f, err := os.Create(p)
		if err != nil {
			rt.Fatal(err)
		}
		defer f.Close()
		w := newIndexWriter(f)
		for _, u := range units {
			if err := w.add(u); err != nil {
				rt.Fatal(err)
			}
		}
		if err := w.finish(); err != nil {
			rt.Fatal(err)
		}
		x, err := openIndex(f)
		if err != nil {
			rt.Fatal(err)
		}
		if x.n != len(units) {
			rt.Fatalf("%d units, want %d", x.n, len(units))
		}
		for i, u := range units {
			if got, err := x.unit(i); err != nil || !bytes.Equal(got, u) {
				rt.Fatalf("unit %d = %q, %v; want %q", i, got, err, u)
			}
		}
		from := rapid.IntRange(0, len(units)).Draw(rt, "from")
		next := from
		err = x.each(from, func(i int, u []byte) (bool, error) {
			if i != next || !bytes.Equal(u, units[i]) {
				rt.Fatalf("each gave unit %d = %q, want unit %d = %q", i, u, next, units[next])
			}
			next++
			return true, nil
		})
		if err != nil || next != len(units) {
			rt.Fatalf("each stopped at %d of %d: %v", next, len(units), err)
		}
	})
}
