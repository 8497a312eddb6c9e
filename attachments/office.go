package attachments

import (
	"archive/zip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// docx, odt and ods are zip archives of XML parts, read here with
// archive/zip and encoding/xml rather than a library: agentd needs only the
// paragraphs, headings, cells and a few metadata fields, which are a stream
// of elements in one part; the Go libraries for these formats build the
// whole document model in memory and set no bounds of their own. (xlsx,
// whose shared strings, number formats and dates are a real job, goes
// through excelize, which streams rows.)

// Bounds on what an office file may make agentd unpack: a zip bomb stops at
// them with an error in the note instead of filling memory or disk.
const (
	zipMaxEntries    = 10_000
	zipMaxTotalBytes = 256 << 20
	xmlMaxDepth      = 256
)

// zipMaxEntryBytes bounds one part unpacked; a variable only so that a
// test can show the bound on a small file.
var zipMaxEntryBytes int64 = 128 << 20

// openZip opens an office file and refuses one with too many entries.
func openZip(path string) (*zip.ReadCloser, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, err
	}
	if len(zr.File) > zipMaxEntries {
		zr.Close()
		return nil, fmt.Errorf("zip has %d entries, over the %d read", len(zr.File), zipMaxEntries)
	}
	return zr, nil
}

// errNoEntry: the part is not in the archive.
var errNoEntry = errors.New("no such part")

// readPart streams one part of the archive to visit through a reader that
// fails past zipMaxEntryBytes, whatever the part's header claims.
func readPart(zr *zip.ReadCloser, name string, visit func(io.Reader) error) error {
	for _, f := range zr.File {
		if f.Name != name {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer rc.Close()
		if err := visit(&capReader{r: rc, left: zipMaxEntryBytes}); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("%s: %w", name, errNoEntry)
}

// capReader fails once more than left bytes have come out of r.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(int64(len(p)), c.left+1)])
	if c.left -= int64(n); c.left < 0 {
		return 0, fmt.Errorf("part is over %s unpacked", humanSize(zipMaxEntryBytes))
	}
	return n, err
}

// officeType tells an office file by its parts: an ODF file names its type
// in its "mimetype" part, an OOXML file by where its main part is.
func officeType(path string) string {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return ""
	}
	defer zr.Close()
	var mt string
	for _, f := range zr.File {
		switch f.Name {
		case "mimetype":
			if rc, err := f.Open(); err == nil {
				b, _ := io.ReadAll(io.LimitReader(rc, 128))
				rc.Close()
				switch strings.TrimSpace(string(b)) {
				case mediaODS:
					return mediaODS
				case mediaODT:
					return mediaODT
				}
			}
		case "xl/workbook.xml":
			mt = mediaXLSX
		case "word/document.xml":
			mt = mediaDOCX
		}
	}
	return mt
}

// walkXML calls visit for each token of an XML part, with the depth of
// element nesting, refusing a part nested deeper than xmlMaxDepth.
func walkXML(ctx context.Context, r io.Reader, visit func(tok xml.Token, depth int) error) error {
	d := xml.NewDecoder(r)
	depth := 0
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			if depth++; depth > xmlMaxDepth {
				return fmt.Errorf("XML nested over %d deep", xmlMaxDepth)
			}
		case xml.EndElement:
			depth--
		}
		if err := visit(tok, depth); err != nil {
			return err
		}
	}
}

func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// attrInt reads a repeat count or a level; a missing or bad one is def.
func attrInt(e xml.StartElement, local string, def int) int {
	n, err := strconv.Atoi(attr(e, local))
	if err != nil || n < 1 {
		return def
	}
	return n
}

// metaFields reads the text of the named elements of a small metadata part
// (docProps/core.xml, meta.xml), and the named attributes of any element.
func metaFields(ctx context.Context, zr *zip.ReadCloser, part string, elems, attrs []string) map[string]string {
	out := map[string]string{}
	var cur string
	_ = readPart(zr, part, func(r io.Reader) error {
		return walkXML(ctx, r, func(tok xml.Token, _ int) error {
			switch t := tok.(type) {
			case xml.StartElement:
				cur = ""
				for _, e := range elems {
					if t.Name.Local == e {
						cur = e
					}
				}
				for _, a := range attrs {
					if v := attr(t, a); v != "" {
						out[a] = v
					}
				}
			case xml.CharData:
				if cur != "" && len(out[cur]) < 1024 {
					out[cur] += string(t)
				}
			case xml.EndElement:
				cur = ""
			}
			return nil
		})
	})
	return out
}

// para gathers one paragraph's text while a part streams.
type para struct {
	open  int // nesting of paragraph elements: text boxes hold paragraphs
	level int
	text  strings.Builder
}

func (p *para) write(s string) {
	if p.open > 0 && p.text.Len() < indexMaxUnitLen {
		p.text.WriteString(s)
	}
}

// extractDOCX reads word/document.xml: w:p paragraphs, their heading level
// from the style (word/styles.xml) or an outline level, w:t text, tabs
// and breaks.
func extractDOCX(ctx context.Context, path string, b *docBuilder) error {
	zr, err := openZip(path)
	if err != nil {
		return err
	}
	defer zr.Close()
	levels := docxStyleLevels(ctx, zr)
	core := metaFields(ctx, zr, "docProps/core.xml", []string{"title"}, nil)
	app := metaFields(ctx, zr, "docProps/app.xml", []string{"Pages"}, nil)
	b.d.Title = strings.TrimSpace(core["title"])
	b.d.Pages, _ = strconv.Atoi(strings.TrimSpace(app["Pages"]))
	var p para
	inText := false
	err = readPart(zr, "word/document.xml", func(r io.Reader) error {
		return walkXML(ctx, r, func(tok xml.Token, _ int) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "p":
					if p.open++; p.open == 1 {
						p.level = 0
						p.text.Reset()
					}
				case "pStyle":
					if l, ok := levels[attr(t, "val")]; ok && p.open == 1 {
						p.level = l
					}
				case "outlineLvl":
					if l, err := strconv.Atoi(attr(t, "val")); err == nil && l < 9 && p.open == 1 {
						p.level = l + 1
					}
				case "t":
					inText = true
				case "tab":
					p.write("\t")
				case "br", "cr":
					p.write("\n")
				}
			case xml.CharData:
				if inText {
					p.write(string(t))
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "t":
					inText = false
				case "p":
					if p.open--; p.open == 0 {
						return b.add(p.level, p.text.String())
					}
				}
			}
			return nil
		})
	})
	return err
}

// docxStyleLevels maps paragraph style ids to heading levels: a style
// named "heading N" or "Title", or one with an outline level.
func docxStyleLevels(ctx context.Context, zr *zip.ReadCloser) map[string]int {
	levels := map[string]int{}
	var id string
	_ = readPart(zr, "word/styles.xml", func(r io.Reader) error {
		return walkXML(ctx, r, func(tok xml.Token, _ int) error {
			t, ok := tok.(xml.StartElement)
			if !ok {
				return nil
			}
			switch t.Name.Local {
			case "style":
				id = attr(t, "styleId")
			case "name":
				name := strings.ToLower(attr(t, "val"))
				if name == "title" {
					levels[id] = 1
				} else if n, err := strconv.Atoi(strings.TrimPrefix(name, "heading ")); err == nil && strings.HasPrefix(name, "heading ") && n >= 1 && n <= 9 {
					levels[id] = n
				}
			case "outlineLvl":
				if n, err := strconv.Atoi(attr(t, "val")); err == nil && n < 9 && id != "" {
					levels[id] = n + 1
				}
			}
			return nil
		})
	})
	return levels
}

// extractODT reads content.xml: text:h headings with their outline level,
// text:p paragraphs, text:s runs of spaces, tabs and line breaks.
func extractODT(ctx context.Context, path string, b *docBuilder) error {
	zr, err := openZip(path)
	if err != nil {
		return err
	}
	defer zr.Close()
	meta := metaFields(ctx, zr, "meta.xml", []string{"title"}, []string{"page-count"})
	b.d.Title = strings.TrimSpace(meta["title"])
	b.d.Pages, _ = strconv.Atoi(meta["page-count"])
	var p para
	return readPart(zr, "content.xml", func(r io.Reader) error {
		return walkXML(ctx, r, func(tok xml.Token, _ int) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "p", "h":
					if p.open++; p.open == 1 {
						p.level = 0
						if t.Name.Local == "h" {
							p.level = min(9, attrInt(t, "outline-level", 1))
						}
						p.text.Reset()
					}
				case "s":
					p.write(strings.Repeat(" ", min(attrInt(t, "c", 1), 256)))
				case "tab":
					p.write("\t")
				case "line-break":
					p.write("\n")
				}
			case xml.CharData:
				p.write(string(t))
			case xml.EndElement:
				if n := t.Name.Local; (n == "p" || n == "h") && p.open > 0 {
					if p.open--; p.open == 0 {
						return b.add(p.level, p.text.String())
					}
				}
			}
			return nil
		})
	})
}

// extractODS reads content.xml's tables: rows and cells with their repeat
// counts (a trailing run of a million empty rows costs nothing), each
// cell's text from its paragraphs.
func extractODS(ctx context.Context, path string, b *sheetBuilder) error {
	zr, err := openZip(path)
	if err != nil {
		return err
	}
	defer zr.Close()
	var (
		tables    int // nesting: a table inside a cell is part of that cell
		row       []string
		rowRepeat int
		cell      strings.Builder
		cellRep   int
		inCell    bool
		inPara    bool
		paras     int
	)
	return readPart(zr, "content.xml", func(r io.Reader) error {
		return walkXML(ctx, r, func(tok xml.Token, _ int) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "table":
					if tables++; tables == 1 {
						return b.start(attr(t, "name"))
					}
				case "table-row":
					if tables == 1 {
						row, rowRepeat = row[:0], attrInt(t, "number-rows-repeated", 1)
					}
				case "table-cell", "covered-table-cell":
					if tables == 1 {
						inCell, paras = true, 0
						cell.Reset()
						cellRep = attrInt(t, "number-columns-repeated", 1)
					}
				case "p":
					if inCell {
						inPara = true
						if paras++; paras > 1 {
							cell.WriteString("\n")
						}
					}
				case "s":
					if inPara {
						cell.WriteString(strings.Repeat(" ", min(attrInt(t, "c", 1), 256)))
					}
				}
			case xml.CharData:
				if inPara && cell.Len() < cellMaxBytes {
					cell.Write(t)
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "p":
					inPara = false
				case "table":
					if tables--; tables == 0 {
						b.end()
					}
				case "table-cell", "covered-table-cell":
					if tables == 1 && inCell {
						inCell = false
						row = repeatCell(row, cell.String(), cellRep)
					}
				case "table-row":
					if tables == 1 {
						return b.row(row, rowRepeat)
					}
				}
			}
			return nil
		})
	})
}

// repeatCell appends a cell repeated n times, never past the widest sheet
// a spreadsheet program allows; empty cells repeated are trimmed later
// anyway, so only a run that ends in text is written out.
func repeatCell(row []string, v string, n int) []string {
	n = min(n, sheetMaxCols-len(row))
	for i := 0; i < n; i++ {
		row = append(row, v)
	}
	return row
}
