package httpapi

import (
	"fmt"
	"net/http"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/eventbus"
)

// Applications' toolsets, and the results of the calls they run
// themselves.

func (s *Server) putToolset(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.PutToolsetRequest
	if !decode(w, r, &req) {
		return
	}
	out, err := s.hub.PutWireToolset(r.Context(), tenant, r.PathValue("name"), req)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getToolset(w http.ResponseWriter, r *http.Request, tenant string) {
	ts, err := s.hub.WireToolset(r.Context(), tenant, r.PathValue("name"))
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ts)
}

func (s *Server) listToolsets(w http.ResponseWriter, r *http.Request, tenant string) {
	all, err := s.hub.WireToolsets(r.Context(), tenant)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"toolsets": all})
}

func (s *Server) deleteToolset(w http.ResponseWriter, r *http.Request, tenant string) {
	if err := s.hub.DeleteToolset(r.Context(), tenant, r.PathValue("name")); err != nil {
		writeHubError(w, r, err)
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
	for _, res := range req.Results {
		if len(res.Output) > s.cfg.Limits.MaxMessageBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the output of %s is %d bytes; the limit is %d", res.CallID, len(res.Output), s.cfg.Limits.MaxMessageBytes))
			return
		}
	}
	id := r.PathValue("id")
	s.runTurn(w, r, tenant, id, "", nil, func(*eventbus.Sub) (string, error) { return s.hub.SubmitToolResults(r.Context(), tenant, id, req) })
}
