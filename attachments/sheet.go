package attachments

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// SheetFacts describe one sheet of a spreadsheet.
type SheetFacts struct {
	Name string `json:"name"`
	// Rows runs to the last row with a value; Cols to the widest row's last
	// value.
	Rows int `json:"rows"`
	Cols int `json:"cols"`
	// HeaderRow is the first row with a value, Header its first cells
	// (clipped): most sheets name their columns there.
	HeaderRow int      `json:"header_row,omitempty"`
	Header    []string `json:"header,omitempty"`
	// First is the unit of the index that holds row 1.
	First int `json:"first"`
}

// Bounds of what a spreadsheet is read to: Excel's own sheet size, and
// enough sheets for any workbook a person attaches.
const (
	sheetMaxSheets  = 256
	sheetMaxRows    = 1 << 20
	sheetMaxCols    = 16384
	cellMaxBytes    = 32 << 10
	headerCells     = 12
	headerCellRunes = 40
	csvMaxLine      = 4 << 20
)

// sheetBuilder writes a spreadsheet's rows into the index, one unit a row
// (a JSON array of the cells' text), and keeps each sheet's facts. Empty
// rows are held back until a row with a value follows, so trailing empty
// rows cost nothing.
type sheetBuilder struct {
	w       *indexWriter
	f       *Facts
	cur     *SheetFacts
	pending int
	enc     []string
}

func newSheetBuilder(w *indexWriter, f *Facts) *sheetBuilder {
	return &sheetBuilder{w: w, f: f}
}

func (b *sheetBuilder) start(name string) error {
	b.cur, b.pending = nil, 0
	if len(b.f.Sheets) >= sheetMaxSheets {
		b.f.Problem = fmt.Sprintf("only the first %d sheets are readable by the tools", sheetMaxSheets)
		return nil
	}
	if name = clip(cleanName(name), 100); name == "" {
		name = fmt.Sprintf("Sheet%d", len(b.f.Sheets)+1)
	}
	b.f.Sheets = append(b.f.Sheets, SheetFacts{Name: name, First: b.w.units()})
	b.cur = &b.f.Sheets[len(b.f.Sheets)-1]
	return nil
}

// row adds a row, repeated n times (ods writes runs of equal rows once).
func (b *sheetBuilder) row(cells []string, n int) error {
	if b.cur == nil {
		return nil
	}
	last := len(cells)
	for last > 0 && cells[last-1] == "" {
		last--
	}
	if last == 0 {
		b.pending += n
		return nil
	}
	for ; b.pending > 0 && b.cur.Rows < sheetMaxRows; b.pending-- {
		if err := b.w.add([]byte("[]")); err != nil {
			return err
		}
		b.cur.Rows++
	}
	b.pending = 0
	b.enc = b.enc[:0]
	for _, c := range cells[:last] {
		b.enc = append(b.enc, clipBytes(c, cellMaxBytes))
	}
	unit, err := json.Marshal(b.enc)
	if err != nil {
		return err
	}
	if b.cur.HeaderRow == 0 {
		b.cur.HeaderRow = b.cur.Rows + 1
		for _, c := range b.enc[:min(len(b.enc), headerCells)] {
			b.cur.Header = append(b.cur.Header, clip(strings.Join(strings.Fields(c), " "), headerCellRunes))
		}
	}
	for ; n > 0 && b.cur.Rows < sheetMaxRows; n-- {
		if err := b.w.add(unit); err != nil {
			return err
		}
		b.cur.Rows++
	}
	b.cur.Cols = max(b.cur.Cols, last)
	return nil
}

func (b *sheetBuilder) end() { b.cur, b.pending = nil, 0 }

// clipBytes cuts s to at most n bytes on a rune boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// extractXLSX streams every sheet's rows through excelize, which shows
// each cell as the spreadsheet shows it (number formats, dates, shared
// strings). The archive's entry count is checked first, and excelize is
// held to the unpacking bounds, spilling big sheets to the store's temp
// directory rather than memory.
func extractXLSX(ctx context.Context, path, tmpDir string, b *sheetBuilder) error {
	zr, err := openZip(path)
	if err != nil {
		return err
	}
	zr.Close()
	x, err := excelize.OpenFile(path, excelize.Options{UnzipSizeLimit: zipMaxTotalBytes, UnzipXMLSizeLimit: 16 << 20, TmpDir: tmpDir})
	if err != nil {
		return err
	}
	defer x.Close()
	for _, name := range x.GetSheetList() {
		if err := b.start(name); err != nil {
			return err
		}
		err := xlsxRows(ctx, x, name, b)
		switch {
		case errors.Is(err, errIndexFull) || ctx.Err() != nil:
			return err
		case err != nil:
			// one sheet that cannot be read (a chart sheet, a damaged
			// part) costs that sheet, not the workbook
			b.f.Problem = clip(fmt.Sprintf("sheet %q unreadable: %v", name, err), 200)
		}
		b.end()
	}
	return nil
}

func xlsxRows(ctx context.Context, x *excelize.File, name string, b *sheetBuilder) error {
	rows, err := x.Rows(name)
	if err != nil {
		return err
	}
	defer rows.Close()
	for n := 0; rows.Next(); n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		cells, err := rows.Columns()
		if err != nil {
			return err
		}
		if err := b.row(cells, 1); err != nil {
			return err
		}
	}
	return rows.Error()
}

// extractCSV reads a csv (or tsv) file as one sheet. The separator of a
// csv is the one of , ; tab | that its first line holds most of, as a
// spreadsheet program guesses it.
func extractCSV(ctx context.Context, path string, tsv bool, b *sheetBuilder) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(3); bytes.Equal(head, []byte("\xef\xbb\xbf")) {
		br.Discard(3) // a byte-order mark is not part of the first cell
	}
	r := csv.NewReader(&lineCap{r: br})
	r.Comma = '\t'
	if !tsv {
		head, _ := br.Peek(br.Size())
		r.Comma = guessComma(head)
	}
	r.FieldsPerRecord, r.LazyQuotes, r.ReuseRecord = -1, true, true
	if err := b.start("Sheet1"); err != nil {
		return err
	}
	for n := 0; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := b.row(rec, 1); err != nil {
			return err
		}
	}
	b.end()
	return nil
}

func guessComma(head []byte) rune {
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	best, most := ',', 0
	for _, c := range []rune{',', ';', '\t', '|'} {
		if n := bytes.Count(head, []byte(string(c))); n > most {
			best, most = c, n
		}
	}
	return best
}

// lineCap fails on a line longer than csvMaxLine, which encoding/csv would
// otherwise gather whole in memory.
type lineCap struct {
	r   io.Reader
	run int
}

func (l *lineCap) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			l.run = 0
		} else if l.run++; l.run > csvMaxLine {
			return 0, fmt.Errorf("a line is over %d MiB", csvMaxLine>>20)
		}
	}
	return n, err
}

// modelError is a bad argument the model can fix: a result, not a failure.
type modelError string

func (e modelError) Error() string { return string(e) }

// findSheet picks a sheet by name (any case) or number; "" is the first.
func findSheet(facts Facts, name string) (int, error) {
	if len(facts.Sheets) == 0 {
		return 0, modelError("The spreadsheet has no sheets.")
	}
	if name == "" {
		return 0, nil
	}
	for i, s := range facts.Sheets {
		if strings.EqualFold(s.Name, name) {
			return i, nil
		}
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 1 && n <= len(facts.Sheets) {
		return n - 1, nil
	}
	var names []string
	for _, s := range facts.Sheets {
		names = append(names, strconv.Quote(s.Name))
	}
	return 0, modelError(clip(fmt.Sprintf("No sheet %q; the sheets are %s.", name, strings.Join(names, ", ")), 2000))
}

// cellRange is a block of cells, 1-based and inclusive.
type cellRange struct{ col1, row1, col2, row2 int }

// parseRange reads "B2:D40", "C7", "B:D" (whole columns) or "3:10" (whole
// rows); an empty side takes the sheet's edge.
func parseRange(s string, sh SheetFacts) (cellRange, error) {
	r := cellRange{1, 1, max(1, sh.Cols), max(1, sh.Rows)}
	a, b, two := strings.Cut(strings.ToUpper(strings.ReplaceAll(s, "$", "")), ":")
	if !two {
		b = a
	}
	c1, r1, err1 := parseRef(a)
	c2, r2, err2 := parseRef(b)
	if err := errors.Join(err1, err2); err != nil {
		return r, modelError(fmt.Sprintf("range %q is not a cell range like B2:D40, C7, B:D or 3:10.", s))
	}
	if c1 > 0 {
		r.col1 = c1
	}
	if r1 > 0 {
		r.row1 = r1
	}
	if c2 > 0 {
		r.col2 = c2
	} else if c1 > 0 && !two {
		r.col2 = c1
	}
	if r2 > 0 {
		r.row2 = r2
	} else if r1 > 0 && !two {
		r.row2 = r1
	}
	if r.col2 < r.col1 || r.row2 < r.row1 {
		return r, modelError(fmt.Sprintf("range %q runs backwards.", s))
	}
	return r, nil
}

// parseRef reads "B12", "B" or "12"; a missing part is 0.
func parseRef(s string) (col, row int, err error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		i++
	}
	if i == 0 && s == "" {
		return 0, 0, errors.New("empty reference")
	}
	if i > 0 {
		if col, err = excelize.ColumnNameToNumber(s[:i]); err != nil {
			return 0, 0, err
		}
	}
	if i < len(s) {
		if row, err = strconv.Atoi(s[i:]); err != nil || row < 1 {
			return 0, 0, errors.New("bad row")
		}
	}
	return col, row, nil
}

func colName(n int) string {
	s, _ := excelize.ColumnNumberToName(n)
	return s
}

// sheetReadMaxCols bounds the columns of one read when no range names them.
const sheetReadMaxCols = 64

// sheetReadText shows a block of one sheet as tab-separated rows under
// their column letters, stopping before maxBytes and naming the range to
// read next.
func sheetReadText(x *unitIndex, facts Facts, sheet, rng string, fromRow, toRow, maxBytes int) (string, error) {
	si, err := findSheet(facts, sheet)
	if err != nil {
		return "", err
	}
	sh := facts.Sheets[si]
	r := cellRange{1, max(1, fromRow), min(max(1, sh.Cols), sheetReadMaxCols), 0}
	r.row2 = toRow
	if r.row2 == 0 {
		r.row2 = r.row1 + defaultRows - 1
	}
	if rng != "" {
		if r, err = parseRange(rng, sh); err != nil {
			return "", err
		}
	}
	if r.row2 < r.row1 {
		return "", modelError(fmt.Sprintf("to_row %d is before from_row %d.", r.row2, r.row1))
	}
	head := fmt.Sprintf("Sheet %q (%d rows x %d columns)", sh.Name, sh.Rows, sh.Cols)
	if r.row1 > sh.Rows {
		return fmt.Sprintf("%s: row %d is past the last row with a value.", head, r.row1), nil
	}
	r.row2 = min(r.row2, sh.Rows)
	cellCap := 500 // one cell asked for alone is shown whole
	if r.col1 == r.col2 && r.row1 == r.row2 {
		cellCap = maxBytes
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, rows %d-%d, columns %s-%s:\nrow", head, r.row1, r.row2, colName(r.col1), colName(r.col2))
	for c := r.col1; c <= r.col2; c++ {
		b.WriteString("\t" + colName(c))
	}
	b.WriteString("\n")
	var cells []string
	last := r.row1 - 1
	err = x.each(sh.First+r.row1-1, func(i int, unit []byte) (bool, error) {
		row := i - sh.First + 1
		if row > r.row2 {
			return false, nil
		}
		cells = cells[:0]
		if err := json.Unmarshal(unit, &cells); err != nil {
			return false, fmt.Errorf("row %d: %w", row, err)
		}
		line := strconv.Itoa(row)
		for c := r.col1; c <= r.col2; c++ {
			v := ""
			if c <= len(cells) {
				v = oneLine(cells[c-1], cellCap)
			}
			line += "\t" + v
		}
		if b.Len()+len(line)+1 > maxBytes && last >= r.row1 {
			return false, nil
		}
		b.WriteString(line + "\n")
		last = row
		return true, nil
	})
	if err != nil {
		return "", err
	}
	span := fmt.Sprintf("%s%d:%s%d", colName(r.col1), r.row1, colName(r.col2), last)
	switch {
	case last < r.row2:
		fmt.Fprintf(&b, "[%s shown; the rest did not fit: call sheet_read with sheet=%q range=\"%s%d:%s%d\"]", span, sh.Name, colName(r.col1), last+1, colName(r.col2), r.row2)
	case r.col2 < sh.Cols && rng == "":
		fmt.Fprintf(&b, "[%s shown; columns %s-%s too: give a range]", span, colName(r.col2+1), colName(sh.Cols))
	default:
		fmt.Fprintf(&b, "[%s]", span)
	}
	return b.String(), nil
}

// oneLine keeps a cell on one line of the table and cuts it at n bytes.
func oneLine(s string, n int) string {
	s = strings.NewReplacer("\t", " ", "\r\n", " / ", "\n", " / ", "\r", " / ").Replace(s)
	if len(s) > n {
		return clipBytes(s, n) + "…"
	}
	return s
}

// sheetSearchText lists the rows holding every word (in any of their
// cells, ignoring case), with the cells that hold a word, in one sheet
// from fromRow on, or in every sheet.
func sheetSearchText(ctx context.Context, x *unitIndex, facts Facts, words []string, sheet string, fromRow, maxHits int) (string, error) {
	sheets := facts.Sheets
	if sheet != "" {
		si, err := findSheet(facts, sheet)
		if err != nil {
			return "", err
		}
		sheets = facts.Sheets[si : si+1]
	} else {
		fromRow = 1
	}
	m := newMatcher(words)
	var b strings.Builder
	var cells []string
	hits, more, searched := 0, 0, 0
	lastSheet, lastRow := "", 0
	for _, sh := range sheets {
		if fromRow > sh.Rows {
			continue
		}
		err := x.each(sh.First+fromRow-1, func(i int, unit []byte) (bool, error) {
			row := i - sh.First + 1
			if row > sh.Rows {
				return false, nil
			}
			if i%1024 == 0 && ctx.Err() != nil {
				return false, ctx.Err()
			}
			searched++
			cells = cells[:0]
			if err := json.Unmarshal(unit, &cells); err != nil {
				return false, fmt.Errorf("sheet %q row %d: %w", sh.Name, row, err)
			}
			if !m.match([]byte(strings.Join(cells, "\x00"))) {
				return true, nil
			}
			if hits >= maxHits {
				more++
				return true, nil
			}
			hits++
			lastSheet, lastRow = sh.Name, row
			fmt.Fprintf(&b, "%s!%d:", sh.Name, row)
			shown := 0
			for c, v := range cells {
				if shown < 4 && m.any(v) {
					fmt.Fprintf(&b, " %s%d=%s", colName(c+1), row, m.snippet(v, 80))
					shown++
				}
			}
			b.WriteString("\n")
			return true, nil
		})
		if err != nil {
			return "", err
		}
	}
	fmt.Fprintf(&b, "[%d rows matched of %d searched", hits+more, searched)
	if more > 0 {
		fmt.Fprintf(&b, "; %d more after %s!%d: call sheet_search with sheet=%q from_row=%d", more, lastSheet, lastRow, lastSheet, lastRow+1)
		if sheet == "" && len(sheets) > 1 {
			b.WriteString(", then the later sheets one by one")
		}
	}
	b.WriteString("]")
	return b.String(), nil
}
