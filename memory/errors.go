package memory

import "errors"

// ErrNotFound: no such memory or run for this tenant.
var ErrNotFound = errors.New("memory: not found")

// ErrState: the memory is not in a state the operation accepts (approving
// an undone memory).
var ErrState = errors.New("memory: wrong state")

// ErrFull: the tenant keeps as many memories as it may
// (Options.MaxPerTenant); nothing was stored.
var ErrFull = errors.New("memory: full")
