package window

// Role says who produced a message.
type Role string

// The roles window knows. The system prompt is not a message here: the
// caller counts it into the Budget.
const (
	User      Role = "user"
	Assistant Role = "assistant"
	Tool      Role = "tool"
)

// ToolCall is one call an assistant message asks for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Msg is window's minimal view of a stored message. The session actor
// converts its stored messages into Msgs; window never keeps or edits them.
type Msg struct {
	Seq        int64      `json:"seq"`
	Role       Role       `json:"role"`
	Text       string     `json:"text,omitempty"`
	Thinking   string     `json:"thinking,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
	Images     int        `json:"images,omitempty"`
	// Refused marks an answer the provider ended as a refusal or a
	// content filter: Assemble leaves it out with the message that drew it.
	Refused bool `json:"refused,omitempty"`

	// Tokens is the caller's cached EstimateMsg of this message; 0 means
	// window computes it. Caching it matters: estimating is a pass over the
	// text, and a long chat is planned on every turn.
	Tokens int `json:"-"`
	// Conservative caches the message's ConservativeTokens in the same
	// way; 0 means window computes it.
	Conservative int `json:"-"`
	// Bytes is the message's stored size, for the 8 MB fold trigger; 0 means
	// the length of its texts.
	Bytes int `json:"-"`
}

// Per-message framing the provider adds around each message and call (role
// markers, ids, JSON keys). Measured on the chat_json samples: a message with
// an empty body costs about four tokens on OpenAI-style APIs.
const (
	msgOverhead  = 4
	callOverhead = 8
)

// EstimateMsg returns the estimated tokens of m as sent: its text, thinking,
// tool calls, pictures and framing. It ignores m.Tokens.
func EstimateMsg(m Msg) int {
	n := msgOverhead + EstimateText(m.Text) + EstimateText(m.Thinking) + m.Images*PictureTokens
	for _, c := range m.ToolCalls {
		n += callOverhead + EstimateText(c.Name) + EstimateText(c.Arguments)
	}
	if m.Role == Tool {
		n += EstimateText(m.ToolName)
	}
	return n
}

// EstimateMsgs returns the estimated tokens of ms, using each message's
// cached Tokens where set.
func EstimateMsgs(ms []Msg) int {
	n := 0
	for i := range ms {
		n += cachedTokens(&ms[i])
	}
	return n
}

// uncache forgets the cached estimates of a message whose text changed.
func (m *Msg) uncache() { m.Tokens, m.Conservative = 0, 0 }

func cachedTokens(m *Msg) int {
	if m.Tokens > 0 {
		return m.Tokens
	}
	return EstimateMsg(*m)
}

func msgBytes(m *Msg) int {
	if m.Bytes > 0 {
		return m.Bytes
	}
	n := len(m.Text) + len(m.Thinking)
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return n
}
