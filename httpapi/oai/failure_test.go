package oai

import (
	"net/http"
	"testing"

	"github.com/agentd/agentd/api"
)

// A turn's problem answers with the status its cause calls for: the
// client's own request (400), agentd's fault (500), the provider's (502),
// a chat gone or elsewhere (409, 503) and waits (504).
func TestAFailedTurnsStatusNamesItsCause(t *testing.T) {
	for kind, want := range map[string]int{
		api.ProblemTooLong:     http.StatusBadRequest,
		api.ProblemInternal:    http.StatusInternalServerError,
		api.ProblemProvider:    http.StatusBadGateway,
		api.ProblemNoProvider:  http.StatusBadGateway,
		api.ProblemShutdown:    http.StatusServiceUnavailable,
		api.ProblemMoved:       http.StatusServiceUnavailable,
		api.ProblemDeleted:     http.StatusConflict,
		api.ProblemTimeout:     http.StatusGatewayTimeout,
		api.ProblemToolResults: http.StatusGatewayTimeout,
	} {
		a := &answer{res: &api.TurnResult{Problem: &api.Problem{Kind: kind, Message: "why"}}}
		if got, code, _, msg := a.failure(); got != want || code == "" || msg != "why" {
			t.Errorf("%s: %d %q %q, want %d", kind, got, code, msg, want)
		}
	}
}
