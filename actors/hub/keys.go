package hub

import (
	"fmt"
	"strings"

	"github.com/agentd/agentd/actors/session"
)

// ErrKeyInProgress refuses a message whose idempotency key is that of one
// waiting its turn, or whose turn waits for the application's tool results
// (or has not yet said it started): send it again later.
var ErrKeyInProgress = session.ErrKeyInProgress

// ErrKeyReused refuses a message whose idempotency key is that of a stored
// message that says otherwise: a key names one message.
var ErrKeyReused = session.ErrKeyReused

// AnsweredError answers a message whose idempotency key is that of the
// message stored as UserSeq, whose turn has ended: nothing was stored, and
// the chat's log after UserSeq holds what it answered.
type AnsweredError struct{ UserSeq int64 }

func (e *AnsweredError) Error() string {
	return fmt.Sprintf("the message with this idempotency key is stored as seq %d and was answered", e.UserSeq)
}

// Key is a message's idempotency key as a surface got it: the client's
// own (an Idempotency-Key header), or, Unsought, one agentd made for a
// request its client says it sends for the first time, stored with the
// message for the client's retry of that request to find
// (session.SubmitTurn.KeyUnsought). The zero Key is none.
type Key struct {
	Value    string
	Unsought bool
}

// maxKeyBytes bounds an idempotency key, as Stripe's and the IETF draft's
// examples do (a UUID is 36).
const maxKeyBytes = 255

// checkKey refuses a key longer than maxKeyBytes or with a byte outside
// printable ASCII: it is stored with its message and echoed in errors.
func checkKey(key string) error {
	if len(key) > maxKeyBytes {
		return fmt.Errorf("%w: the idempotency key is %d bytes; at most %d", ErrInvalid, len(key), maxKeyBytes)
	}
	if i := strings.IndexFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }); i >= 0 {
		return fmt.Errorf("%w: the idempotency key has %q at byte %d: use printable ASCII, such as a UUID", ErrInvalid, key[i:i+1], i)
	}
	return nil
}
