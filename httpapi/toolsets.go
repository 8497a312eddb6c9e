package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
)

// Applications' own setup: a chat's settings and tools on the wire, their
// toolsets, and the results of the calls they run themselves.

func toSettings(s *api.Settings) chat.Settings {
	if s == nil {
		return chat.Settings{}
	}
	return chat.Settings{Temperature: s.Temperature, TopP: s.TopP, MaxOutputTokens: s.MaxOutputTokens, Stop: s.Stop, ReasoningEffort: s.ReasoningEffort}
}

func fromSettings(s chat.Settings) *api.Settings {
	if s.Temperature == nil && s.TopP == nil && s.MaxOutputTokens == nil && len(s.Stop) == 0 && s.ReasoningEffort == "" {
		return nil
	}
	return &api.Settings{Temperature: s.Temperature, TopP: s.TopP, MaxOutputTokens: s.MaxOutputTokens, Stop: s.Stop, ReasoningEffort: s.ReasoningEffort}
}

func toSpecs(ts []api.Tool) []chat.ToolSpec {
	if ts == nil {
		return nil
	}
	out := make([]chat.ToolSpec, len(ts))
	for i, t := range ts {
		out[i] = chat.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	return out
}

func fromSpecs(ss []chat.ToolSpec) []api.Tool {
	out := make([]api.Tool, len(ss))
	for i, s := range ss {
		out[i] = api.Tool{Name: s.Name, Description: s.Description, Parameters: s.Parameters}
	}
	return out
}

func toAPIToolset(ts hub.Toolset) api.Toolset {
	e := ts.Executor
	out := api.Toolset{Name: ts.Name, Tools: fromSpecs(ts.Tools), Version: ts.Version, UpdatedAt: ts.UpdatedAt,
		Executor: api.Executor{Kind: e.Kind, URL: e.URL, SecretEnv: e.SecretEnv, HeadersEnv: e.HeadersEnv}}
	if e.Timeout > 0 {
		out.Executor.Timeout = e.Timeout.String()
	}
	return out
}

func (s *Server) putToolset(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.PutToolsetRequest
	if !decode(w, r, &req) {
		return
	}
	e := req.Executor
	ts := hub.Toolset{Name: r.PathValue("name"), Tools: toSpecs(req.Tools),
		Executor: hub.Executor{Kind: e.Kind, URL: e.URL, SecretEnv: e.SecretEnv, HeadersEnv: e.HeadersEnv}}
	if e.Timeout != "" {
		d, err := time.ParseDuration(e.Timeout)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("executor.timeout %q: use a duration such as \"30s\"", e.Timeout))
			return
		}
		ts.Executor.Timeout = d
	}
	out, err := s.hub.PutToolset(r.Context(), tenant, ts)
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIToolset(out))
}

func (s *Server) getToolset(w http.ResponseWriter, r *http.Request, tenant string) {
	ts, err := s.hub.Toolset(r.Context(), tenant, r.PathValue("name"))
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIToolset(ts))
}

func (s *Server) listToolsets(w http.ResponseWriter, r *http.Request, tenant string) {
	all, err := s.hub.Toolsets(r.Context(), tenant)
	if err != nil {
		writeHubError(w, err)
		return
	}
	out := make([]api.Toolset, len(all))
	for i, ts := range all {
		out[i] = toAPIToolset(ts)
	}
	writeJSON(w, http.StatusOK, map[string]any{"toolsets": out})
}

func (s *Server) deleteToolset(w http.ResponseWriter, r *http.Request, tenant string) {
	if err := s.hub.DeleteToolset(r.Context(), tenant, r.PathValue("name")); err != nil {
		writeHubError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// toolResults resumes a paused turn with the application's results and
// answers exactly like POST .../messages: SSE or JSON, until the turn
// completes or pauses again.
func (s *Server) toolResults(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.ToolResultsRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.Results) == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", `no results: send {"results": [{"call_id": "...", "output": "..."}]}`)
		return
	}
	results := make([]hub.ToolResult, len(req.Results))
	for i, res := range req.Results {
		if len(res.Output) > s.cfg.Limits.MaxMessageBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the output of %s is %d bytes; the limit is %d", res.CallID, len(res.Output), s.cfg.Limits.MaxMessageBytes))
			return
		}
		results[i] = hub.ToolResult{CallID: res.CallID, Output: res.Output, IsError: res.IsError}
	}
	id := r.PathValue("id")
	s.runTurn(w, r, id, func() (string, error) {
		acc, err := s.hub.SubmitToolResults(r.Context(), tenant, id, results)
		if err != nil {
			return "", err
		}
		return acc.TurnID, nil
	})
}
