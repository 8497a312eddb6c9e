package hub

import (
	"github.com/agentd/agentd/actors/session"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
)

// The hub answers in the API's wire types (package api) and converts here,
// at its edge, so storage records can change without changing the wire.

// wireEvent converts an event's data for watchers (the bus calls it).
func wireEvent(d any) any {
	switch v := d.(type) {
	case chat.Message:
		return wireMessage(v)
	case chat.ToolCall:
		return api.ToolCall(v)
	case chat.Usage:
		return api.Usage(v)
	case chat.TurnResult:
		return wireTurn(v)
	case chat.Problem:
		return wireProblem(&v)
	case *chat.Problem:
		return wireProblem(v)
	case chat.Compacted:
		return wireCompacted(v)
	case *chat.Compacted:
		return wireCompacted(*v)
	case chat.CompactionApplied:
		return api.CompactionApplied(v)
	case chat.Healed:
		return api.Healed(v)
	case chat.Waiting:
		return api.Waiting(v)
	case chat.ToolProgress:
		return api.ToolProgress(v)
	case chat.MemoriesLearned:
		return api.MemoriesLearned(v)
	}
	return d // maps of plain values: already wire-shaped
}

func wireChat(c persistence.Chat, last int64) api.Chat {
	out := api.Chat{ID: c.ID, Title: c.Title, Model: c.Model, CreatedAt: c.CreatedAt, Messages: last,
		Instructions: c.Instructions, InstructionsVersion: c.InstructionsVersion, Settings: wireSettings(c.Settings), Toolsets: c.Toolsets}
	if len(c.Tools) > 0 {
		out.Tools = wireTools(c.Tools)
	}
	return out
}

func settingsOf(s *api.Settings) chat.Settings {
	if s == nil {
		return chat.Settings{}
	}
	return chat.Settings(*s)
}

func wireSettings(s chat.Settings) *api.Settings {
	if s.Temperature == nil && s.TopP == nil && s.MaxOutputTokens == nil && len(s.Stop) == 0 && s.ReasoningEffort == "" && s.CompactThreshold == nil && s.ParallelToolCalls == nil {
		return nil
	}
	w := api.Settings(s)
	return &w
}

func specsOfWire(ts []api.Tool) []chat.ToolSpec {
	if ts == nil {
		return nil
	}
	out := make([]chat.ToolSpec, len(ts))
	for i, t := range ts {
		out[i] = chat.ToolSpec(t)
	}
	return out
}

func wireTools(ss []chat.ToolSpec) []api.Tool {
	out := make([]api.Tool, len(ss))
	for i, s := range ss {
		out[i] = api.Tool(s)
	}
	return out
}

// patchOf is the session's Patch of a PATCH body.
func patchOf(req api.PatchChatRequest) *session.Patch {
	p := &session.Patch{Model: req.Model, Title: req.Title, Instructions: req.Instructions, Toolsets: req.Toolsets, NoAutoRemember: req.NoAutoRemember}
	if req.Settings != nil {
		st := settingsOf(req.Settings)
		p.Settings = &st
	}
	if req.Tools != nil {
		specs := specsOfWire(*req.Tools)
		p.Tools = &specs
	}
	return p
}

func wireMessages(ms []chat.Message) []api.Message {
	out := make([]api.Message, len(ms))
	for i, m := range ms {
		out[i] = wireMessage(m)
	}
	return out
}

func wireMessage(m chat.Message) api.Message {
	out := api.Message{Seq: m.Seq, Role: api.Role(m.Role), Content: m.Content, CreatedAt: m.CreatedAt,
		Thinking: m.Thinking, ThinkingSignature: m.ThinkingSignature, ToolCallID: m.ToolCallID, ToolName: m.ToolName,
		IsError: m.IsError, Untrusted: m.Untrusted, Origin: m.Origin, Partial: m.Partial, Problem: m.Problem, MaxOutputReached: m.MaxOutputReached, Refused: m.Refused, Model: m.Model, IdempotencyKey: m.IdempotencyKey}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, api.ToolCall(c))
	}
	for _, im := range m.Images {
		out.Images = append(out.Images, api.Image(im))
	}
	for _, a := range m.Attachments {
		out.Attachments = append(out.Attachments, api.Attachment(a))
	}
	return out
}

func wireTurn(r chat.TurnResult) api.TurnResult {
	out := api.TurnResult{TurnID: r.TurnID, Status: r.Status, Messages: wireMessages(r.Messages), Usage: api.Usage(r.Usage),
		SummaryUsage: api.Usage(r.SummaryUsage), Problem: wireProblem(r.Problem), MaxOutputReached: r.MaxOutputReached, Refused: r.Refused}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, api.ToolCall(c))
	}
	return out
}

func wireProblem(p *chat.Problem) *api.Problem {
	if p == nil {
		return nil
	}
	out := &api.Problem{Kind: p.Kind, Message: p.Message}
	if p.NextStep != nil {
		n := api.NextStep(*p.NextStep)
		out.NextStep = &n
	}
	return out
}

func wireContext(v *chat.ContextView) api.Context {
	out := api.Context{Model: v.Model, Window: v.Window, WindowSource: v.WindowSource, Budget: api.Budget(v.Budget),
		Estimate: v.Estimate, Factor: v.Factor, FirstKeptSeq: v.FirstKeptSeq, Summary: v.Summary, SummaryModel: v.SummaryModel,
		Digest: v.Digest, StubbedSeqs: v.StubbedSeqs, Lean: v.Lean, LoadedTools: v.LoadedTools, LastSeq: v.LastSeq,
		InstructionsVersion: v.InstructionsVersion, InstructionsTokens: v.InstructionsTokens, Warnings: v.Warnings,
		RecentRequests: make([]api.RequestLog, len(v.RecentRequests))}
	for i, r := range v.RecentRequests {
		out.RecentRequests[i] = api.RequestLog(r)
	}
	return out
}

func wireModel(m providers.ModelInfo) api.Model {
	return api.Model{ID: m.Provider + "/" + m.ID, Object: "model", OwnedBy: m.Provider, Provider: m.Provider, Window: m.Window, WindowSource: m.WindowSource,
		Vision: m.Vision, Local: m.Local, Loaded: m.Loaded}
}

func wireMemory(m memory.Memory) api.Memory {
	return api.Memory{ID: m.ID, Text: m.Text, ChatID: m.ChatID, FromSeq: m.FromSeq, ToSeq: m.ToSeq,
		CreatedAt: m.CreatedAt, State: m.State, RunID: m.RunID}
}

func wireRun(r memory.Run) api.MemoryRun {
	return api.MemoryRun{ID: r.ID, ChatID: r.ChatID, At: r.At, Source: r.Source, Added: r.Added, Undone: r.Undone}
}

func wireErrors(errs map[string]error) map[string]string {
	out := make(map[string]string, len(errs))
	for p, err := range errs {
		out[p] = err.Error()
	}
	return out
}

func wireCompacted(c chat.Compacted) api.Compacted {
	return api.Compacted{FirstKeptSeq: c.FirstKeptSeq, Summary: c.Summary, Model: c.Model, Digest: c.Digest, Usage: api.Usage(c.Usage)}
}
