package tools

import (
	"errors"
	"fmt"
)

// RegisterBuiltins adds the built-in tools with their defaults:
// current_time, calculate and fetch_url (public addresses only).
func RegisterBuiltins(r *Registry) error {
	steps := []struct {
		name string
		add  func() error
	}{
		{"current_time", func() error { return RegisterCurrentTime(r, nil) }},
		{"calculate", func() error { return RegisterCalculate(r) }},
		{"fetch_url", func() error { return RegisterFetchURL(r, FetchOptions{}) }},
	}
	var errs []error
	for _, s := range steps {
		if err := s.add(); err != nil {
			errs = append(errs, fmt.Errorf("built-in %s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}
