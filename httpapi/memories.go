package httpapi

import (
	"errors"
	"net/http"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
)

func (s *Server) listMemories(w http.ResponseWriter, r *http.Request, tenant string) {
	ms, err := s.hub.Memories(r.Context(), tenant, r.URL.Query().Get("state"))
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"memories": ms})
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, tenant string) {
	rs, err := s.hub.MemoryRuns(r.Context(), tenant)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": rs})
}

func (s *Server) approveMemory(w http.ResponseWriter, r *http.Request, tenant string) {
	m, err := s.hub.ApproveMemory(r.Context(), tenant, r.PathValue("id"))
	writeMemory(w, r, m, err)
}

// editMemory replaces a memory's text: {"text": "..."}.
func (s *Server) editMemory(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.EditMemoryRequest
	if !decode(w, r, &req) {
		return
	}
	m, err := s.hub.EditMemory(r.Context(), tenant, r.PathValue("id"), req.Text)
	writeMemory(w, r, m, err)
}

func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request, tenant string) {
	if err := s.hub.DeleteMemory(r.Context(), tenant, r.PathValue("id")); err != nil {
		writeHubError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeMemory answers a memory, or the error that stopped its change: a
// memory whose state refuses it is 409.
func writeMemory(w http.ResponseWriter, r *http.Request, m api.Memory, err error) {
	if errors.Is(err, hub.ErrConflict) {
		writeError(w, http.StatusConflict, "conflict", err.Error())
		return
	}
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) undoRun(w http.ResponseWriter, r *http.Request, tenant string) {
	run, err := s.hub.UndoRun(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}
