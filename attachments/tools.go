package attachments

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

// Tool names, for the session to pick what it offers a model.
const (
	ToolFileRead   = "file_read"
	ToolFileSearch = "file_search"
	ToolPDFInfo    = "pdf_info"
	ToolPDFSearch  = "pdf_search"
	ToolPDFRead    = "pdf_read"
	ToolImageView  = "image_view"
)

// ToolNames lists the attachment tools to offer a model; image_view only
// when the model takes pictures, so a model without vision never gets pixels.
func ToolNames(vision bool) []string {
	names := []string{ToolFileRead, ToolFileSearch, ToolPDFInfo, ToolPDFSearch, ToolPDFRead}
	if vision {
		names = append(names, ToolImageView)
	}
	return names
}

// Per-call limits. They bound one result, never what can be reached: every
// result that stops short says which call continues it.
const (
	fileReadMaxBytes = 16 << 10
	pdfReadMaxBytes  = 24 << 10
	defaultLines     = 200
	defaultPages     = 5
	defaultHits      = 20
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

// Owners says whether a tenant holds an attachment (uploaded it or attached
// it by path); the hub keeps those records.
type Owners interface {
	Owns(ctx context.Context, tenant, id string) (bool, error)
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
	owned, err := t.owners.Owns(ctx, ci.Tenant, id)
	if err != nil {
		return nil, Facts{}, tools.Result{}, false, fmt.Errorf("attachment %s: %w", id, err)
	}
	notFound := failed("No attachment has id %s.", id)
	if !owned {
		return nil, Facts{}, notFound, false, nil
	}
	facts, err = t.s.Facts(id)
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
	}
	return "use file_read or file_search."
}

func failed(format string, args ...any) tools.Result {
	return tools.Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// file_read and file_search read any kind but PDF and image, whose raw
// bytes would only waste the window; a PDF whose index is damaged falls
// back to them, so its content stays reachable.
func textKinds(facts Facts) bool {
	return facts.Kind == KindText || facts.Kind == KindBinary || facts.Kind == KindPDF && facts.Pages == 0
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

func (t toolset) pdfSearch(ctx context.Context, p PDFSearchParams) (tools.Result, error) {
	f, _, res, ok, err := t.open(ctx, p.AttachmentID, KindPDF)
	if !ok {
		return res, err
	}
	defer f.Close()
	words := splitWords(p.Words)
	if len(words) == 0 {
		return failed("words is empty: give at least one word to search for."), nil
	}
	text, err := pdfSearchText(ctx, f, words, max(1, p.FromPage), hitsOr(p.MaxHits))
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
