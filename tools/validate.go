package tools

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// schemaNode is the subset of JSON Schema that invopop/jsonschema emits for
// Go structs: enough to tell a model exactly which field is wrong and how.
// A full validator would be a new dependency for keywords Go types never
// produce ($ref, oneOf, patternProperties…); MCP tools are validated by
// their own servers.
type schemaNode struct {
	Type                 json.RawMessage        `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	Required             []string               `json:"required"`
	AdditionalProperties json.RawMessage        `json:"additionalProperties"`
	Items                *schemaNode            `json:"items"`
	Enum                 []any                  `json:"enum"`
	Minimum              *float64               `json:"minimum"`
	Maximum              *float64               `json:"maximum"`
	ExclusiveMinimum     *float64               `json:"exclusiveMinimum"`
	ExclusiveMaximum     *float64               `json:"exclusiveMaximum"`
	MinLength            *int                   `json:"minLength"`
	MaxLength            *int                   `json:"maxLength"`
	MinItems             *int                   `json:"minItems"`
	MaxItems             *int                   `json:"maxItems"`
}

// types returns the allowed JSON types; empty means any.
func (s *schemaNode) types() []string {
	if len(s.Type) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(s.Type, &many)
	return many
}

// check returns "" when v (decoded with UseNumber) satisfies s, or a
// sentence naming the field at path and what it should be.
func (s *schemaNode) check(v any, path string) string {
	if s == nil {
		return ""
	}
	where := "the arguments object"
	if path != "" {
		where = fmt.Sprintf("%q", path)
	}
	if ts := s.types(); len(ts) > 0 && !typeMatches(v, ts) {
		named := make([]string, len(ts))
		for i, t := range ts {
			named[i] = withArticle(t)
		}
		return fmt.Sprintf("%s must be %s, not %s", where, strings.Join(named, " or "), kindOf(v))
	}
	if len(s.Enum) > 0 && !inEnum(v, s.Enum) {
		return fmt.Sprintf("%s must be one of %s", where, enumList(s.Enum))
	}
	switch x := v.(type) {
	case map[string]any:
		return s.checkObject(x, path, where)
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			return fmt.Sprintf("%s needs at least %d items", where, *s.MinItems)
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			return fmt.Sprintf("%s allows at most %d items", where, *s.MaxItems)
		}
		for i, e := range x {
			if p := s.Items.check(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case string:
		n := utf8.RuneCountInString(x)
		if s.MinLength != nil && n < *s.MinLength {
			return fmt.Sprintf("%s must be at least %d characters", where, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Sprintf("%s must be at most %d characters", where, *s.MaxLength)
		}
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return fmt.Sprintf("%s is not a usable number", where)
		}
		if s.Minimum != nil && f < *s.Minimum {
			return fmt.Sprintf("%s must be at least %v", where, *s.Minimum)
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fmt.Sprintf("%s must be at most %v", where, *s.Maximum)
		}
		if s.ExclusiveMinimum != nil && f <= *s.ExclusiveMinimum {
			return fmt.Sprintf("%s must be more than %v", where, *s.ExclusiveMinimum)
		}
		if s.ExclusiveMaximum != nil && f >= *s.ExclusiveMaximum {
			return fmt.Sprintf("%s must be less than %v", where, *s.ExclusiveMaximum)
		}
	}
	return ""
}

func (s *schemaNode) checkObject(x map[string]any, path, where string) string {
	for _, req := range s.Required {
		if _, ok := x[req]; !ok {
			return fmt.Sprintf("%s is required", quoteJoin(path, req))
		}
	}
	var extra *schemaNode
	closed := false
	if len(s.AdditionalProperties) > 0 {
		var b bool
		if json.Unmarshal(s.AdditionalProperties, &b) == nil {
			closed = !b
		} else {
			extra = new(schemaNode)
			if json.Unmarshal(s.AdditionalProperties, extra) != nil {
				extra = nil
			}
		}
	}
	// Sorted so the model always hears about the same field first.
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub, known := s.Properties[k]
		switch {
		case known:
		case closed:
			return fmt.Sprintf("%s has no field %q (known fields: %s)", where, k, knownFields(s.Properties))
		default:
			sub = extra
		}
		if p := sub.check(x[k], joinPath(path, k)); p != "" {
			return p
		}
	}
	return ""
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func quoteJoin(path, key string) string { return fmt.Sprintf("%q", joinPath(path, key)) }

func knownFields(props map[string]*schemaNode) string {
	if len(props) == 0 {
		return "none"
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func typeMatches(v any, ts []string) bool {
	for _, t := range ts {
		switch t {
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		case "number":
			if _, ok := v.(json.Number); ok {
				return true
			}
		case "integer":
			if n, ok := v.(json.Number); ok {
				if _, err := n.Int64(); err == nil {
					return true
				}
			}
		}
	}
	return false
}

func withArticle(jsonType string) string {
	switch jsonType {
	case "object", "array", "integer":
		return "an " + jsonType
	case "null":
		return "null"
	}
	return "a " + jsonType
}

func kindOf(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "an integer"
		}
		return "a number with a fraction"
	}
	return fmt.Sprintf("%T", v)
}

func inEnum(v any, enum []any) bool {
	for _, e := range enum {
		if equalJSON(v, e) {
			return true
		}
	}
	return false
}

// equalJSON compares a value decoded with UseNumber to an enum value
// decoded without it.
func equalJSON(v, e any) bool {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		ef, isNum := e.(float64)
		return err == nil && isNum && f == ef
	}
	switch x := v.(type) {
	case string, bool, nil:
		return v == e
	default:
		a, _ := json.Marshal(x)
		b, _ := json.Marshal(e)
		return string(a) == string(b)
	}
}

func enumList(enum []any) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		b, _ := json.Marshal(e)
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}
