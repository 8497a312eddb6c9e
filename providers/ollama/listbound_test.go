package ollama

import (
	"context"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
)

// A server whose model list, or a model's /api/show, goes on past
// providers.MaxListBytes is refused with an error naming the bound, and
// read no further: the SDK would take the whole answer into memory.
func TestAModelListPastTheBoundIsRefused(t *testing.T) {
	reads := map[string]func(*Client) error{
		"/api/tags": func(c *Client) error { _, err := c.Models(context.Background()); return err },
		"/api/show": func(c *Client) error { _, err := c.factsFor(context.Background(), "m", 0); return err },
	}
	for path, read := range reads {
		t.Run(path, func(t *testing.T) {
			testkit.CheckBoundedRead(t, `{"models":[`, providers.MaxListBytes, providers.ErrBodyTooLarge, func(url string) error {
				c, err := New(Config{BaseURL: url, MemoryBytes: 32 * gib})
				if err != nil {
					return err
				}
				return read(c)
			})
		})
	}
}
