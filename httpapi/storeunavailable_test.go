package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentd/agentd/actors/hub"
)

// TestAReadGivenOnlyDeadConnectionsIsA503: the errors a Postgres read ends
// with when every connection it was given was dead (the pool's acquire
// handed only closed ones; each try's connection lost mid-answer, pgx's
// bare end of stream under it: persistence's
// TestAReadGivenOnlyDeadConnectionsIsUnavailableAfterBoundedTries), as the
// hub passes them on, are answered 503 unavailable with Retry-After on both
// surfaces, the store's sentence, not its error.
func TestAReadGivenOnlyDeadConnectionsIsA503(t *testing.T) {
	for name, err := range map[string]error{
		"every connection given closed": fmt.Errorf("read chat c1 messages: %w",
			fmt.Errorf("acquire a connection: every one given was closed: %w", pgconn.ErrConnClosed)),
		"every try's connection lost": fmt.Errorf("read chat c1 messages: %w: %w", pgconn.ErrConnClosed, io.ErrUnexpectedEOF),
	} {
		t.Run(name, func(t *testing.T) {
			eachHubErrorWriter(t, err, func(t *testing.T, rec *httptest.ResponseRecorder) {
				body := rec.Body.String()
				if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(body, `"unavailable"`) {
					t.Fatalf("%d, Retry-After %q, %s; want 503 unavailable with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"), body)
				}
				if !strings.Contains(body, hub.ErrStoreUnavailable.Error()) || strings.Contains(body, "conn closed") {
					t.Fatalf("%s; want the store's sentence %q, not its error", body, hub.ErrStoreUnavailable.Error())
				}
			})
		})
	}
}
