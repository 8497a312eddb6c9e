package tools

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// ConnectMCPToolset connects an application's streamable-HTTP MCP server
// registered at runtime and returns its tools, named as the yaml's servers'
// ("<toolset>__<tool>"), and the close of its session. The server is
// reached under the webhooks' address rules; its output is untrusted.
func ConnectMCPToolset(ctx context.Context, s MCPServer, allowPrivate bool, log zerolog.Logger) ([]Tool, func() error, error) {
	if err := CheckWebhookURL(s.URL, allowPrivate); err != nil {
		return nil, nil, err
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:             s.URL,
		HTTPClient:           &http.Client{Transport: headerTransport{base: guardedTransport(mcpConnectTimeout, allowPrivate), headers: s.Headers}},
		DisableStandaloneSSE: true,
	}
	session, list, err := connectMCPServer(ctx, mcpTarget{server: s, transport: transport}, log)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Tool, len(list))
	for i, mt := range list {
		out[i] = mcpTool(s, session, mt)
	}
	return out, session.Close, nil
}
