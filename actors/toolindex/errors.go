package toolindex

import "errors"

// ErrReadFailed is what a Search, NamedIn or Get is answered with, inside a
// ReadFailed, when answering it panicked (a bug, logged with its stack).
var ErrReadFailed = errors.New("the tool index failed while answering")
