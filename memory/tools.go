package memory

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/tools"
)

//go:embed remember.md
var rememberDescription string

//go:embed memory_search.md
var searchDescription string

//go:embed memory_get.md
var getDescription string

// RememberParams are the arguments of remember.
type RememberParams struct {
	Text string `json:"text" jsonschema:"description=One short self-contained sentence about the person,minLength=1,maxLength=500"`
}

// SearchParams are the arguments of memory_search.
type SearchParams struct {
	Query string `json:"query" jsonschema:"description=A few words on the topic to look for,minLength=1"`
	Limit int    `json:"limit,omitempty" jsonschema:"description=How many memories at most; 5 when left out,minimum=1,maximum=20"`
}

// GetParams are the arguments of memory_get.
type GetParams struct {
	ID string `json:"id" jsonschema:"description=The memory's id as memory_search gave it,minLength=1"`
}

// RegisterTools adds remember, memory_search and memory_get to r. Each works
// on the tenant of the calling chat (tools.CallInfoFrom); without CallInfo a
// call is a model-visible error, never a guess at a tenant.
func RegisterTools(r *tools.Registry, s *Store) error {
	if s == nil {
		return errors.New("memory: register tools: nil store")
	}
	if err := tools.Register(r, "remember", strings.TrimSpace(rememberDescription), s.rememberTool); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if err := tools.Register(r, "memory_search", strings.TrimSpace(searchDescription), s.searchTool); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if err := tools.Register(r, "memory_get", strings.TrimSpace(getDescription), s.getTool); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	return nil
}

var errNoCaller = tools.Result{IsError: true, Text: "This tool works only inside a chat; no chat called it."}

func (s *Store) rememberTool(ctx context.Context, p RememberParams) (tools.Result, error) {
	ci, ok := tools.CallInfoFrom(ctx)
	if !ok || ci.Tenant == "" {
		return errNoCaller, nil
	}
	text := strings.TrimSpace(p.Text)
	if text == "" {
		return tools.Result{IsError: true, Text: "text is empty: write the thing to remember as one short sentence."}, nil
	}
	_, mems, err := s.Add(ctx, AddInput{Tenant: ci.Tenant, ChatID: ci.ChatID, Source: SourceTool,
		FromSeq: ci.Seq, ToSeq: ci.Seq, Texts: []string{text}, Wait: ci.WaitForOK})
	if errors.Is(err, ErrFull) {
		return tools.Result{IsError: true, Text: fmt.Sprintf("Nothing was stored: the memory is full (it keeps at most %d things). "+
			"Tell the person: deleting memories they no longer need makes room.", s.max)}, nil
	}
	if err != nil {
		return tools.Result{}, fmt.Errorf("remember: %w", err)
	}
	if len(mems) == 0 {
		return tools.Result{Text: "Already remembered; nothing new was stored."}, nil
	}
	if ci.WaitForOK {
		return tools.Result{Text: fmt.Sprintf("Noted (id %s); it is kept once the person approves it: %s", mems[0].ID, mems[0].Text)}, nil
	}
	return tools.Result{Text: fmt.Sprintf("Remembered (id %s): %s", mems[0].ID, mems[0].Text)}, nil
}

func (s *Store) searchTool(ctx context.Context, p SearchParams) (tools.Result, error) {
	ci, ok := tools.CallInfoFrom(ctx)
	if !ok || ci.Tenant == "" {
		return errNoCaller, nil
	}
	hits, err := s.Search(ctx, ci.Tenant, p.Query, p.Limit)
	if err != nil {
		return tools.Result{}, fmt.Errorf("memory_search: %w", err)
	}
	if len(hits) == 0 {
		return tools.Result{Text: fmt.Sprintf("No memory matches %q.", p.Query)}, nil
	}
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "%s (%s): %s\n", h.ID, h.CreatedAt.Format("2006-01-02"), h.Text)
	}
	return tools.Result{Text: strings.TrimRight(b.String(), "\n")}, nil
}

func (s *Store) getTool(ctx context.Context, p GetParams) (tools.Result, error) {
	ci, ok := tools.CallInfoFrom(ctx)
	if !ok || ci.Tenant == "" {
		return errNoCaller, nil
	}
	m, err := s.Get(ctx, ci.Tenant, strings.TrimSpace(p.ID))
	if errors.Is(err, ErrNotFound) || (err == nil && m.State != StateActive) {
		// A waiting memory has no OK yet and an undone one was taken back:
		// to the model, neither exists.
		return tools.Result{IsError: true, Text: fmt.Sprintf("No memory with id %q. Use memory_search to find ids.", p.ID)}, nil
	}
	if err != nil {
		return tools.Result{}, fmt.Errorf("memory_get: %w", err)
	}
	where := "told directly"
	if m.ChatID != "" {
		where = "learned in chat " + m.ChatID
	}
	return tools.Result{Text: fmt.Sprintf("%s\n(id %s, remembered %s, %s)", m.Text, m.ID, m.CreatedAt.Format("2006-01-02"), where)}, nil
}
