// Package slicepool pools arrays that a caller fills on every call and
// keeps no longer than the call: a model request's message lists, whose
// length follows the chat's window (a 32K chat's are tens of KB each, built
// on every model call). Pooled, they are not allocated, zeroed and
// collected each time; held by no chat between calls, they cost an idle
// chat nothing.
package slicepool

import (
	"slices"
	"sync"
)

// Pool is a pool of arrays of T; its zero value is ready and it is safe
// for concurrent use.
type Pool[T any] struct{ pool sync.Pool }

// Get returns an empty slice with room for at least n. A pooled array too
// small is replaced by one grown as append grows (a quarter more for large
// ones), so a chat whose request gains two messages a turn finds room
// again for a while, not a new array every call.
func (p *Pool[T]) Get(n int) []T {
	if a, ok := p.pool.Get().(*[]T); ok {
		return slices.Grow((*a)[:0], n)
	}
	return make([]T, 0, n)
}

// Put gives a back once nothing reads it. It is cleared first, so the pool
// keeps nothing a caller's elements point to alive.
func (p *Pool[T]) Put(a []T) {
	if cap(a) == 0 {
		return
	}
	a = a[:cap(a)]
	clear(a)
	p.pool.Put(&a)
}
