package attachments

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

// Tool names, for the session to pick what it offers a model.
const (
	ToolFileRead    = "file_read"
	ToolFileSearch  = "file_search"
	ToolPDFInfo     = "pdf_info"
	ToolPDFSearch   = "pdf_search"
	ToolPDFRead     = "pdf_read"
	ToolImageView   = "image_view"
	ToolSheetRead   = "sheet_read"
	ToolSheetSearch = "sheet_search"
	ToolDocInfo     = "doc_info"
	ToolDocRead     = "doc_read"
	ToolDocSearch   = "doc_search"
)

// ToolNames lists the attachment tools to offer a model; image_view only
// when the model takes pictures, so a model without vision never gets pixels.
func ToolNames(vision bool) []string {
	names := []string{ToolFileRead, ToolFileSearch, ToolPDFInfo, ToolPDFSearch, ToolPDFRead,
		ToolSheetRead, ToolSheetSearch, ToolDocInfo, ToolDocRead, ToolDocSearch}
	if vision {
		names = append(names, ToolImageView)
	}
	return names
}

// Per-call limits. They bound one result, never what can be reached: every
// result that stops short says which call continues it.
const (
	fileReadMaxBytes  = 16 << 10
	pdfReadMaxBytes   = 24 << 10
	defaultLines      = 200
	defaultPages      = 5
	defaultHits       = 20
	sheetReadMaxBytes = 16 << 10
	docReadMaxBytes   = 24 << 10
	defaultRows       = 50
)

var (
	//go:embed file_read.md
	fileReadDescription string
	//go:embed file_search.md
	fileSearchDescription string
	//go:embed pdf_info.md
	pdfInfoDescription string
	//go:embed pdf_search.md
	pdfSearchDescription string
	//go:embed pdf_read.md
	pdfReadDescription string
	//go:embed image_view.md
	imageViewDescription string
	//go:embed sheet_read.md
	sheetReadDescription string
	//go:embed sheet_search.md
	sheetSearchDescription string
	//go:embed doc_info.md
	docInfoDescription string
	//go:embed doc_read.md
	docReadDescription string
	//go:embed doc_search.md
	docSearchDescription string
)

// FileReadParams are the arguments of file_read.
type FileReadParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	FromLine     int64  `json:"from_line,omitempty" jsonschema:"description=First line to return (1-based; default 1),minimum=1"`
	ToLine       int64  `json:"to_line,omitempty" jsonschema:"description=Last line to return (inclusive; default from_line + 199),minimum=1"`
}

// FileSearchParams are the arguments of file_search.
type FileSearchParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	Words        string `json:"words" jsonschema:"description=Words that must all appear on a line (case-insensitive),minLength=1"`
	MaxHits      int    `json:"max_hits,omitempty" jsonschema:"description=Most matching lines to show (default 20),minimum=1,maximum=200"`
	FromLine     int64  `json:"from_line,omitempty" jsonschema:"description=Line to start searching at (default 1),minimum=1"`
}

// PDFInfoParams are the arguments of pdf_info.
type PDFInfoParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
}

// PDFSearchParams are the arguments of pdf_search.
type PDFSearchParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	Words        string `json:"words" jsonschema:"description=Words that must all appear on a page (case-insensitive),minLength=1"`
	MaxHits      int    `json:"max_hits,omitempty" jsonschema:"description=Most matching pages to show (default 20),minimum=1,maximum=200"`
	FromPage     int    `json:"from_page,omitempty" jsonschema:"description=Page to start searching at (default 1),minimum=1"`
}

// PDFReadParams are the arguments of pdf_read.
type PDFReadParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	FromPage     int    `json:"from_page,omitempty" jsonschema:"description=First page to read (1-based; default 1),minimum=1"`
	ToPage       int    `json:"to_page,omitempty" jsonschema:"description=Last page to read (inclusive; default from_page + 4),minimum=1"`
}

// ImageViewParams are the arguments of image_view.
type ImageViewParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
}

// SheetReadParams are the arguments of sheet_read.
type SheetReadParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	Sheet        string `json:"sheet,omitempty" jsonschema:"description=Sheet name or number (default the first sheet)"`
	Range        string `json:"range,omitempty" jsonschema:"description=Cells to read in A1 notation: B2:D40 or C7 or B:D (columns) or 3:10 (rows); overrides from_row and to_row"`
	FromRow      int    `json:"from_row,omitempty" jsonschema:"description=First row to read (1-based; default 1),minimum=1"`
	ToRow        int    `json:"to_row,omitempty" jsonschema:"description=Last row to read (inclusive; default from_row + 49),minimum=1"`
}

// SheetSearchParams are the arguments of sheet_search.
type SheetSearchParams struct {
	AttachmentID string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	Words        string `json:"words" jsonschema:"description=Words that must all appear in one row's cells (case-insensitive),minLength=1"`
	Sheet        string `json:"sheet,omitempty" jsonschema:"description=Search only this sheet (name or number; default every sheet)"`
	FromRow      int    `json:"from_row,omitempty" jsonschema:"description=Row to start at; only with sheet (default 1),minimum=1"`
	MaxHits      int    `json:"max_hits,omitempty" jsonschema:"description=Most matching rows to show (default 20),minimum=1,maximum=200"`
}

// DocInfoParams are the arguments of doc_info.
type DocInfoParams struct {
	AttachmentID  string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	FromParagraph int    `json:"from_paragraph,omitempty" jsonschema:"description=List the outline from this paragraph on (default 1),minimum=1"`
}

// DocReadParams are the arguments of doc_read.
type DocReadParams struct {
	AttachmentID  string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	Section       string `json:"section,omitempty" jsonschema:"description=Words of a heading: reads the section under the first heading holding them all; overrides the paragraph range"`
	FromParagraph int    `json:"from_paragraph,omitempty" jsonschema:"description=First paragraph to read (1-based; default 1),minimum=1"`
	ToParagraph   int    `json:"to_paragraph,omitempty" jsonschema:"description=Last paragraph to read (inclusive; default from_paragraph + 29),minimum=1"`
}

// DocSearchParams are the arguments of doc_search.
type DocSearchParams struct {
	AttachmentID  string `json:"attachment_id" jsonschema:"description=The id from the attachment note"`
	Words         string `json:"words" jsonschema:"description=Words that must all appear in one paragraph (case-insensitive),minLength=1"`
	FromParagraph int    `json:"from_paragraph,omitempty" jsonschema:"description=Paragraph to start searching at (default 1),minimum=1"`
	MaxHits       int    `json:"max_hits,omitempty" jsonschema:"description=Most matching paragraphs to show (default 20),minimum=1,maximum=200"`
}

// Owners finds a tenant's attachments (uploaded or attached by path); the
// hub keeps those records.
type Owners interface {
	// Owned returns the tenant's own record of an attachment, as Put
	// answered it, and false when the tenant does not hold it. The record's
	// name and media type say how the tools read the file, so another
	// tenant's upload of the same bytes never changes that.
	Owned(ctx context.Context, tenant, id string) (chat.Attachment, bool, error)
}

// RegisterTools adds the attachment tools, reading from s, to r. Each
// resolves ids within the calling chat's tenant (tools.CallInfoFrom), asking
// owners; an id the tenant does not hold is answered as one nobody holds.
func RegisterTools(r *tools.Registry, s *Store, owners Owners) error {
	if owners == nil {
		return errors.New("register attachment tools: nil owners")
	}
	t := toolset{s: s, owners: owners}
	errs := []error{
		tools.Register(r, ToolFileRead, fileReadDescription, t.fileRead),
		tools.Register(r, ToolFileSearch, fileSearchDescription, t.fileSearch),
		tools.Register(r, ToolPDFInfo, pdfInfoDescription, t.pdfInfo),
		tools.Register(r, ToolPDFSearch, pdfSearchDescription, t.pdfSearch),
		tools.Register(r, ToolPDFRead, pdfReadDescription, t.pdfRead),
		tools.Register(r, ToolImageView, imageViewDescription, t.imageView),
		tools.Register(r, ToolSheetRead, sheetReadDescription, t.sheetRead),
		tools.Register(r, ToolSheetSearch, sheetSearchDescription, t.sheetSearch),
		tools.Register(r, ToolDocInfo, docInfoDescription, t.docInfo),
		tools.Register(r, ToolDocRead, docReadDescription, t.docRead),
		tools.Register(r, ToolDocSearch, docSearchDescription, t.docSearch),
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("register attachment tools: %w", err)
	}
	return nil
}

type toolset struct {
	s      *Store
	owners Owners
}

// open finds the calling tenant's attachment for a tool. A bad, unknown or
// foreign id, or a kind the tool cannot read, is a model-visible Result (ok
// false, err nil); only a system failure is an error. Ownership is checked
// before the store is asked, so the answer never tells whether another
// tenant holds a file with this hash.
func (t toolset) open(ctx context.Context, id string, want ...Kind) (f *os.File, facts Facts, res tools.Result, ok bool, err error) {
	if !validID(id) {
		return nil, Facts{}, failed("attachment_id %q is not an attachment id: copy the 64-character id from the attachment note.", id), false, nil
	}
	ci, found := tools.CallInfoFrom(ctx)
	if !found || ci.Tenant == "" {
		return nil, Facts{}, failed("This tool works only inside a chat; no chat called it."), false, nil
	}
	a, owned, err := t.owners.Owned(ctx, ci.Tenant, id)
	if err != nil {
		return nil, Facts{}, tools.Result{}, false, fmt.Errorf("attachment %s: %w", id, err)
	}
	notFound := failed("No attachment has id %s.", id)
	if !owned {
		return nil, Facts{}, notFound, false, nil
	}
	a.ID = id // the record is the tenant's; the id asked for is the one checked
	facts, err = t.s.FactsOf(a)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, Facts{}, notFound, false, nil
	case err != nil:
		return nil, Facts{}, tools.Result{}, false, err
	}
	if len(want) > 0 && !containsKind(want, facts.Kind) {
		return nil, Facts{}, failed("Attachment %s is %s (%s); %s", id, facts.Kind, facts.MediaType, toolHint(facts.Kind)), false, nil
	}
	f, err = t.s.Open(id)
	if err != nil {
		return nil, Facts{}, tools.Result{}, false, err
	}
	return f, facts, tools.Result{}, true, nil
}

func containsKind(ks []Kind, k Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func toolHint(k Kind) string {
	switch k {
	case KindPDF:
		return "use pdf_info, pdf_search or pdf_read."
	case KindImage:
		return "use image_view."
	case KindSheet:
		return "use sheet_read or sheet_search."
	case KindDoc:
		return "use doc_info, doc_read or doc_search."
	}
	return "use file_read or file_search."
}

func failed(format string, args ...any) tools.Result {
	return tools.Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// file_read and file_search read any kind but PDF, image and office
// files, whose raw bytes would only waste the window; a csv, markdown or
// html file is text too, and a PDF whose index is damaged or an office
// file that could not be parsed falls back to them, so its content stays
// reachable.
func textKinds(facts Facts) bool {
	switch facts.Kind {
	case KindText, KindBinary:
		return true
	case KindPDF:
		return facts.Pages == 0
	case KindSheet, KindDoc:
		return facts.Problem != "" && facts.Sheets == nil && facts.Doc == nil || strings.HasPrefix(baseType(facts.MediaType), "text/")
	}
	return false
}

func (t toolset) fileRead(ctx context.Context, p FileReadParams) (tools.Result, error) {
	f, facts, res, ok, err := t.open(ctx, p.AttachmentID)
	if !ok {
		return res, err
	}
	defer f.Close()
	if !textKinds(facts) {
		return failed("Attachment %s is %s; %s", p.AttachmentID, facts.Kind, toolHint(facts.Kind)), nil
	}
	from := max(1, p.FromLine)
	to := p.ToLine
	if to == 0 {
		to = from + defaultLines - 1
	}
	if to < from {
		return failed("to_line %d is before from_line %d.", to, from), nil
	}
	text, err := fileReadText(ctx, f, facts, from, to, fileReadMaxBytes)
	if err != nil {
		return tools.Result{}, fmt.Errorf("file_read %s: %w", p.AttachmentID, err)
	}
	return tools.Result{Text: text, Untrusted: true}, nil
}

func (t toolset) fileSearch(ctx context.Context, p FileSearchParams) (tools.Result, error) {
	f, facts, res, ok, err := t.open(ctx, p.AttachmentID)
	if !ok {
		return res, err
	}
	defer f.Close()
	if !textKinds(facts) {
		return failed("Attachment %s is %s; %s", p.AttachmentID, facts.Kind, toolHint(facts.Kind)), nil
	}
	words := splitWords(p.Words)
	if len(words) == 0 {
		return failed("words is empty: give at least one word to search for."), nil
	}
	text, err := fileSearchText(ctx, f, facts, words, max(1, p.FromLine), hitsOr(p.MaxHits))
	if err != nil {
		return tools.Result{}, fmt.Errorf("file_search %s: %w", p.AttachmentID, err)
	}
	return tools.Result{Text: text, Untrusted: true}, nil
}

func hitsOr(n int) int {
	if n <= 0 {
		return defaultHits
	}
	return n
}

func (t toolset) pdfInfo(ctx context.Context, p PDFInfoParams) (tools.Result, error) {
	f, facts, res, ok, err := t.open(ctx, p.AttachmentID, KindPDF)
	if !ok {
		return res, err
	}
	defer f.Close()
	text, err := pdfInfoText(f, facts)
	if err != nil {
		return pdfProblem(p.AttachmentID, err), nil
	}
	return tools.Result{Text: text, Untrusted: true}, nil
}

// pdfProblem reports a PDF the library cannot read as the model's problem
// to route around (read the raw file), not as a daemon failure.
func pdfProblem(id string, err error) tools.Result {
	return failed("The PDF %s cannot be read as a PDF (%v); file_read shows its raw text.", id, err)
}

// pdfSearch searches the document's unit index, built on the first search
// and kept beside the file, so no later search extracts a page again. A
// document whose text cannot be indexed (past the bounds) is walked.
func (t toolset) pdfSearch(ctx context.Context, p PDFSearchParams) (tools.Result, error) {
	f, facts, res, ok, err := t.open(ctx, p.AttachmentID, KindPDF)
	if !ok {
		return res, err
	}
	defer f.Close()
	words := splitWords(p.Words)
	if len(words) == 0 {
		return failed("words is empty: give at least one word to search for."), nil
	}
	r, err := openPDF(f)
	if err != nil {
		return pdfProblem(p.AttachmentID, err), nil
	}
	pages := walkedPages(r, "searching")
	if x, err := t.s.index(ctx, facts); err == nil {
		defer x.close()
		pages = indexPages(x)
	} else if ctx.Err() != nil {
		return tools.Result{}, ctx.Err()
	}
	text, err := pdfSearchText(ctx, pages, pdfNumPage(r), words, max(1, p.FromPage), hitsOr(p.MaxHits))
	return pdfAnswer(ctx, p.AttachmentID, text, err)
}

func (t toolset) pdfRead(ctx context.Context, p PDFReadParams) (tools.Result, error) {
	f, _, res, ok, err := t.open(ctx, p.AttachmentID, KindPDF)
	if !ok {
		return res, err
	}
	defer f.Close()
	from := max(1, p.FromPage)
	to := p.ToPage
	if to == 0 {
		to = from + defaultPages - 1
	}
	if to < from {
		return failed("to_page %d is before from_page %d.", to, from), nil
	}
	text, err := pdfReadText(ctx, f, from, to, pdfReadMaxBytes)
	return pdfAnswer(ctx, p.AttachmentID, text, err)
}

// pdfAnswer turns a PDF tool's text or failure into its result; a
// cancelled call is the caller's error, not the model's.
func pdfAnswer(ctx context.Context, id, text string, err error) (tools.Result, error) {
	if ctx.Err() != nil {
		return tools.Result{}, ctx.Err()
	}
	if err != nil {
		return pdfProblem(id, err), nil
	}
	return tools.Result{Text: text, Untrusted: true}, nil
}

func (t toolset) imageView(ctx context.Context, p ImageViewParams) (tools.Result, error) {
	f, facts, res, ok, err := t.open(ctx, p.AttachmentID, KindImage)
	if !ok {
		return res, err
	}
	defer f.Close()
	img, text, err := viewImage(f, facts)
	if err != nil {
		return failed("The image %s cannot be shown: %v", p.AttachmentID, err), nil
	}
	return tools.Result{Text: text, Images: []chat.Image{img}, Untrusted: true}, nil
}

// openIndexed finds the calling tenant's sheet or document and opens its
// unit index. A file that could not be parsed is answered with its
// problem and the raw tools.
func (t toolset) openIndexed(ctx context.Context, id string, k Kind) (*unitIndex, Facts, tools.Result, bool, error) {
	f, facts, res, ok, err := t.open(ctx, id, k)
	if !ok {
		return nil, Facts{}, res, false, err
	}
	f.Close() // the index is what these tools read
	if facts.Sheets == nil && facts.Doc == nil {
		return nil, Facts{}, failed("Attachment %s could not be read as %s (%s); file_read and file_search show its raw bytes.", id, formatName(facts.MediaType), facts.Problem), false, nil
	}
	x, err := t.s.index(ctx, facts)
	if err != nil {
		return nil, Facts{}, tools.Result{}, false, err
	}
	return x, facts, tools.Result{}, true, nil
}

// indexedAnswer turns an index tool's text or failure into its result: a
// bad argument is the model's to fix, a cancelled call the caller's error.
func indexedAnswer(ctx context.Context, tool, id, text string, err error) (tools.Result, error) {
	var me modelError
	switch {
	case errors.As(err, &me):
		return failed("%s", me.Error()), nil
	case ctx.Err() != nil:
		return tools.Result{}, ctx.Err()
	case err != nil:
		return tools.Result{}, fmt.Errorf("%s %s: %w", tool, id, err)
	}
	return tools.Result{Text: text, Untrusted: true}, nil
}

func (t toolset) sheetRead(ctx context.Context, p SheetReadParams) (tools.Result, error) {
	x, facts, res, ok, err := t.openIndexed(ctx, p.AttachmentID, KindSheet)
	if !ok {
		return res, err
	}
	defer x.close()
	text, err := sheetReadText(x, facts, p.Sheet, p.Range, p.FromRow, p.ToRow, sheetReadMaxBytes)
	return indexedAnswer(ctx, ToolSheetRead, p.AttachmentID, text, err)
}

func (t toolset) sheetSearch(ctx context.Context, p SheetSearchParams) (tools.Result, error) {
	words := splitWords(p.Words)
	if len(words) == 0 {
		return failed("words is empty: give at least one word to search for."), nil
	}
	x, facts, res, ok, err := t.openIndexed(ctx, p.AttachmentID, KindSheet)
	if !ok {
		return res, err
	}
	defer x.close()
	text, err := sheetSearchText(ctx, x, facts, words, p.Sheet, max(1, p.FromRow), hitsOr(p.MaxHits))
	return indexedAnswer(ctx, ToolSheetSearch, p.AttachmentID, text, err)
}

func (t toolset) docInfo(ctx context.Context, p DocInfoParams) (tools.Result, error) {
	x, facts, res, ok, err := t.openIndexed(ctx, p.AttachmentID, KindDoc)
	if !ok {
		return res, err
	}
	defer x.close()
	text, err := docInfoText(x, facts, max(1, p.FromParagraph), docReadMaxBytes)
	return indexedAnswer(ctx, ToolDocInfo, p.AttachmentID, text, err)
}

func (t toolset) docRead(ctx context.Context, p DocReadParams) (tools.Result, error) {
	from := max(1, p.FromParagraph)
	to := p.ToParagraph
	if to == 0 {
		to = from + defaultParagraphs - 1
	}
	if to < from {
		return failed("to_paragraph %d is before from_paragraph %d.", to, from), nil
	}
	x, facts, res, ok, err := t.openIndexed(ctx, p.AttachmentID, KindDoc)
	if !ok {
		return res, err
	}
	defer x.close()
	text, err := docReadText(ctx, x, facts, from, to, strings.TrimSpace(p.Section), docReadMaxBytes)
	return indexedAnswer(ctx, ToolDocRead, p.AttachmentID, text, err)
}

func (t toolset) docSearch(ctx context.Context, p DocSearchParams) (tools.Result, error) {
	words := splitWords(p.Words)
	if len(words) == 0 {
		return failed("words is empty: give at least one word to search for."), nil
	}
	x, _, res, ok, err := t.openIndexed(ctx, p.AttachmentID, KindDoc)
	if !ok {
		return res, err
	}
	defer x.close()
	text, err := docSearchText(ctx, x, words, max(1, p.FromParagraph), hitsOr(p.MaxHits))
	return indexedAnswer(ctx, ToolDocSearch, p.AttachmentID, text, err)
}
