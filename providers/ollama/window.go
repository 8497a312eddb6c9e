package ollama

import (
	"context"

	"github.com/ollama/ollama/api"

	"github.com/agentd/agentd/providers"
)

// Models lists the server's models (or Config.Models) with the window agentd
// asks each to load: Config.Windows when set, else sized from /api/show and
// the machine's memory, else providers.DefaultLocalWindow. Loaded says
// whether /api/ps shows the model in memory now.
func (c *Client) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	list, err := c.lists.List(ctx)
	if err != nil {
		return nil, c.wrap(ctx, "list models", err)
	}
	running, err := c.lists.ListRunning(ctx)
	if err != nil {
		return nil, c.wrap(ctx, "list running models", err)
	}
	loaded := make(map[string]bool, len(running.Models))
	for _, m := range running.Models {
		loaded[canonical(m.Name)], loaded[canonical(m.Model)] = true, true
	}
	weights := make(map[string]int64, len(list.Models))
	names := c.models
	for _, m := range list.Models {
		weights[canonical(m.Name)] = m.Size
		if len(c.models) == 0 {
			names = append(names, m.Name)
		}
	}
	infos := make([]providers.ModelInfo, 0, len(names))
	for _, name := range names {
		key := canonical(name)
		f, err := c.factsFor(ctx, name, weights[key])
		if err != nil && ctx.Err() != nil {
			return nil, c.wrap(ctx, "show "+name, ctx.Err())
		}
		infos = append(infos, providers.ModelInfo{
			Provider:     c.name,
			ID:           name,
			Window:       f.window,
			WindowSource: f.source,
			Vision:       f.vision,
			Local:        true,
			Loaded:       loaded[key],
		})
	}
	return infos, nil
}

// windowFor is the num_ctx for a model and where it came from. weights is
// the model's size from /api/tags, or -1 when the caller has not listed it.
func (c *Client) windowFor(ctx context.Context, model string, weights int64) (int, string) {
	f, _ := c.factsFor(ctx, model, weights)
	return f.window, f.source
}

// runningWindow is the context_length /api/ps reports for model, 0 when it
// is not loaded or the server does not say.
func (c *Client) runningWindow(ctx context.Context, model string) int {
	running, err := c.lists.ListRunning(ctx)
	if err != nil {
		return 0
	}
	key := canonical(model)
	for _, m := range running.Models {
		if (canonical(m.Name) == key || canonical(m.Model) == key) && m.ContextLength > 0 {
			return m.ContextLength
		}
	}
	return 0
}

// factsFor learns a model's window once and then answers from memory, so a
// model gets the same num_ctx on every request. A failed /api/show is not
// remembered: the next call tries again.
func (c *Client) factsFor(ctx context.Context, model string, weights int64) (modelFacts, error) {
	key := canonical(model)
	fixed := c.fixed[key]
	c.mu.Lock()
	f, ok := c.known[key]
	c.mu.Unlock()
	if ok {
		return f, nil
	}
	show, err := c.lists.Show(ctx, &api.ShowRequest{Model: model})
	if err != nil {
		if fixed > 0 {
			return modelFacts{window: fixed, source: providers.SourceConfig}, nil
		}
		return modelFacts{window: providers.DefaultLocalWindow, source: providers.SourceDefault},
			c.wrap(ctx, "show "+model, err)
	}
	facts := ParseShowFacts(show)
	if weights < 0 {
		weights = c.weightsOf(ctx, key)
	}
	if weights > 0 {
		facts.WeightsBytes = uint64(weights)
	}
	f = modelFacts{window: SizeWindow(facts, c.mem), source: providers.SourceList}
	if fixed > 0 {
		f.window, f.source = fixed, providers.SourceConfig
		if facts.ContextLength > 0 && fixed > facts.ContextLength {
			// Ollama never runs a model past its trained length: it lowers
			// num_ctx without a word, and a longer prompt is then cut (and on
			// 0.17.4 can hang and fail with 500). The server's figure wins.
			f.window, f.source = facts.ContextLength, providers.SourceList
		}
	}
	for _, capability := range show.Capabilities {
		if string(capability) == "vision" {
			f.vision = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first, ok := c.known[key]; ok {
		return first, nil // a concurrent caller won; keep one number per model
	}
	c.known[key] = f
	return f, nil
}

// weightsOf is a model's size on disk from /api/tags, 0 when unknown; the
// loaded weights are about that size.
func (c *Client) weightsOf(ctx context.Context, key string) int64 {
	list, err := c.lists.List(ctx)
	if err != nil {
		return 0
	}
	for _, m := range list.Models {
		if canonical(m.Name) == key || canonical(m.Model) == key {
			return m.Size
		}
	}
	return 0
}
