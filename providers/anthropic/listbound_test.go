package anthropic

import (
	"context"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
)

// A page of the model list that goes on past providers.MaxListBytes is
// refused with an error naming the bound, and read no further: the SDK
// would take the whole page into memory.
func TestAModelListPastTheBoundIsRefused(t *testing.T) {
	testkit.CheckBoundedRead(t, `{"data":[`, providers.MaxListBytes, providers.ErrBodyTooLarge, func(url string) error {
		_, err := newClient(t, url, nil).Models(context.Background())
		return err
	})
}
