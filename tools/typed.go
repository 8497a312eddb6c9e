package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// Register adds a typed Go tool. Its JSON schema comes from T (a struct) via
// invopop/jsonschema, inlined with no $defs, "required" listing the fields
// without omitempty, descriptions from `jsonschema:"description=…"` tags.
// Before fn runs, the arguments are checked against that schema and decoded
// into T strictly (an unknown field is an error), so fn sees only well-formed
// input and a model gets a precise message to fix its call.
func Register[T any](r *Registry, name, description string, fn func(ctx context.Context, args T) (Result, error)) error {
	if fn == nil {
		return fmt.Errorf("tools: register %q: nil function", name)
	}
	params, err := SchemaFor[T]()
	if err != nil {
		return fmt.Errorf("tools: register %q: %w", name, err)
	}
	var root schemaNode
	if err := json.Unmarshal(params, &root); err != nil {
		return fmt.Errorf("tools: register %q: reading generated schema: %w", name, err)
	}
	run := func(ctx context.Context, raw json.RawMessage) (Result, error) {
		args, problem := decodeStrict[T](raw, &root)
		if problem != "" {
			return invalidArgs(name, problem), nil
		}
		return fn(ctx, args)
	}
	return r.Add(Tool{Name: name, Description: description, Parameters: params, Source: SourceGo, Run: run})
}

// SchemaFor returns the JSON schema Register generates for T. T must be a
// struct, because every provider wants tool parameters to be an object.
func SchemaFor[T any]() (json.RawMessage, error) {
	typ := reflect.TypeFor[T]()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("argument type %s is not a struct", typ)
	}
	ref := jsonschema.Reflector{Anonymous: true, DoNotReference: true}
	s := ref.ReflectFromType(typ)
	// No "$schema": some providers reject unknown top-level keywords, and
	// the draft is implied.
	s.Version = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding schema of %s: %w", typ, err)
	}
	return b, nil
}

// decodeStrict checks raw against the schema, then decodes it into T with
// unknown fields refused. It returns a sentence for the model on failure.
func decodeStrict[T any](raw json.RawMessage, root *schemaNode) (T, string) {
	var zero T
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return zero, "not valid JSON"
	}
	if problem := root.check(generic, ""); problem != "" {
		return zero, problem
	}
	var out T
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		// The schema check catches nearly everything; this is the net for
		// what it does not model (for example an integer that overflows).
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return zero, fmt.Sprintf("%s: expected %s, got JSON %s", fieldName(te.Field), te.Type, te.Value)
		}
		return zero, err.Error()
	}
	return out, ""
}

func fieldName(path string) string {
	if path == "" {
		return "arguments"
	}
	return fmt.Sprintf("%q", path)
}
