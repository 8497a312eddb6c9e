package tools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// ConnectMCPToolset connects an application's streamable-HTTP MCP server
// registered at runtime and returns its tools, named as the yaml's servers'
// ("<toolset>__<tool>"), and the close of its connection. The server is
// reached under the webhooks' address rules; its output is untrusted.
// s.Headers are sent as they are (the caller resolved them).
func ConnectMCPToolset(ctx context.Context, s MCPServer, allowPrivate bool, log zerolog.Logger) ([]Tool, func() error, error) {
	if err := CheckWebhookURL(s.URL, allowPrivate); err != nil {
		return nil, nil, err
	}
	limit := limitOrDefault(s.MaxResultBytes)
	log = log.With().Str("mcp_server", s.Name).Logger()
	dial := func() (mcp.Transport, error) {
		return streamableTransport(s.URL, guardedTransport(mcpConnectTimeout, allowPrivate), s.Headers, limit, log), nil
	}
	conn := newMCPConn(s.Name, dial, log)
	list, err := listMCPTools(ctx, conn, s)
	if err != nil {
		_ = conn.close()
		return nil, nil, err
	}
	out := make([]Tool, len(list))
	for i, mt := range list {
		out[i] = mcpTool(s, conn, mt, log)
	}
	return out, conn.close, nil
}
