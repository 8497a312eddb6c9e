package toolindex

import "errors"

// The errors a Failed wraps.
var (
	// ErrReadFailed: answering a Search, NamedIn or Get panicked (a bug,
	// logged with its stack).
	ErrReadFailed = errors.New("the tool index failed while answering")
	// ErrChangeFailed: handling a Register or Unregister panicked (a bug,
	// logged with its stack); it was not applied.
	ErrChangeFailed = errors.New("the tool index failed while changing its tools")
	// ErrStopping: the actor stopped while the request waited for a scope
	// being built.
	ErrStopping = errors.New("the tool index is stopping")
	// ErrOverloaded: the request was the oldest read parked for a scope
	// being built when another came past the most that wait (maxParked).
	ErrOverloaded = errors.New("the tool index has too many requests waiting")
)
