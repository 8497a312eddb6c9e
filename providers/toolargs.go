package providers

import (
	"bytes"
	"encoding/json"
)

// ToolArguments is a stored call's arguments as the JSON object every
// protocol takes back in a request's history, and whether they were one.
// Text that is no object — a call the answer's length cut off, or broken
// JSON a model wrote — becomes {}: Anthropic and Ollama want an object, and
// OpenAI-style servers that render the history through a chat template
// (llama-server, vLLM) parse the arguments and refuse the request (500)
// when they are not JSON. The call's result already tells the model its
// arguments were unusable.
func ToolArguments(args string) (object string, ok bool) {
	t := bytes.TrimSpace([]byte(args))
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return "{}", false
	}
	return string(t), true
}
