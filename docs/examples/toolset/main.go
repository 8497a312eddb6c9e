// Command toolset is an application that brings its own tool to agentd:
// it registers a client-executed toolset, starts a chat with its own
// instructions, and runs the call the model asks for itself.
//
//	AGENTD_URL=http://127.0.0.1:8420 AGENTD_TOKEN=... go run ./docs/examples/toolset
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/agentd/agentd/api"
)

func main() {
	ctx := context.Background()
	c := &api.Client{BaseURL: envOr("AGENTD_URL", "http://127.0.0.1:8420"), Token: os.Getenv("AGENTD_TOKEN")}

	// 1. The application's registry: one tool it runs itself.
	_, err := c.PutToolset(ctx, "crm", api.PutToolsetRequest{
		Executor: api.Executor{Kind: api.ExecutorClient},
		Tools: []api.Tool{{
			Name:        "crm_find",
			Description: "Find a customer in the CRM by name; returns their id and open orders.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		}},
	})
	if err != nil {
		log.Fatal(err)
	}

	// 2. A chat with the application's own instructions and that toolset.
	chat, err := c.CreateChat(ctx, api.CreateChatRequest{
		Instructions: "You are the support desk of Acme. Look customers up before you answer about them.",
		Toolsets:     []string{"crm"},
	})
	if err != nil {
		log.Fatal(err)
	}

	// 3. A turn; each time it pauses on the application's calls, run them
	// and send the results back, which resumes it.
	res, err := c.Send(ctx, chat.ID, api.SendMessageRequest{Content: "How many open orders does Ada Lovelace have?"}, nil)
	for err == nil && res.Status == "requires_action" {
		var results []api.ToolResult
		for _, call := range res.ToolCalls {
			results = append(results, api.ToolResult{CallID: call.ID, Output: runTool(call.Name, call.Arguments)})
		}
		res, err = c.SendToolResults(ctx, chat.ID, api.ToolResultsRequest{Results: results}, nil)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Messages[len(res.Messages)-1].Content)
}

// runTool is the application's own code behind its tools.
func runTool(name, args string) string {
	if name != "crm_find" {
		return "unknown tool " + name
	}
	var a struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	return fmt.Sprintf(`{"customer": %q, "id": "c-1815", "open_orders": 3}`, a.Name)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
