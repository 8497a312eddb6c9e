package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/httpapi/oai"
)

// eachHubErrorWriter writes err as both surfaces do, a subtest each, and
// hands check the answer.
func eachHubErrorWriter(t *testing.T, err error, check func(t *testing.T, rec *httptest.ResponseRecorder)) {
	for name, write := range map[string]func(http.ResponseWriter, *http.Request, error){
		"native": writeHubError, "openai": oai.WriteHubError,
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			write(rec, httptest.NewRequest(http.MethodPost, "/v1/chats/c1/messages", nil), err)
			check(t, rec)
		})
	}
}

// A moved chat's 503 says the bare sentence: the cause a store wraps in it
// (epochs, its own error text) stays in the operator's log.
func TestAMovedAnswerCarriesNoStoreDetail(t *testing.T) {
	err := fmt.Errorf("store message: append to chat c1: %w (this node holds epoch 3, the chat is at 4); the write failed: FATAL: terminating connection (SQLSTATE 25P03)", hub.ErrMoved)
	eachHubErrorWriter(t, err, func(t *testing.T, rec *httptest.ResponseRecorder) {
		body := rec.Body.String()
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(body, `"moved"`) {
			t.Fatalf("%d, Retry-After %q, %s; want 503 moved with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"), body)
		}
		if !strings.Contains(body, hub.ErrMoved.Error()) {
			t.Fatalf("%s; want %q", body, hub.ErrMoved.Error())
		}
		for _, detail := range []string{"epoch", "SQLSTATE", "c1"} {
			if strings.Contains(body, detail) {
				t.Fatalf("the answer tells the client %q: %s", detail, body)
			}
		}
	})
}

// A chat whose session panicked past its bound is answered 500 with the
// sentence that says to send again, not a bare "internal error", and
// without the count of panics.
func TestAFailedSessionIsAnsweredWithItsSentence(t *testing.T) {
	err := fmt.Errorf("chat c1: %w (it panicked 11 times within 10s)", hub.ErrFailed)
	eachHubErrorWriter(t, err, func(t *testing.T, rec *httptest.ResponseRecorder) {
		body := rec.Body.String()
		if rec.Code != http.StatusInternalServerError || !strings.Contains(body, `"internal"`) || !strings.Contains(body, hub.ErrFailed.Error()) {
			t.Fatalf("%d %s; want 500 internal saying %q", rec.Code, body, hub.ErrFailed.Error())
		}
		if strings.Contains(body, "panicked") {
			t.Fatalf("the answer tells the client the panics: %s", body)
		}
	})
}
