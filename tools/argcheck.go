package tools

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// An application's tools (a client or webhook toolset's, a chat's own)
// are held to their parameters schema as typed Go tools are to theirs: a
// call whose arguments the schema does not take gets an error result
// naming the field and what is wrong, in the same words, and goes no
// further (no pause, no POST). The schema is compiled once, when the tool
// is declared, with google/jsonschema-go: draft 2020-12, or draft-07 when
// "$schema" names draft-07 (or draft-04 or -06, which it is closest to);
// any other "$schema" is read as 2020-12. MCP tools are held to their
// inputSchema the same way (mcpTool).

// argSchema is a tool's parameters schema compiled to check calls.
type argSchema struct {
	// rs is nil for a schema whose references this package cannot follow
	// (anchors, dynamic references, a nested $id): its work could not be
	// bounded, so its calls go unchecked, as before there was a check.
	rs *jsonschema.Resolved
	// graph bounds each call's work (argbound.go).
	graph *snode
}

// Dialects jsonschema-go validates by.
const (
	draft7    = "http://json-schema.org/draft-07/schema#"
	draft2020 = "https://json-schema.org/draft/2020-12/schema"
)

// compileArgs reads params as the JSON Schema of an arguments object and
// compiles it. It refuses what CheckSchema refuses, and a schema that
// would not end or would take too long on a call: one that refers back to
// itself for the same value ({"$ref": "#"}, which overflows the
// validator's stack and ends the process), or that passes maxSchemaWork.
func compileArgs(params json.RawMessage) (*argSchema, error) {
	rs, err := resolveSchema(params)
	if err != nil {
		return nil, err
	}
	var raw any
	if err := json.Unmarshal(params, &raw); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON Schema: %w", err)
	}
	graph, err := boundGraph(raw)
	switch {
	case errors.Is(err, errUnfollowed):
		return &argSchema{}, nil
	case err != nil:
		return nil, fmt.Errorf("parameters: %w", err)
	}
	return &argSchema{rs: rs, graph: graph}, nil
}

// resolveSchema reads params as the JSON Schema of an object and
// resolves it, ready to validate arguments by its dialect.
func resolveSchema(params json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(params, &s); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON Schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf(`parameters must be a schema of "type": "object", not %q`, s.Type)
	}
	s.Schema = dialect(s.Schema)
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("parameters are not a valid JSON Schema: %w", err)
	}
	return rs, nil
}

// dialect is the "$schema" jsonschema-go validates by for the one a
// schema names; jsonschema-go refuses to validate by any other.
func dialect(named string) string {
	switch {
	case named == "":
		return ""
	case strings.Contains(named, "draft-07") || strings.Contains(named, "draft-06") || strings.Contains(named, "draft-04"):
		return draft7
	}
	return draft2020
}

// check returns "" when args (a JSON object) satisfy the schema, or a
// sentence naming the field and what is wrong with it.
func (a *argSchema) check(args json.RawMessage) string {
	if a == nil || a.rs == nil {
		return ""
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return "not valid JSON"
	}
	if checkWork(a.graph, v) > maxCheckWork {
		return fmt.Sprintf("the arguments object is too big or nested too deep to be checked against the schema (more than %d checks); send less in one call", maxCheckWork)
	}
	if err := a.rs.Validate(v); err != nil {
		return clipText(argProblem(err), maxProblemBytes)
	}
	return ""
}

// maxProblemBytes bounds what the model is told of one mismatch: a value
// in it may be the model's whole argument.
const maxProblemBytes = 600

// argProblem turns jsonschema-go's error, a chain of the subschemas it
// went through ("validating /properties/a: ...") ending in the reason,
// into the field's path and the reason, worded as the typed tools' are
// where the reason is a common one.
func argProblem(err error) string {
	field, reason := "", err.Error()
	prev, root := "", ""
	for e := err; e != nil; e = errors.Unwrap(e) {
		inner := errors.Unwrap(e)
		if inner == nil {
			reason = e.Error()
			break
		}
		loc, ok := strings.CutPrefix(strings.TrimSuffix(e.Error(), ": "+inner.Error()), "validating ")
		if !ok {
			continue
		}
		// The root is named "root", or by its $id.
		if root == "" {
			root = loc
		}
		if loc == root {
			loc = ""
		}
		// A location that does not go on from the last is where a $ref
		// led: the same value, its field unchanged.
		if rest, ok := strings.CutPrefix(loc, prev+"/"); ok {
			field = fieldOf(field, strings.Split(rest, "/"))
		}
		prev = loc
	}
	where := "the arguments object"
	if field != "" {
		where = strconv.Quote(field)
	}
	reason = strings.Join(strings.Fields(reason), " ")
	if m := typeReason.FindStringSubmatch(reason); m != nil {
		return fmt.Sprintf("%s must be %s, not %s", where, typeList(m[2]), withArticle(m[1]))
	}
	for _, b := range boundReasons {
		if m := b.re.FindStringSubmatch(reason); m != nil {
			if f, err := strconv.ParseFloat(m[1], 64); err == nil {
				return fmt.Sprintf(b.says, where, f)
			}
		}
	}
	if m, ok := strings.CutPrefix(reason, "required: missing properties: "); ok {
		if names := quotedNames(m); len(names) > 0 {
			return fmt.Sprintf("%q is required", joinPath(field, names[0]))
		}
	}
	if m, ok := strings.CutPrefix(reason, "unexpected additional properties "); ok {
		if names := quotedNames(m); len(names) > 0 {
			return fmt.Sprintf("%s has no field %q", where, names[0])
		}
	}
	return where + ": " + reason
}

// boundReasons reword jsonschema-go's reasons for a bound as the typed
// tools word them.
var boundReasons = []struct {
	re   *regexp.Regexp
	says string
}{
	{regexp.MustCompile(`^minimum: .* is less than ([-+.e\d]+)$`), "%s must be at least %v"},
	{regexp.MustCompile(`^maximum: .* is greater than ([-+.e\d]+)$`), "%s must be at most %v"},
	{regexp.MustCompile(`^exclusiveMinimum: .* is less than or equal to ([-+.e\d]+)$`), "%s must be more than %v"},
	{regexp.MustCompile(`^exclusiveMaximum: .* is greater than or equal to ([-+.e\d]+)$`), "%s must be less than %v"},
	{regexp.MustCompile(`^minLength: .* fewer than (\d+)$`), "%s must be at least %v characters"},
	{regexp.MustCompile(`^maxLength: .* more than (\d+)$`), "%s must be at most %v characters"},
	{regexp.MustCompile(`^minItems: array length \d+ is less than (\d+)$`), "%s needs at least %v items"},
	{regexp.MustCompile(`^maxItems: array length \d+ is greater than (\d+)$`), "%s allows at most %v items"},
}

var (
	typeReason  = regexp.MustCompile(`^type: .* has type "(\w+)", want (?:one of )?"([\w, ]+)"$`)
	quotedWords = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// typeList words jsonschema-go's wanted types ("string, null") as the
// typed tools do ("a string or null").
func typeList(types string) string {
	parts := strings.Split(types, ", ")
	for i, t := range parts {
		parts[i] = withArticle(t)
	}
	return strings.Join(parts, " or ")
}

func quotedNames(s string) []string {
	var out []string
	for _, q := range quotedWords.FindAllString(s, -1) {
		if n, err := strconv.Unquote(q); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// fieldOf follows a schema's path (its JSON Pointer's tokens) from the
// field it starts at to the field it checks: a property goes one deeper,
// an array's items one into the array ("[]": the index is not told);
// combinators and definitions leave the field as it is.
func fieldOf(field string, tokens []string) string {
	for i := 0; i < len(tokens); i++ {
		name := ""
		if i+1 < len(tokens) {
			name = unescapeToken(tokens[i+1])
		}
		switch tokens[i] {
		case "properties":
			field, i = joinPath(field, name), i+1
		case "patternProperties":
			field, i = joinPath(field, "*"), i+1
		case "additionalProperties", "unevaluatedProperties":
			field = joinPath(field, "*")
		case "prefixItems":
			field, i = field+"["+name+"]", i+1
		case "items":
			if _, err := strconv.Atoi(name); err == nil { // draft-07's list of items
				field, i = field+"["+name+"]", i+1
				continue
			}
			field += "[]"
		case "additionalItems", "unevaluatedItems", "contains":
			field += "[]"
		case "$defs", "definitions", "allOf", "anyOf", "oneOf", "dependentSchemas", "dependencies":
			i++
		}
	}
	return field
}

func unescapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
}

// argCache holds the compiled schemas of chats' own tools by their
// digest: a chat's tools are declared with the chat and live in its
// metadata, and each call finds its compiled schema here.
type argCache struct {
	mu sync.Mutex
	m  map[[32]byte]argCompiled
}

type argCompiled struct {
	a   *argSchema
	err error
}

// maxCachedSchemas bounds argCache; past it an entry goes to make room,
// compiled again when next needed.
const maxCachedSchemas = 4096

func (c *argCache) get(params json.RawMessage) (*argSchema, error) {
	key := sha256.Sum256(params)
	c.mu.Lock()
	got, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return got.a, got.err
	}
	a, err := compileArgs(params)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]argCompiled{}
	}
	if len(c.m) >= maxCachedSchemas {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = argCompiled{a, err}
	return a, err
}
