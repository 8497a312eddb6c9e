package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/agentd/agentd/providers"
)

// Models lists the provider's models with their windows: the provider's own
// list first, then the config, then agentd's default (128K remote, 8K on this
// computer). When the list cannot be read it still returns what the config
// knows, together with the error, so GET /v1/models can show both.
func (c *Client) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	listed, loaded, listErr := c.list(ctx)
	ids := c.cfg.Models
	if len(ids) == 0 {
		for id := range listed {
			ids = append(ids, id)
		}
		sort.Strings(ids)
	}
	out := make([]providers.ModelInfo, 0, len(ids))
	for _, id := range ids {
		mi := providers.ModelInfo{Provider: c.provider(), ID: id, Local: c.local, Loaded: !c.local}
		switch w := listed[id]; {
		case w > 0:
			mi.Window, mi.WindowSource = w, providers.SourceList
		case c.cfg.Windows[id] > 0:
			mi.Window, mi.WindowSource = c.cfg.Windows[id], providers.SourceConfig
		case c.local:
			mi.Window, mi.WindowSource = providers.DefaultLocalWindow, providers.SourceDefault
		default:
			mi.Window, mi.WindowSource = providers.DefaultRemoteWindow, providers.SourceDefault
		}
		if c.local {
			// Only LM Studio says which models are in memory; elsewhere a
			// listed local model is served.
			if loaded != nil {
				mi.Loaded = loaded[id]
			} else {
				_, mi.Loaded = listed[id]
			}
		}
		out = append(out, mi)
	}
	if listErr != nil {
		return out, fmt.Errorf("%s: list models: %w", c.provider(), listErr)
	}
	return out, nil
}

// list reads the model list. It returns every listed id (window 0 when the
// list names none) and, for LM Studio, which models are loaded.
func (c *Client) list(ctx context.Context) (map[string]int, map[string]bool, error) {
	if c.co.azure {
		// Azure lists base models, not the deployments requests name.
		return nil, nil, nil
	}
	var body []byte
	for _, path := range c.co.listPaths {
		// A server without this list says so with an error status, or, as
		// LM Studio does for a path it does not serve, with 200 and
		// {"error":"Unexpected endpoint or method. (GET …)"}
		// (lmstudio-ai/lmstudio-bug-tracker#618): either way the next
		// list is asked.
		if b, err := c.get(ctx, path); err == nil && isModelList(b) {
			body = b
			break
		}
	}
	if body == nil {
		var err error
		if body, err = c.get(ctx, "models"); err != nil {
			return nil, nil, err
		}
	}
	listed := map[string]int{}
	var loaded map[string]bool
	ids, notChat := listedIDs(body)
	for _, id := range ids {
		listed[id] = 0
	}
	if c.co.name == "lmstudio" {
		loaded = lmStudioLoaded(body)
	}
	windows, err := providers.WindowsFromModelList(c.co.name, body)
	if err != nil {
		return listed, loaded, fmt.Errorf("read windows: %w", err)
	}
	for id, w := range windows {
		if notChat[id] {
			continue
		}
		if loaded != nil && !loaded[id] {
			// An LM Studio model not in memory will be loaded with a window
			// we cannot know: it counts as small (issue 3, point 2).
			continue
		}
		listed[id] = w
	}
	if c.co.propsPath != "" {
		// llama.cpp serves one model; its window is the n_ctx it runs with.
		if props, err := c.get(ctx, c.co.propsPath); err == nil {
			c.readSlots(props)
			if pw, err := providers.WindowsFromModelList(c.co.name, props); err == nil {
				for _, w := range pw {
					if w > 0 {
						for id := range listed {
							listed[id] = w
						}
						break
					}
				}
			}
		}
	}
	return listed, loaded, nil
}

func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	u, err := c.base.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("model list url: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if c.cfg.APIKey != "" {
		if c.co.azure {
			req.Header.Set("api-key", c.cfg.APIKey)
		} else {
			req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
		}
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(providers.LimitBody(res.Body, providers.MaxListBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", u.Path, err)
	}
	if res.StatusCode >= 300 {
		return nil, c.classify(res.StatusCode, string(body), res.Header)
	}
	return body, nil
}

// listedIDs reads the chat models' ids of an OpenAI-style list
// ({"data":[{"id":…}]}) or LM Studio's native one ({"models":[{"key":…}]}),
// and the ids of the models it lists that are no chat models.
func listedIDs(body []byte) (ids []string, notChat map[string]bool) {
	var l struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
		Models []struct {
			Key  string `json:"key"`
			Type string `json:"type"`
		} `json:"models"`
	}
	if json.Unmarshal(body, &l) != nil {
		return nil, nil
	}
	notChat = map[string]bool{}
	for _, m := range l.Data {
		// A list that types its entries names embedding models too (LM
		// Studio's /api/v0 "embeddings", Together's "embedding").
		if m.Type == "embeddings" || m.Type == "embedding" {
			notChat[m.ID] = true
		} else if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	for _, m := range l.Models {
		if m.Type == "" || m.Type == "llm" || m.Type == "vlm" {
			if m.Key != "" {
				ids = append(ids, m.Key)
			}
		} else {
			notChat[m.Key] = true
		}
	}
	return ids, notChat
}

// isModelList reports a body that holds a list of models, as data[] or
// models[], and not an error object.
func isModelList(body []byte) bool {
	var l struct {
		Data   []json.RawMessage `json:"data"`
		Models []json.RawMessage `json:"models"`
	}
	return json.Unmarshal(body, &l) == nil && (l.Data != nil || l.Models != nil)
}

// lmStudioLoaded reads which models LM Studio has in memory: its native list
// gives each model's loaded_instances (https://lmstudio.ai/docs/developer/rest/list),
// the older /api/v0 list each model's state, "loaded" or "not-loaded"
// (https://lmstudio.ai/docs/developer/rest/endpoints). nil: the body says
// neither (the OpenAI-compatible list).
func lmStudioLoaded(body []byte) map[string]bool {
	var l struct {
		Models []struct {
			Key             string            `json:"key"`
			LoadedInstances []json.RawMessage `json:"loaded_instances"`
		} `json:"models"`
		Data []struct {
			ID    string  `json:"id"`
			State *string `json:"state"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &l) != nil {
		return nil
	}
	var out map[string]bool
	for _, m := range l.Models {
		if out == nil {
			out = map[string]bool{}
		}
		out[m.Key] = len(m.LoadedInstances) > 0
	}
	for _, m := range l.Data {
		if m.State == nil {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[m.ID] = *m.State == "loaded"
	}
	return out
}

// readSlots keeps llama.cpp's total_slots from its /props.
func (c *Client) readSlots(props []byte) {
	var p struct {
		TotalSlots int64 `json:"total_slots"`
	}
	if json.Unmarshal(props, &p) == nil && p.TotalSlots > 0 {
		c.slots.Store(p.TotalSlots)
	}
}
