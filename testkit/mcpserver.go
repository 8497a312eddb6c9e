package testkit

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// WideMCPServer is an MCP server of n tools whose descriptions are each
// descBytes long, listed one a page: every tools/list message is within a
// client's bound on one message, while the tools together are far past it.
func WideMCPServer(n, descBytes int) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "wide", Version: "1"}, &mcp.ServerOptions{PageSize: 1})
	desc := strings.Repeat("d", descBytes)
	for i := range n {
		mcp.AddTool(server, &mcp.Tool{Name: fmt.Sprintf("tool%03d", i), Description: desc},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
	}
	return server
}
