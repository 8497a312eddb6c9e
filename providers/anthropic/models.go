package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentd/agentd/providers"
)

// maxPages bounds the walk through the model list, in case a server keeps
// saying has_more.
const maxPages = 50

// listed is what the provider's list says of one model.
type listed struct {
	window, maxOutput int
	vision            bool
}

// page is the part of a GET /v1/models page read here; the windows are
// read by the shared providers.WindowsFromModelList
// (https://docs.anthropic.com/en/api/models-list).
type page struct {
	Data    []entry `json:"data"`
	HasMore bool    `json:"has_more"`
	LastID  string  `json:"last_id"`
}

// entry is one model as the list and GET /v1/models/{model_id} show it.
type entry struct {
	ID           string `json:"id"`
	MaxTokens    int    `json:"max_tokens"`
	Capabilities struct {
		ImageInput struct {
			Supported bool `json:"supported"`
		} `json:"image_input"`
	} `json:"capabilities"`
}

// listed is what the provider says of the entry; window is read apart, by
// the shared reader.
func (e entry) listed(window int) listed {
	return listed{window: window, maxOutput: e.MaxTokens, vision: e.Capabilities.ImageInput.Supported}
}

// Models lists the models with their input windows: from the provider's
// list (max_input_tokens) or, for a configured name the list does not show
// (an alias), from the model it resolves to; else Config.Windows, else
// providers.DefaultRemoteWindow. When the endpoint has no model list (404
// or 405, as some proxies answer) and Config.Models is set, those models
// are returned from configuration alone.
func (c *Client) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	found, order, err := c.list(ctx)
	if err != nil {
		var pe *providers.Error
		absent := errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusMethodNotAllowed)
		if !absent || len(c.cfg.Models) == 0 {
			return nil, err
		}
		found, order = nil, nil
	}
	if len(c.cfg.Models) > 0 {
		order = c.cfg.Models
		if found != nil {
			for _, id := range order {
				if _, ok := found[id]; ok {
					continue
				}
				// Not listed under this name: an alias ("claude-haiku-4-5"),
				// which only the model's own endpoint resolves.
				l, ok, err := c.model(ctx, id)
				if err != nil {
					return nil, err
				}
				if ok {
					found[id] = l
				}
			}
		}
	}
	out := make([]providers.ModelInfo, 0, len(order))
	for _, id := range order {
		mi := providers.ModelInfo{Provider: c.cfg.Name, ID: id, Loaded: true}
		l, ok := found[id]
		switch {
		case ok && l.window > 0:
			mi.Window, mi.WindowSource = l.window, providers.SourceList
		case c.cfg.Windows[id] > 0:
			mi.Window, mi.WindowSource = c.cfg.Windows[id], providers.SourceConfig
		default:
			mi.Window, mi.WindowSource = providers.DefaultRemoteWindow, providers.SourceDefault
		}
		mi.MaxOutput, mi.Vision = l.maxOutput, l.vision
		out = append(out, mi)
	}
	return out, nil
}

// limitList bounds a page of the list, which the SDK reads whole, to
// providers.MaxListBytes.
func limitList(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil {
		return res, err
	}
	res.Body = providers.LimitBody(res.Body, providers.MaxListBytes)
	return res, nil
}

// model asks GET /v1/models/{model_id} for one model, which resolves an
// alias to the model it names
// (https://docs.anthropic.com/en/api/models). ok is false when the
// provider does not know the name (or has no such endpoint); err is set
// only when ctx ended.
func (c *Client) model(ctx context.Context, id string) (listed, bool, error) {
	var raw []byte
	if err := c.sdk.Get(ctx, "v1/models/"+url.PathEscape(id), nil, &raw, option.WithMiddleware(limitList)); err != nil {
		if ctx.Err() != nil {
			return listed{}, false, c.wrap(ctx, "models", err)
		}
		return listed{}, false, nil
	}
	var m entry
	if json.Unmarshal(raw, &m) != nil || m.ID == "" {
		return listed{}, false, nil
	}
	windows, _ := providers.WindowsFromModelList(detector, raw)
	return m.listed(windows[m.ID]), true, nil
}

// list walks GET /v1/models page by page.
func (c *Client) list(ctx context.Context) (map[string]listed, []string, error) {
	found := map[string]listed{}
	var order []string
	after := ""
	for range maxPages {
		q := url.Values{"limit": {"1000"}}
		if after != "" {
			q.Set("after_id", after)
		}
		var raw []byte
		if err := c.sdk.Get(ctx, "v1/models?"+q.Encode(), nil, &raw, option.WithMiddleware(limitList)); err != nil {
			return nil, nil, c.wrap(ctx, "models", err)
		}
		var pg page
		if err := json.Unmarshal(raw, &pg); err != nil {
			return nil, nil, fmt.Errorf("anthropic %s: models: decode: %w", c.cfg.Name, err)
		}
		windows, err := providers.WindowsFromModelList(detector, raw)
		if err != nil {
			// No window in the list is not fatal: config or the default
			// fills in.
			windows = nil
		}
		for _, m := range pg.Data {
			if _, dup := found[m.ID]; !dup {
				order = append(order, m.ID)
			}
			found[m.ID] = m.listed(windows[m.ID])
		}
		if !pg.HasMore || pg.LastID == "" || pg.LastID == after {
			return found, order, nil
		}
		after = pg.LastID
	}
	return found, order, nil
}
