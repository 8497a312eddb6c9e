package anthropic

import "errors"

// Sentinel errors. Stream wraps the stream ones in a *providers.Error.
var (
	// ErrConfig: the Config cannot work.
	ErrConfig = errors.New("invalid config")
	// ErrStreamCut: the stream ended before message_stop (a dropped
	// connection or a proxy timeout); the request may be tried again.
	ErrStreamCut = errors.New("stream ended before message_stop")
	// ErrBadStream: the server sent something that is not the Messages
	// event protocol.
	ErrBadStream = errors.New("malformed event stream")
	// ErrNoModel: the request names no model.
	ErrNoModel = errors.New("no model named")
)
