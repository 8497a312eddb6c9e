package httpapi

import (
	"context"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
)

// attach resolves a message's attachments into reference notes.
func (s *Server) attach(ctx context.Context, tenant string, msg *chat.Message, req api.SendMessageRequest) error {
	return nil
}
