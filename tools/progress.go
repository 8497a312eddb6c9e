package tools

import "context"

// Progress is what a running tool says of itself while it works: a line for
// a person and, when it counts, Done of Total (pages, files).
type Progress struct {
	Message string
	Done    int
	Total   int
}

type progressKey struct{}

// WithProgress returns ctx carrying report, which the session actor sets
// before a call so the tool's reports reach the chat's stream. report must
// be safe to call from the tool's goroutine and must not block.
func WithProgress(ctx context.Context, report func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, report)
}

// ReportProgress hands p to the reporter WithProgress set; without one it
// does nothing, so a tool reports whoever calls it.
func ReportProgress(ctx context.Context, p Progress) {
	if report, ok := ctx.Value(progressKey{}).(func(Progress)); ok {
		report(p)
	}
}
