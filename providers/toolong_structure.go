package providers

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// structure is what the JSON of a body says, read as JSON rather than as
// words: an SSE stream's error event, an error object inside a 200 stream,
// a gateway's JSON whose message is another provider's JSON as a string.
type structure struct {
	hit           bool
	window, input int
	// veto names a relayed status or error code that is never about the
	// window (a gateway answering 400 or 502 around an inner 429).
	veto  string
	rules []string
}

// maxDepth bounds the walk: gateways nest two or three layers at most.
const maxDepth = 8

// Inner codes and types that settle a body whatever its words.
var (
	windowCodes = map[string]bool{
		"context_length_exceeded": true, "context_window_exceeded": true,
		"exceed_context_size_error": true, "contextwindowexceedederror": true,
	}
	otherCodes = map[string]bool{
		"rate_limit_error": true, "rate_limit_exceeded": true, "insufficient_quota": true,
		"authentication_error": true, "permission_error": true, "invalid_api_key": true,
		"overloaded_error": true, "content_filter": true, "billing_error": true,
	}
	// statusKeys hold an HTTP status a gateway relays inside the body.
	statusKeys = map[string]bool{"code": true, "status": true, "status_code": true, "statuscode": true, "httpstatuscode": true}
)

// readStructure reads every JSON value in body: the body itself, each SSE
// "data:" payload, and JSON that a string value holds (double encoding).
// A body that is no JSON gives the zero structure.
func readStructure(body string) structure {
	var st structure
	for _, part := range jsonParts(body) {
		var v any
		if json.Unmarshal([]byte(part), &v) == nil {
			st.walk(v, "", 0)
		}
	}
	return st
}

// jsonParts returns the body's JSON candidates: the SSE data payloads when
// it is a stream, else the body from its first brace or bracket on (an SDK's
// "Error code: 400 - {...}" prefix is skipped).
func jsonParts(body string) []string {
	var parts []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
			parts = append(parts, strings.TrimSpace(d))
		}
	}
	if len(parts) > 0 {
		return parts
	}
	if i := strings.IndexAny(body, "{["); i >= 0 {
		return []string{strings.TrimSpace(body[i:])}
	}
	return nil
}

func (st *structure) walk(v any, key string, depth int) {
	if depth > maxDepth {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		// In key order: the explanation must read the same every time.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			st.walk(v[k], strings.ToLower(k), depth+1)
		}
	case []any:
		for _, x := range v {
			st.walk(x, key, depth+1)
		}
	case float64:
		st.number(key, v)
	case string:
		st.text(key, v, depth)
	}
}

func (st *structure) number(key string, n float64) {
	switch {
	case key == "n_ctx" && n > 0:
		setOnce(&st.window, int(n))
		st.rules = append(st.rules, "field n_ctx")
	case key == "n_prompt_tokens" && n > 0:
		setOnce(&st.input, int(n))
		st.rules = append(st.rules, "field n_prompt_tokens")
	case statusKeys[key]:
		st.status(key, int(n))
	}
}

func (st *structure) text(key, s string, depth int) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		// JSON inside a string: another layer of a gateway's wrapping.
		var inner any
		if json.Unmarshal([]byte(t), &inner) == nil {
			st.walk(inner, key, depth+1)
			return
		}
	}
	if key != "code" && key != "type" && key != "status" {
		return
	}
	low := strings.ToLower(t)
	switch {
	case windowCodes[low]:
		st.hit = true
		st.rules = append(st.rules, "field "+key+"="+low)
	case otherCodes[low] && st.veto == "":
		st.veto = key + "=" + low
	default:
		if n, err := strconv.Atoi(t); err == nil && statusKeys[key] {
			st.status(key, n)
		}
	}
}

// status vetoes a relayed status that is never about the window.
func (st *structure) status(key string, n int) {
	switch n {
	case 401, 402, 403, 429:
		if st.veto == "" {
			st.veto = key + "=" + strconv.Itoa(n) + " relayed inside the body"
		}
	}
}
