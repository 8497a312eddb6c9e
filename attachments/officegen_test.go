package attachments

import (
	"archive/zip"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// The office files of these tests are made here, not committed: xlsx by
// excelize itself, the way a program writes one; docx, odt and ods as the
// zip of XML parts their specifications (ECMA-376, OASIS ODF 1.3) define,
// with the parts and elements LibreOffice and Word write for such content.

// block is one paragraph of a sample document: level 0 is body text.
type block struct {
	level int
	text  string
}

// sampleBlocks is the document every format's generator writes, so one
// expectation checks all of them.
var sampleBlocks = []block{
	{1, "Annual Report"},
	{0, "This report covers the year."},
	{2, "Revenue"},
	{0, "Revenue grew by twelve percent."},
	{0, "Most of it came from widgets & gadgets."},
	{2, "Costs"},
	{0, "The unicorn budget doubled."},
	{3, "Details"},
	{0, "Hay and glitter."},
	{2, "Outlook"},
	{0, "Next year looks steady for the unicorn."},
}

func writeZip(t testing.TB, name string, parts [][2]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for _, part := range parts {
		method := zip.Deflate
		if part[0] == "mimetype" {
			method = zip.Store // ODF: first, uncompressed
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: part[0], Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(part[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

const wNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"`

// docxParts writes blocks as a docx; heading 1 uses a localised style id
// ("Kop1", as Dutch Word writes), so only styles.xml says it is a heading.
func docxParts(blocks []block, title string, pages int) [][2]string {
	var body strings.Builder
	for _, b := range blocks {
		style := ""
		switch b.level {
		case 0:
		case 1:
			style = `<w:pPr><w:pStyle w:val="Kop1"/></w:pPr>`
		default:
			style = fmt.Sprintf(`<w:pPr><w:pStyle w:val="Heading%d"/></w:pPr>`, b.level)
		}
		fmt.Fprintf(&body, `<w:p>%s<w:r><w:t xml:space="preserve">%s</w:t></w:r></w:p>`, style, html.EscapeString(b.text))
		body.WriteString(`<w:p/>`) // an empty paragraph, as Word leaves between blocks
	}
	styles := `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:styles ` + wNS + `>` +
		`<w:style w:type="paragraph" w:styleId="Kop1"><w:name w:val="heading 1"/></w:style>` +
		`<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/></w:style>` +
		`<w:style w:type="paragraph" w:styleId="Heading3"><w:name w:val="heading 3"/><w:pPr><w:outlineLvl w:val="2"/></w:pPr></w:style>` +
		`</w:styles>`
	return [][2]string{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ` + wNS + `><w:body>` + body.String() + `</w:body></w:document>`},
		{"word/styles.xml", styles},
		{"docProps/core.xml", `<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>` + title + `</dc:title></cp:coreProperties>`},
		{"docProps/app.xml", fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"><Pages>%d</Pages></Properties>`, pages)},
	}
}

const odfNS = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/"`

func odtParts(blocks []block, title string, pages int) [][2]string {
	var body strings.Builder
	for _, b := range blocks {
		// words are separated by <text:s/> for one space, as LibreOffice
		// writes runs of spaces
		words := strings.Fields(html.EscapeString(b.text))
		text := strings.Join(words, `<text:s/>`)
		if b.level > 0 {
			fmt.Fprintf(&body, `<text:h text:outline-level="%d">%s</text:h>`, b.level, text)
		} else {
			fmt.Fprintf(&body, `<text:p text:style-name="P1">%s</text:p>`, text)
		}
	}
	return [][2]string{
		{"mimetype", mediaODT},
		{"content.xml", `<?xml version="1.0" encoding="UTF-8"?><office:document-content ` + odfNS + ` office:version="1.3"><office:body><office:text>` + body.String() + `</office:text></office:body></office:document-content>`},
		{"meta.xml", fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><office:document-meta `+odfNS+`><office:meta><dc:title>%s</dc:title><meta:document-statistic meta:page-count="%d" meta:word-count="1"/></office:meta></office:document-meta>`, title, pages)},
	}
}

func htmlDoc(blocks []block, title string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>%s</title><style>p { color: red }</style><script>var secret = 'do not index';</script></head>\n<body>\n", title)
	for _, x := range blocks {
		if x.level > 0 {
			fmt.Fprintf(&b, "<h%d>%s</h%d>\n", x.level, html.EscapeString(x.text), x.level)
		} else {
			// inline markup and a line break inside the source stay one paragraph
			words := strings.Fields(html.EscapeString(x.text))
			fmt.Fprintf(&b, "<p><b>%s</b>\n  %s</p>\n", words[0], strings.Join(words[1:], " "))
		}
	}
	b.WriteString("<noscript>enable scripts</noscript></body></html>\n")
	return b.String()
}

func markdownDoc(blocks []block, title string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\ntitle: %q\nauthor: someone\n---\n", title)
	for _, x := range blocks {
		if x.level > 0 {
			fmt.Fprintf(&b, "%s %s\n\n", strings.Repeat("#", x.level), x.text)
		} else {
			// a paragraph wrapped over two lines
			words := strings.Fields(x.text)
			fmt.Fprintf(&b, "%s\n%s\n\n", words[0], strings.Join(words[1:], " "))
		}
	}
	return b.String()
}

// makeXLSX writes a workbook: "Sales" with a header row, 120 data rows, a
// gap and a note in F200; "Notes" with two cells; and an empty sheet.
func makeXLSX(t testing.TB) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", "Sales"); err != nil {
		t.Fatal(err)
	}
	set := func(sheet, cell string, v any) {
		if err := f.SetCellValue(sheet, cell, v); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range []string{"Region", "Product", "Units", "Price"} {
		set("Sales", fmt.Sprintf("%c1", 'A'+i), h)
	}
	for r := 2; r <= 121; r++ {
		set("Sales", fmt.Sprintf("A%d", r), fmt.Sprintf("Region %d", r%4))
		set("Sales", fmt.Sprintf("B%d", r), fmt.Sprintf("widget-%d", r))
		set("Sales", fmt.Sprintf("C%d", r), r*10)
		set("Sales", fmt.Sprintf("D%d", r), float64(r)+0.5)
	}
	set("Sales", "F200", "audited by the unicorn")
	if _, err := f.NewSheet("Notes"); err != nil {
		t.Fatal(err)
	}
	set("Notes", "A1", "Comment")
	set("Notes", "A2", "the unicorn budget\nspans two lines")
	if _, err := f.NewSheet("Empty"); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sales.xlsx")
	if err := f.SaveAs(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// odsParts writes a spreadsheet with ODF's repeat counts: three equal rows
// written once, two equal cells written once, and the million empty rows
// LibreOffice writes after the last one.
func odsParts() [][2]string {
	cell := func(v string) string {
		return `<table:table-cell office:value-type="string"><text:p>` + v + `</text:p></table:table-cell>`
	}
	content := `<?xml version="1.0" encoding="UTF-8"?><office:document-content ` + odfNS + ` office:version="1.3"><office:body><office:spreadsheet>` +
		`<table:table table:name="Budget"><table:table-column table:number-columns-repeated="1024"/>` +
		`<table:table-row>` + cell("Item") + cell("Cost") + cell("Owner") + `</table:table-row>` +
		`<table:table-row table:number-rows-repeated="3">` + cell("hay") + `<table:table-cell table:number-columns-repeated="2" office:value-type="float" office:value="7"><text:p>7</text:p></table:table-cell></table:table-row>` +
		`<table:table-row>` + cell("glitter") + `<table:table-cell/>` + cell("the<text:s text:c=\"2\"/>unicorn") + `<table:table-cell table:number-columns-repeated="1020"/></table:table-row>` +
		`<table:table-row table:number-rows-repeated="1048570"><table:table-cell table:number-columns-repeated="1024"/></table:table-row>` +
		`</table:table>` +
		`<table:table table:name="Second"><table:table-row>` + cell("alone") + `</table:table-row></table:table>` +
		`</office:spreadsheet></office:body></office:document-content>`
	return [][2]string{{"mimetype", mediaODS}, {"content.xml", content}}
}
