package ollama

import (
	"encoding/json"
	"fmt"

	"github.com/ollama/ollama/api"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// toAPIMessages builds Ollama's message list: the system prompt first, then
// the transcript. Thinking is replayed exactly as stored; images ride base64
// encoded in their own message (api.ImageData marshals as base64).
func toAPIMessages(system string, msgs []chat.Message) ([]api.Message, error) {
	out := make([]api.Message, 0, len(msgs)+1)
	if system != "" {
		out = append(out, api.Message{Role: "system", Content: system})
	}
	for i, m := range msgs {
		am := api.Message{Role: string(m.Role), Content: m.Content}
		switch m.Role {
		case chat.RoleUser:
		case chat.RoleAssistant:
			am.Thinking = m.Thinking
			for _, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, api.ToolCall{
					ID:       tc.ID,
					Function: api.ToolCallFunction{Name: tc.Name, Arguments: toolArguments(tc.Arguments)},
				})
			}
		case chat.RoleTool:
			am.ToolName = m.ToolName
			am.ToolCallID = m.ToolCallID
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		for _, img := range m.Images {
			am.Images = append(am.Images, api.ImageData(img.Data))
		}
		out = append(out, am)
	}
	return out, nil
}

// toolArguments parses a stored call's arguments into the object Ollama
// wants; a call that is no JSON object is replayed as an empty one
// (providers.ToolArguments) rather than failing the whole turn.
func toolArguments(text string) api.ToolCallFunctionArguments {
	args := api.NewToolCallFunctionArguments()
	object, _ := providers.ToolArguments(text)
	if err := json.Unmarshal([]byte(object), &args); err != nil {
		return api.NewToolCallFunctionArguments()
	}
	return args
}

// toAPITools describes the tools in Ollama's (OpenAI-shaped) tool format.
func toAPITools(specs []chat.ToolSpec) (api.Tools, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	tools := make(api.Tools, 0, len(specs))
	for _, s := range specs {
		params := api.ToolFunctionParameters{Type: "object", Properties: api.NewToolPropertiesMap()}
		if len(s.Parameters) > 0 && string(s.Parameters) != "null" {
			if err := json.Unmarshal(s.Parameters, &params); err != nil {
				return nil, fmt.Errorf("tool %s: parameters: %w", s.Name, err)
			}
			if params.Properties == nil {
				params.Properties = api.NewToolPropertiesMap()
			}
		}
		tools = append(tools, api.Tool{
			Type:     "function",
			Function: api.ToolFunction{Name: s.Name, Description: s.Description, Parameters: params},
		})
	}
	return tools, nil
}
