package attachments

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// DocFacts describe a document: its counts and title.
type DocFacts struct {
	Format string `json:"format"`
	// Title is the document's own (its metadata, an HTML <title>, markdown
	// front matter), else its first top-level heading.
	Title string `json:"title,omitempty"`
	// Pages is the count the writing program saved (docx, odt); 0 when the
	// format has no pages or the file does not say.
	Pages      int `json:"pages,omitempty"`
	Words      int `json:"words"`
	Paragraphs int `json:"paragraphs"`
	Headings   int `json:"headings"`
}

// docBuilder writes a document's paragraphs into the index, one unit a
// paragraph: its heading level as one digit ('0' for body text), then its
// text. Empty paragraphs are dropped, so every numbered paragraph holds
// text.
type docBuilder struct {
	w    *indexWriter
	d    *DocFacts
	unit []byte
}

func newDocBuilder(w *indexWriter, f *Facts, format string) *docBuilder {
	f.Doc = &DocFacts{Format: format}
	return &docBuilder{w: w, d: f.Doc}
}

func (b *docBuilder) add(level int, text string) error {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	level = min(max(level, 0), 9)
	b.unit = append(append(b.unit[:0], byte('0'+level)), text...)
	if err := b.w.add(b.unit); err != nil {
		return err
	}
	b.d.Paragraphs++
	b.d.Words += len(strings.Fields(text))
	if level > 0 {
		b.d.Headings++
		if b.d.Title == "" && level == 1 {
			b.d.Title = clip(strings.Join(strings.Fields(text), " "), 200)
		}
	}
	return nil
}

// docUnit splits a unit into its heading level and text.
func docUnit(u []byte) (int, string) {
	if len(u) == 0 || u[0] < '0' || u[0] > '9' {
		return 0, string(u)
	}
	return int(u[0] - '0'), string(u[1:])
}

// htmlSkipped are elements whose text is not the page's: scripts, styles,
// pictures.
var htmlSkipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true,
}

// htmlBlocks are elements that start and end a paragraph.
var htmlBlocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Li: true, atom.Ul: true, atom.Ol: true, atom.Tr: true,
	atom.Table: true, atom.Section: true, atom.Article: true, atom.Header: true, atom.Footer: true,
	atom.Main: true, atom.Nav: true, atom.Aside: true, atom.Blockquote: true, atom.Pre: true,
	atom.Dt: true, atom.Dd: true, atom.Figcaption: true, atom.Br: true, atom.Hr: true,
	atom.Caption: true, atom.Body: true,
}

var htmlHeadings = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

// extractHTML tokenizes the page (golang.org/x/net/html, with its buffer
// bounded) into paragraphs at block elements and headings at h1-h6, the
// title from <title>; scripts and styles are not text.
func extractHTML(ctx context.Context, path string, b *docBuilder) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	z := html.NewTokenizer(bufio.NewReaderSize(f, 64<<10))
	z.SetMaxBuf(4 << 20)
	var text, title strings.Builder
	level, skip, pre := 0, 0, 0
	inTitle := false
	flush := func() error {
		t := text.String()
		if pre == 0 {
			t = strings.Join(strings.Fields(t), " ")
		}
		text.Reset()
		err := b.add(level, t)
		level = 0
		return err
	}
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if errors.Is(z.Err(), io.EOF) {
				return flush()
			}
			return z.Err()
		case html.TextToken:
			switch {
			case skip > 0:
			case inTitle:
				if title.Len() < 1024 {
					title.Write(z.Text())
				}
			case text.Len() < indexMaxUnitLen:
				text.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			start := tt != html.EndTagToken
			switch {
			case htmlSkipped[a]:
				if tt == html.StartTagToken {
					skip++
				} else if tt == html.EndTagToken && skip > 0 {
					skip--
				}
			case a == atom.Title:
				inTitle = tt == html.StartTagToken
				if !inTitle && b.d.Title == "" {
					b.d.Title = clip(strings.Join(strings.Fields(title.String()), " "), 200)
				}
			case htmlHeadings[a] > 0:
				if err := flush(); err != nil {
					return err
				}
				if start {
					level = htmlHeadings[a]
				}
			case htmlBlocks[a]:
				if err := flush(); err != nil {
					return err
				}
				if a == atom.Pre && tt == html.StartTagToken {
					pre++
				} else if a == atom.Pre && tt == html.EndTagToken && pre > 0 {
					pre--
				}
			case a == atom.Td || a == atom.Th:
				if start {
					text.WriteString(" | ")
				}
			}
		}
	}
}

// extractMarkdown splits markdown into paragraphs and headings. It is
// hand-written: the tools need only block boundaries, ATX and setext
// headings, fenced code kept whole, and the front matter's title, which is
// a line scanner's work, not a renderer's (no markdown library is in the
// module graph, and rendering would be thrown away).
func extractMarkdown(ctx context.Context, path string, b *docBuilder) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var para []string
	var buf []byte
	fence, front := "", false
	flush := func(level int, sep string) error {
		err := b.add(level, strings.Join(para, sep))
		para = para[:0]
		return err
	}
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		line, _, err := readLine(br, buf, indexMaxUnitLen)
		buf = line[:0]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		s := string(line)
		t := strings.TrimSpace(s)
		switch {
		case n == 0 && t == "---":
			front = true
		case front:
			if t == "---" || t == "..." {
				front = false
			} else if k, v, ok := strings.Cut(t, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "title") {
				b.d.Title = clip(strings.Trim(strings.TrimSpace(v), `"'`), 200)
			}
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
				err = flush(0, "\n")
			} else if len(para) < 65536 {
				para = append(para, s)
			}
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			err = flush(0, " ")
			fence = t[:3]
		case t == "":
			err = flush(0, " ")
		case len(para) > 0 && setext(t) > 0:
			err = flush(setext(t), " ")
		case atxLevel(s) > 0:
			if err = flush(0, " "); err == nil {
				err = b.add(atxLevel(s), atxText(t))
			}
		case strings.Trim(t, "-*_ ") == "" && len(t) >= 3: // a thematic break
			err = flush(0, " ")
		default:
			if listItem(t) {
				err = flush(0, " ")
			}
			if len(para) < 65536 {
				para = append(para, t)
			}
		}
		if err != nil {
			return err
		}
	}
	return flush(0, " ")
}

// atxLevel is the level of a "# Heading" line (up to three spaces before
// it), or 0.
func atxLevel(s string) int {
	t := strings.TrimLeft(s, " ")
	if len(s)-len(t) > 3 {
		return 0
	}
	n := len(t) - len(strings.TrimLeft(t, "#"))
	if n < 1 || n > 6 || (len(t) > n && t[n] != ' ' && t[n] != '\t') {
		return 0
	}
	return n
}

func atxText(t string) string {
	t = strings.TrimSpace(strings.TrimLeft(t, "#"))
	if u := strings.TrimRight(t, "#"); u != t && (u == "" || strings.HasSuffix(u, " ")) {
		t = strings.TrimSpace(u)
	}
	return t
}

// setext is 1 or 2 for a line underlining the paragraph above it.
func setext(t string) int {
	switch {
	case strings.Trim(t, "=") == "":
		return 1
	case strings.Trim(t, "-") == "":
		return 2
	}
	return 0
}

func listItem(t string) bool {
	if len(t) > 1 && strings.ContainsRune("-*+", rune(t[0])) && t[1] == ' ' {
		return true
	}
	i := 0
	for i < len(t) && i < 9 && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	return i > 0 && i+1 < len(t) && (t[i] == '.' || t[i] == ')') && t[i+1] == ' '
}

// Per-call bounds of the document tools.
const (
	defaultParagraphs = 30
	outlineMax        = 200
)

// renderPara shows a paragraph with its number, a heading as markdown.
func renderPara(n, level int, text string) string {
	if level > 0 {
		return fmt.Sprintf("¶%d %s %s\n", n, strings.Repeat("#", level), text)
	}
	return fmt.Sprintf("¶%d %s\n", n, text)
}

// docInfoText gives the document's facts and its outline (headings with
// their paragraph numbers) from paragraph from on.
func docInfoText(x *unitIndex, facts Facts, from, maxBytes int) (string, error) {
	d := facts.Doc
	var b strings.Builder
	fmt.Fprintf(&b, "%s document, %s", d.Format, humanSize(facts.Size))
	if d.Pages > 0 {
		fmt.Fprintf(&b, ", %d pages (as saved)", d.Pages)
	}
	fmt.Fprintf(&b, ", %d words, %d paragraphs, %d headings.\n", d.Words, d.Paragraphs, d.Headings)
	if d.Title != "" {
		fmt.Fprintf(&b, "Title: %s\n", d.Title)
	}
	if d.Headings == 0 {
		b.WriteString("No headings: use doc_read for paragraph ranges and doc_search for words.")
		return b.String(), nil
	}
	b.WriteString("Outline:\n")
	shown, next := 0, 0
	err := x.each(from-1, func(i int, u []byte) (bool, error) {
		level, text := docUnit(u)
		if level == 0 {
			return true, nil
		}
		line := renderPara(i+1, level, oneLine(text, 200))
		if shown >= outlineMax || b.Len()+len(line) > maxBytes {
			next = i + 1
			return false, nil
		}
		b.WriteString(line)
		shown++
		return true, nil
	})
	if err != nil {
		return "", err
	}
	if next > 0 {
		fmt.Fprintf(&b, "[outline cut: call doc_info with from_paragraph=%d for the rest]\n", next)
	}
	b.WriteString("Read a section with doc_read section=\"heading words\", or paragraphs by number.")
	return b.String(), nil
}

// docReadText returns paragraphs from..to, or the section under the first
// heading that holds every word of section (to the next heading of its
// level or above), stopping before maxBytes and saying where to go on.
func docReadText(ctx context.Context, x *unitIndex, facts Facts, from, to int, section string, maxBytes int) (string, error) {
	total := x.n
	sectionLevel := 0
	if section != "" {
		m := newMatcher(splitWords(section))
		found := 0
		err := x.each(0, func(i int, u []byte) (bool, error) {
			if level, text := docUnit(u); level > 0 && m.match([]byte(text)) {
				found, sectionLevel = i+1, level
				return false, nil
			}
			return i%1024 != 0 || ctx.Err() == nil, ctx.Err()
		})
		if err != nil {
			return "", err
		}
		if found == 0 {
			return "", modelError(fmt.Sprintf("No heading holds %q; doc_info lists the outline.", section))
		}
		from, to = found, total
	}
	if from > total {
		return fmt.Sprintf("The document has %d paragraphs; from_paragraph %d is past the end.", total, from), nil
	}
	to = min(to, total)
	var b strings.Builder
	last := from - 1
	err := x.each(from-1, func(i int, u []byte) (bool, error) {
		n := i + 1
		level, text := docUnit(u)
		if n > to || sectionLevel > 0 && n > from && level > 0 && level <= sectionLevel {
			return false, nil
		}
		p := renderPara(n, level, text)
		if b.Len() > 0 && b.Len()+len(p) > maxBytes {
			return false, nil
		}
		if len(p) > maxBytes {
			p = clipBytes(p, maxBytes) + fmt.Sprintf("\n[paragraph %d cut at %d bytes]\n", n, maxBytes)
		}
		b.WriteString(p)
		last = n
		return true, nil
	})
	if err != nil {
		return "", err
	}
	end := to
	if sectionLevel > 0 {
		end = last
		// the section may go on past what fitted: look at the next paragraph
		if last < total {
			if u, err := x.unit(last); err == nil {
				if level, _ := docUnit(u); level == 0 || level > sectionLevel {
					end = last + 1
				}
			}
		}
	}
	if last < end {
		fmt.Fprintf(&b, "[paragraphs %d-%d of %d shown; the rest did not fit in one call: call doc_read with from_paragraph=%d]", from, last, total, last+1)
	} else {
		fmt.Fprintf(&b, "[paragraphs %d-%d of %d]", from, last, total)
	}
	return b.String(), nil
}

// docSearchText finds the paragraphs, from from on, that hold every word,
// each with the heading it falls under.
func docSearchText(ctx context.Context, x *unitIndex, words []string, from, maxHits int) (string, error) {
	m := newMatcher(words)
	var b strings.Builder
	hits, more, lastShown := 0, 0, 0
	heading := ""
	err := x.each(0, func(i int, u []byte) (bool, error) {
		if i%1024 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		n := i + 1
		level, text := docUnit(u)
		if level > 0 {
			heading = oneLine(text, 80)
		}
		if n < from || !m.match([]byte(text)) {
			return true, nil
		}
		if hits >= maxHits {
			more++
			return true, nil
		}
		hits++
		lastShown = n
		where := ""
		if heading != "" && level == 0 {
			where = fmt.Sprintf(" (under %q)", heading)
		}
		fmt.Fprintf(&b, "¶%d%s: %s\n", n, where, m.snippet(text, 200))
		return true, nil
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "[%d paragraphs matched of %d searched (from paragraph %d)", hits+more, max(0, x.n-from+1), from)
	if more > 0 {
		fmt.Fprintf(&b, "; %d more after paragraph %d: call doc_search with from_paragraph=%d", more, lastShown, lastShown+1)
	}
	b.WriteString("]")
	return b.String(), nil
}
