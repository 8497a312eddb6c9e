package httpapi

import (
	"errors"
	"net/http"

	"github.com/agentd/agentd/actors/hub"
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
