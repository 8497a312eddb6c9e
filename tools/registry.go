// Package tools holds what a model can call: a registry of tools (typed Go
// functions and tools of MCP servers), the runner the tool loop uses to execute
// one call safely, and a few real built-in tools. It knows nothing of actors,
// storage or providers: a call goes in, a model-visible Result comes out.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/chat"
)

// Result is what a tool returns to the model. A model-visible failure is a
// Result with IsError, not a Go error.
type Result struct {
	Text    string
	IsError bool
	// Untrusted marks outside text (web pages, files, other servers' output):
	// a chat that read it has what it learns wait for an OK.
	Untrusted bool
	Images    []chat.Image
}

// Tool is one registered tool.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments object.
	Parameters json.RawMessage
	// Source says where the tool comes from: "go" or "mcp:<server>".
	Source string
	// Run executes the tool. It returns a Go error only for a system failure;
	// bad input is a Result with IsError.
	Run func(ctx context.Context, args json.RawMessage) (Result, error)
	// Client: the application runs calls to this tool itself and Run is
	// nil; a turn that calls it pauses for the application's result.
	Client bool
	// args is Parameters compiled (CheckingArgs): a call whose arguments
	// it does not take is refused before it runs or goes to the
	// application.
	args *argSchema
}

// CheckingArgs returns t holding every call to its Parameters, compiled
// here, once: a call they do not take gets an error result (Refusal)
// instead of running or going to the application. It refuses a schema
// compileArgs refuses.
func CheckingArgs(t Tool) (Tool, error) {
	a, err := compileArgs(t.Parameters)
	if err != nil {
		return t, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	t.args = a
	return t, nil
}

// Spec is the tool as a model sees it.
func (t Tool) Spec() chat.ToolSpec {
	return chat.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
}

// Sources of tools agentd does not run in-process.
const (
	// SourceGo is the Source of tools registered from Go code.
	SourceGo = "go"
	// SourceClient is the Source of tools the application runs itself.
	SourceClient = "client"
)

// maxNameLen and namePattern follow the strictest provider rule agentd
// serves (OpenAI: ^[a-zA-Z0-9_-]{1,64}$), so a registered tool can be sent to
// any of them unchanged.
const maxNameLen = 64

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName reports whether name can be sent to every provider as a tool name.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Registry holds the tools a daemon knows. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
	// sorted caches List's order and specs their specs; nil after any
	// change. Requests list the tools on every turn, registrations are rare.
	sorted []Tool
	specs  []chat.ToolSpec
	// sets are the tenants' toolsets (toolsets.go); gen counts changes.
	sets map[string]*toolset
	gen  uint64
	// tenantTools bounds the tools of one tenant's toolsets together
	// (LimitTenantTools); 0: no bound.
	tenantTools int
	// inlineArgs holds the compiled schemas of chats' own tools.
	inlineArgs argCache
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: make(map[string]Tool)}
}

// Add registers a raw tool (an MCP tool, or one whose schema is written by
// hand). It fails on an invalid or duplicate name, a missing Run, or
// Parameters that are not a JSON object.
func (r *Registry) Add(t Tool) error {
	if !ValidName(t.Name) {
		return fmt.Errorf("tools: add %q: name must be 1-%d letters, digits, '_' or '-'", t.Name, maxNameLen)
	}
	if t.Run == nil && !t.Client {
		return fmt.Errorf("tools: add %q: Run is nil", t.Name)
	}
	if len(t.Parameters) == 0 {
		t.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(t.Parameters, &obj); err != nil {
		return fmt.Errorf("tools: add %q: parameters are not a JSON schema object: %w", t.Name, err)
	}
	if t.Source == "" {
		t.Source = SourceGo
	}
	// Copy the schema so a caller mutating its slice later cannot change
	// what the registry sends.
	t.Parameters = slices.Clone(t.Parameters)

	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.tools[t.Name]; ok {
		return fmt.Errorf("tools: add %q from %s: already registered from %s", t.Name, t.Source, old.Source)
	}
	r.tools[t.Name] = t
	r.sorted, r.specs = nil, nil
	r.gen++
	return nil
}

// Remove drops a tool; it reports whether the tool was there.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	r.sorted, r.specs = nil, nil
	r.gen++
	return ok
}

// Get returns the tool registered under name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Len is the number of registered tools.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.tools)
}

// List returns every tool, sorted by name.
func (r *Registry) List() []Tool {
	sorted, _ := r.cached()
	// A copy: the caller may sort or trim what it gets.
	return slices.Clone(sorted)
}

// cached returns every tool sorted by name and their specs, building both
// after a change.
func (r *Registry) cached() ([]Tool, []chat.ToolSpec) {
	r.mu.RLock()
	sorted, specs := r.sorted, r.specs
	r.mu.RUnlock()
	if sorted != nil {
		return sorted, specs
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sorted == nil {
		r.sorted = make([]Tool, 0, len(r.tools))
		for _, t := range r.tools {
			r.sorted = append(r.sorted, t)
		}
		slices.SortFunc(r.sorted, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
		r.specs = make([]chat.ToolSpec, len(r.sorted))
		for i, t := range r.sorted {
			r.specs[i] = t.Spec()
		}
	}
	return r.sorted, r.specs
}

// Specs returns the model-facing specs of the named tools, in the order
// given, skipping unknown names and repeats; with no names it returns every
// tool sorted by name.
func (r *Registry) Specs(names ...string) []chat.ToolSpec {
	if len(names) == 0 {
		_, specs := r.cached()
		return slices.Clone(specs)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]chat.ToolSpec, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		t, ok := r.tools[n]
		if !ok || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, t.Spec())
	}
	return out
}

// Limits bound one tool call.
type Limits struct {
	// Timeout is the longest a call may run; 0 means only the caller's
	// context bounds it.
	Timeout time.Duration
	// MaxResultBytes caps the text a call may return at all (memory and
	// storage protection); 0 means no cap. A longer text keeps its head and
	// tail. The smaller, model-facing cut with a recovery pointer is made by
	// the caller with HeadTail once it knows where the result is stored.
	MaxResultBytes int
	// MaxArgBytes refuses, unread, arguments longer than this; 0 means no
	// cap. The caller sends the model only ShortArguments of them again.
	MaxArgBytes int
}

// TooLong is the refusal of a call whose arguments are over MaxArgBytes;
// over is false when they are within it. Every call goes through it, the
// ones the caller answers itself (find_tools) too.
func (lim Limits) TooLong(call chat.ToolCall) (res Result, over bool) {
	if lim.MaxArgBytes <= 0 || len(call.Arguments) <= lim.MaxArgBytes {
		return Result{}, false
	}
	return errorResult("The arguments for %s are %d bytes, over the limit of %d bytes, so the call was refused unread. Send smaller arguments: split the work into several calls, or write less at once.",
		call.Name, len(call.Arguments), lim.MaxArgBytes), true
}

// PanicError is the Go error Call reports when a tool panicked.
type PanicError struct {
	Tool  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tool %s panicked: %v", e.Tool, e.Value)
}

// ErrUnknownTool is reported by Call for a call to a name nobody registered.
var ErrUnknownTool = errors.New("unknown tool")

// Run executes one call and never panics or returns a Go error: an unknown
// tool, arguments that are not valid JSON or do not match the schema, a
// timeout, a panic inside the tool or a Go error from it all become an
// IsError Result naming the tool and what to fix.
func (r *Registry) Run(ctx context.Context, call chat.ToolCall, lim Limits) Result {
	res, _ := r.Call(ctx, call, lim)
	return res
}

// Call is Run for a caller that logs: the Result is the same, and the error
// is non-nil when something other than the model's input went wrong (the
// tool failed, panicked — a *PanicError with its stack — timed out, or the
// tool is unknown), so the daemon can log it. The Result is what the model
// sees either way.
func (r *Registry) Call(ctx context.Context, call chat.ToolCall, lim Limits) (Result, error) {
	return r.call(ctx, r.Get, call, lim)
}

// call runs a call to the tool get finds: the one path every call takes,
// whatever registered the tool.
func (r *Registry) call(ctx context.Context, get func(string) (Tool, bool), call chat.ToolCall, lim Limits) (Result, error) {
	t, ok := get(call.Name)
	if !ok {
		return errorResult("There is no tool named %q. %s", call.Name, r.availableHint()),
			fmt.Errorf("tools: call %q: %w", call.Name, ErrUnknownTool)
	}
	args, res, ok := t.admit(call, lim)
	if !ok {
		return res, nil
	}
	if t.Client {
		return errorResult("The tool %s runs in the application, not here.", t.Name), fmt.Errorf("tools: call %q: a client tool", t.Name)
	}

	res, err := runGuarded(ctx, t, args, lim.Timeout)
	if err != nil {
		return res, err
	}
	if lim.MaxResultBytes > 0 && len(res.Text) > lim.MaxResultBytes {
		res.Text = HeadTail(res.Text, lim.MaxResultBytes, "")
	}
	return res, nil
}

// Refusal is the result a call of t gets instead of running, or instead
// of going to the application for a client tool, and whether it gets it:
// its arguments are over lim.MaxArgBytes, are not one JSON object, or are
// not what t's schema takes (CheckingArgs). It is what Call answers such
// a call.
func (t Tool) Refusal(call chat.ToolCall, lim Limits) (Result, bool) {
	_, res, ok := t.admit(call, lim)
	return res, !ok
}

// admit reads a call's arguments as t takes them ("" and null are {}),
// or the result that refuses them.
func (t Tool) admit(call chat.ToolCall, lim Limits) (json.RawMessage, Result, bool) {
	if res, over := lim.TooLong(call); over {
		return nil, res, false
	}
	args := strings.TrimSpace(call.Arguments)
	// Models send "" or null for a tool without parameters; both mean {}.
	if args == "" || args == "null" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return nil, errorResult("The arguments for %s are not valid JSON. Send one JSON object that matches the tool's parameter schema.", t.Name), false
	}
	if args[0] != '{' {
		return nil, errorResult("The arguments for %s must be a JSON object, not %s.", t.Name, jsonKind(args[0])), false
	}
	if problem := t.args.check(json.RawMessage(args)); problem != "" {
		return nil, invalidArgs(t.Name, problem), false
	}
	return json.RawMessage(args), Result{}, true
}

// invalidArgs is the result of arguments a tool's schema does not take,
// the same for every tool: the model reads one form.
func invalidArgs(name, problem string) Result {
	return errorResult("Invalid arguments for %s: %s. Fix the call to match the tool's parameter schema.", name, problem)
}

// runGuarded runs the tool in its own goroutine so that a timeout answers
// even when the tool ignores its context, and so a panic is recovered here
// rather than taking the daemon down.
func runGuarded(ctx context.Context, t Tool, args json.RawMessage, timeout time.Duration) (Result, error) {
	callCtx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		callCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()

	type outcome struct {
		res Result
		err error
	}
	// Buffered: a tool that finishes after the timeout must not block forever.
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: &PanicError{Tool: t.Name, Value: v, Stack: debug.Stack()}}
			}
		}()
		res, err := t.Run(callCtx, args)
		done <- outcome{res: res, err: err}
	}()

	select {
	case o := <-done:
		var pe *PanicError
		switch {
		case errors.As(o.err, &pe):
			return errorResult("The tool %s failed with an internal error (a bug in the tool, not in your arguments). Do not retry the same call; tell the person it failed.", t.Name), o.err
		case o.err != nil && ctx.Err() != nil:
			return CancelledResult(t.Name), fmt.Errorf("tools: %s: %w", t.Name, o.err)
		case o.err != nil && errors.Is(callCtx.Err(), context.DeadlineExceeded):
			return timeoutResult(t.Name, timeout), fmt.Errorf("tools: %s: timed out after %s: %w", t.Name, timeout, o.err)
		case o.err != nil:
			return errorResult("The tool %s failed: %v", t.Name, o.err), fmt.Errorf("tools: %s: %w", t.Name, o.err)
		}
		return o.res, nil
	case <-callCtx.Done():
		if ctx.Err() != nil {
			return CancelledResult(t.Name), fmt.Errorf("tools: %s: %w", t.Name, ctx.Err())
		}
		return timeoutResult(t.Name, timeout), fmt.Errorf("tools: %s: timed out after %s", t.Name, timeout)
	}
}

// CancelledResult is what the model reads of a call to name whose turn
// was cancelled (stopped, deleted) before the call finished.
func CancelledResult(name string) Result {
	return errorResult("The call to %s was cancelled before it finished.", name)
}

func timeoutResult(name string, d time.Duration) Result {
	return errorResult("The tool %s did not finish within its time limit of %s and was stopped. Try a smaller or simpler request.", name, d)
}

func errorResult(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// availableHint names some registered tools so the model can correct a typo.
func (r *Registry) availableHint() string {
	const show = 20
	list := r.List()
	if len(list) == 0 {
		return "No tools are registered."
	}
	names := make([]string, 0, show)
	for i, t := range list {
		if i == show {
			break
		}
		names = append(names, t.Name)
	}
	more := ""
	if len(list) > show {
		more = fmt.Sprintf(" and %d more", len(list)-show)
	}
	return fmt.Sprintf("Use one of: %s%s.", strings.Join(names, ", "), more)
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
