package toolindex

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentd/agentd/toolsearch"
)

// schemaNode is the part of a JSON Schema the index reads.
type schemaNode struct {
	Description string                 `json:"description"`
	Properties  map[string]*schemaNode `json:"properties"`
	Items       *schemaNode            `json:"items"`
}

// params flattens a tool's parameter schema into names and descriptions,
// nested objects and array items included, in a stable order. An empty
// schema has no parameters.
func params(raw json.RawMessage) ([]toolsearch.Param, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var root schemaNode
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("parse parameter schema: %w", err)
	}
	var out []toolsearch.Param
	walk(&root, &out, 0)
	return out, nil
}

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
		p := n.Properties[name]
		d := ""
		if p != nil {
			d = p.Description
		}
		*out = append(*out, toolsearch.Param{Name: name, Description: d})
		walk(p, out, depth+1)
	}
	if n.Items != nil {
		if n.Items.Description != "" {
			*out = append(*out, toolsearch.Param{Description: n.Items.Description})
		}
		walk(n.Items, out, depth+1)
	}
}
