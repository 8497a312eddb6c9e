package summarizer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/window"
)

// prefixFold asks the chat's own model for the new summary right after the
// chat's own request prefix (m.Prefix), in one request its provider serves
// mostly from the prompt cache. ok is false when that is not asked (another
// model summarises first, the prefix would not fit beside the answer, it
// ends with a person's message) or the answer is no summary: the caller
// then sends the folded turns as lines.
func prefixFold(ctx context.Context, cfg Config, m *Fold, ref string, sem lane, o *outcome) (string, bool) {
	p := m.Prefix
	if p == nil || ref != m.Model || len(p.Messages) == 0 || p.Messages[len(p.Messages)-1].Role == chat.RoleUser {
		return "", false
	}
	client, info, err := cfg.Catalog.Resolve(ref)
	if err != nil || info.ToolsInWords {
		return "", false
	}
	framed := strings.HasPrefix(p.Messages[0].Content, window.SummaryOpen)
	prompt := PrefixPrompt(framed, redact.Mask(m.Focus))
	room := answerRoom(info.Window)
	est := p.Tokens + window.OneShotEstimate(window.EstimateText(prompt), window.Calibration{Factor: m.Factor})
	if est+room > info.Window*9/10 {
		return "", false
	}
	text, usage, err := ask(ctx, cfg, sem, client, info, providers.Request{
		Model: info.ID, System: p.System, Tools: p.Tools, MaxTokens: room,
		Messages: append(slices.Clip(p.Messages), chat.Message{Role: chat.RoleUser, Content: prompt}),
		NumCtx:   info.Window, EstimatedInput: est, CacheKey: p.CacheKey,
	})
	o.usage = o.usage.Add(usage)
	o.requests++
	if err != nil {
		o.errs = append(o.errs, fmt.Sprintf("%s after the chat's own request: %v", ref, err))
		return "", false
	}
	return text, true
}
