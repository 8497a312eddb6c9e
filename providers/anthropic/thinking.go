package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// BlocksPrefix starts a chat.Message.ThinkingSignature that carries several
// thinking blocks (or a redacted one) as a JSON array, each block exactly as
// the API sent it. A real signature is base64 and never starts with it.
const BlocksPrefix = "anthropic-blocks:"

// thinkingBlock is one thinking or redacted_thinking block as received.
type thinkingBlock struct {
	Type      string `json:"type"` // "thinking" or "redacted_thinking"
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

func (t thinkingBlock) param() anthropic.ContentBlockParamUnion {
	if t.Type == "redacted_thinking" {
		return anthropic.NewRedactedThinkingBlock(t.Data)
	}
	return anthropic.NewThinkingBlock(t.Signature, t.Thinking)
}

// encodeThinking stores an answer's thinking blocks in the two message
// fields: one plain block as itself, anything else behind BlocksPrefix.
func encodeThinking(blocks []thinkingBlock) (thinking, signature string, err error) {
	switch {
	case len(blocks) == 0:
		return "", "", nil
	case len(blocks) == 1 && blocks[0].Type == "thinking":
		return blocks[0].Thinking, blocks[0].Signature, nil
	}
	raw, err := json.Marshal(blocks)
	if err != nil {
		return "", "", fmt.Errorf("encode thinking blocks: %w", err)
	}
	var visible []string
	for _, b := range blocks {
		if b.Thinking != "" {
			visible = append(visible, b.Thinking)
		}
	}
	return strings.Join(visible, "\n\n"), BlocksPrefix + string(raw), nil
}

// decodeThinking gives back the blocks to replay. Thinking without a
// signature (cut short, or from another provider) cannot be sent: the API
// would refuse it, so it is left out.
func decodeThinking(thinking, signature string) ([]thinkingBlock, error) {
	if signature == "" {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(signature, BlocksPrefix); ok {
		var blocks []thinkingBlock
		if err := json.Unmarshal([]byte(rest), &blocks); err != nil {
			return nil, fmt.Errorf("decode thinking blocks: %w", err)
		}
		return blocks, nil
	}
	return []thinkingBlock{{Type: "thinking", Thinking: thinking, Signature: signature}}, nil
}
