package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestAToolsetWithASchemaTheIndexCannotReadIsA400NamingTheTool: a tool
// whose parameter schema the tools' check takes but the tool index cannot
// read (a boolean subschema) is the request's to mend: 400 naming the
// tool and why, nothing stored. It was put, the tool indexed without its
// parameters and the client told nothing.
func TestAToolsetWithASchemaTheIndexCannotReadIsA400NamingTheTool(t *testing.T) {
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000), twoTenants)
	req := api.PutToolsetRequest{Executor: api.Executor{Kind: "client"}, Tools: []api.Tool{
		{Name: "lookup_invoice", Parameters: crmTools[0].Parameters},
		{Name: "scrap_pallet", Parameters: json.RawMessage(`{"type":"object","properties":{"why":true}}`)},
	}}
	var refused api.Error
	if st := askJSON(t, d, "tok-a", "PUT", "/v1/toolsets/crm", req, &refused); st != http.StatusBadRequest || refused.Kind != "bad_request" ||
		!strings.Contains(refused.Message, "tool scrap_pallet: ") || !strings.Contains(refused.Message, "cannot unmarshal bool") {
		t.Fatalf("%d %+v; want 400 naming scrap_pallet and why", st, refused)
	}
	if st := askJSON(t, d, "tok-a", "GET", "/v1/toolsets/crm", nil, nil); st != http.StatusNotFound {
		t.Fatalf("the refused toolset: %d, want 404", st)
	}
}
