package openai

import (
	"context"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
)

// A model list that goes on past providers.MaxListBytes is refused with an
// error naming the bound and read no further, not cut short: a list cut
// at the bound read as no list at all.
func TestAModelListPastTheBoundIsRefused(t *testing.T) {
	testkit.CheckBoundedRead(t, `{"data":[`, providers.MaxListBytes, providers.ErrBodyTooLarge, func(url string) error {
		_, err := newClient(t, "openai", url+"/v1").Models(context.Background())
		return err
	})
}
