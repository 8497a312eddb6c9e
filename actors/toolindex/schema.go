package toolindex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/agentd/agentd/toolsearch"
)

// schemaNode is the part of a JSON Schema the index reads.
type schemaNode struct {
	Description string                `json:"description"`
	Properties  map[string]*subschema `json:"properties"`
	Items       items                 `json:"items"`
}

// subschema is a schema where JSON Schema also takes true or false (any
// value, or none), which name nothing.
type subschema schemaNode

func (s *subschema) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if k := dec.PeekKind(); k == 't' || k == 'f' {
		_, err := dec.ReadToken()
		return err
	}
	return jsonv2.UnmarshalDecode(dec, (*schemaNode)(s))
}

// UnmarshalJSON is the same rule for encoding/json, which the index's
// decoding is tested against.
func (s *subschema) UnmarshalJSON(b []byte) error {
	if t := string(bytes.TrimSpace(b)); t == "true" || t == "false" {
		return nil
	}
	return json.Unmarshal(b, (*schemaNode)(s))
}

// items is an array's item schema: one, or a list of them (draft 7's
// tuples).
type items []*subschema

func (it *items) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == '[' {
		return jsonv2.UnmarshalDecode(dec, (*[]*subschema)(it))
	}
	one := new(subschema)
	if err := jsonv2.UnmarshalDecode(dec, one); err != nil {
		return err
	}
	*it = items{one}
	return nil
}

func (it *items) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		return json.Unmarshal(b, (*[]*subschema)(it))
	}
	one := new(subschema)
	if err := json.Unmarshal(b, one); err != nil {
		return err
	}
	*it = items{one}
	return nil
}

// params flattens a tool's parameter schema into names and descriptions,
// nested objects and array items included, in a stable order. An empty
// schema has no parameters.
func params(raw json.RawMessage) ([]toolsearch.Param, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	testHookParsing(raw)
	var root schemaNode
	// encoding/json's own rules, decoded by its successor's engine (the
	// same code encoding/json runs on under GOEXPERIMENT=jsonv2): half the
	// time, and parsing the schemas was a third of building a large index.
	if err := jsonv2.Unmarshal(raw, &root, jsonv1.DefaultOptionsV1()); err != nil {
		return nil, fmt.Errorf("parse parameter schema: %w", err)
	}
	var out []toolsearch.Param
	walk(&root, &out, 0)
	return out, nil
}

// parsedParams is one tool's params, or why its schema did not parse.
type parsedParams struct {
	params []toolsearch.Param
	err    error
}

// parallelFrom is how many tools a Register must hold before paramsOf
// spreads them over the processors: a daemon's or a large MCP server's
// registry, whose schemas took a third of building its index.
const parallelFrom = 1024

// paramsOf parses the parameter schemas of tools, by index. A large batch is
// cut into one contiguous part per processor, each parsed by a goroutine that
// paramsOf waits for: the result is the same as parsing them in order. A
// panic in one of them panics paramsOf's caller, with the goroutine's stack,
// as parsing there would have: a panic on a goroutine of its own would end
// the process, where ReplaceScope and the actor turn the caller's into an
// error.
func paramsOf(tools []Tool) []parsedParams {
	out := make([]parsedParams, len(tools))
	parse := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i].params, out[i].err = params(tools[i].Parameters)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(tools)/parallelFrom+1)
	if workers <= 1 {
		parse(0, len(tools))
		return out
	}
	var wg sync.WaitGroup
	panics := make([]string, workers)
	for w := range workers {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					panics[w] = fmt.Sprintf("%v\n%s", r, debug.Stack())
				}
			}()
			parse(w*len(tools)/workers, (w+1)*len(tools)/workers)
		})
	}
	wg.Wait()
	for _, p := range panics {
		if p != "" {
			panic("parsing parameter schemas: " + p)
		}
	}
	return out
}

// testHookParsing runs as a parameter schema starts being parsed; tests
// panic there, as no schema makes the parser panic.
var testHookParsing = func(json.RawMessage) {}

// maxDepth bounds recursion into nested schemas; deeper levels rarely name
// anything a person would ask for.
const maxDepth = 8

func walk(n *schemaNode, out *[]toolsearch.Param, depth int) {
	if n == nil || depth > maxDepth {
		return
	}
	names := make([]string, 0, len(n.Properties))
	for name := range n.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := (*schemaNode)(n.Properties[name])
		d := ""
		if p != nil {
			d = p.Description
		}
		*out = append(*out, toolsearch.Param{Name: name, Description: d})
		walk(p, out, depth+1)
	}
	for _, it := range n.Items {
		if it == nil {
			continue
		}
		if it.Description != "" {
			*out = append(*out, toolsearch.Param{Description: it.Description})
		}
		walk((*schemaNode)(it), out, depth+1)
	}
}
