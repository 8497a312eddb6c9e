package tools

import "context"

// CallInfo tells a tool which chat called it, for tools that read or write
// that chat's own data (conversation_read, memory tools). Seq is the seq of
// the assistant message that asked for the call.
type CallInfo struct {
	Tenant string
	ChatID string
	Seq    int64
	// CallID is the id of the call being run.
	CallID string
	// WaitForOK: the chat read untrusted text, or remembering automatically
	// is off, so anything a tool would remember waits for the person's OK.
	WaitForOK bool
	// SentBytes is the most of a result the model is sent whole
	// (limits.tool_result_bytes; 0: no bound): a tool that reads back in
	// pieces sizes them under it.
	SentBytes int
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying ci; the session actor sets it before Run.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the CallInfo set by WithCallInfo, if any. A tool that
// needs it and finds none should answer with an IsError Result, not guess.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}
