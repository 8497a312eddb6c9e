package tools

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// jsonschema-go validates without a bound on its work: it follows a $ref
// to the same value without end (its stack overflows, which no recover
// catches), and applies a subschema once for every path that leads to it.
// So a schema is read here once, when it is declared, as a graph of its
// subschemas: one that refers back to itself for the same value, or
// applies more than maxSchemaWork subschemas, is refused; and before each
// call is validated its work on those arguments is counted on the graph,
// which memoises what the validator does not (a recursive schema that
// applies itself twice to each nested value doubles its work a level).

// maxSchemaWork bounds the subschemas one schema applies to one value,
// counted as if every $ref were written out (recursion into nested values
// counts once). A schema whose references fan out further (two
// references to the next definition, twenty times over) would take
// seconds a call; an ordinary one, however long, applies each of its
// subschemas once.
const maxSchemaWork = 100_000

// maxCheckWork bounds the subschemas applied to the values of one call's
// arguments: a call past it is refused unchecked. Arguments within
// limits.tool_argument_bytes against an ordinary schema stay well under.
const maxCheckWork = 1_000_000

// errUnfollowed marks a schema whose references the bound cannot follow.
var errUnfollowed = errors.New("references the bound cannot follow")

// snode is one subschema as the bound sees it: what it applies, to what.
type snode struct {
	ptr   string
	same  []*snode          // to the value itself: allOf, anyOf, oneOf, not, if, then, else, dependentSchemas, $ref
	props map[string]*snode // to the property of that name
	pats  []patEdge         // to the properties whose names match
	other []*snode          // to every property: additionalProperties, unevaluatedProperties, propertyNames (counted over)
	first []*snode          // to the item at that index: prefixItems, draft-07's list of items
	items []*snode          // to every item: items, additionalItems, contains, unevaluatedItems
}

type patEdge struct {
	re *regexp.Regexp
	n  *snode
}

// boundGraph reads a schema (JSON decoded into any) as its graph and
// refuses it as the package comment says; errUnfollowed when it uses a
// reference the graph cannot follow.
func boundGraph(root any) (*snode, error) {
	b := &builder{root: root, nodes: map[string]*snode{}}
	n, err := b.node("", root)
	if err != nil {
		return nil, err
	}
	w := &walk{entered: map[*snode]int{}, work: map[*snode]int{}}
	if _, err := w.count(n, 0); err != nil {
		return nil, err
	}
	return n, nil
}

type builder struct {
	root  any
	nodes map[string]*snode // by JSON Pointer, so a schema reached by $ref and by its place is one
}

func (b *builder) node(ptr string, raw any) (*snode, error) {
	if n, ok := b.nodes[ptr]; ok {
		return n, nil
	}
	n := &snode{ptr: ptr}
	b.nodes[ptr] = n
	m, ok := raw.(map[string]any)
	if !ok {
		return n, nil // true, false
	}
	for _, k := range []string{"$dynamicRef", "$recursiveRef", "$anchor", "$dynamicAnchor", "$recursiveAnchor"} {
		if _, ok := m[k]; ok {
			return nil, errUnfollowed
		}
	}
	if _, ok := m["$id"]; ok && ptr != "" {
		return nil, errUnfollowed // refs below it resolve against it
	}
	var err error
	one := func(to *[]*snode, key string) {
		if v, ok := m[key]; ok && err == nil && isSchema(v) {
			var c *snode
			c, err = b.node(ptr+"/"+escapeToken(key), v)
			*to = append(*to, c)
		}
	}
	list := func(to *[]*snode, key string) {
		l, _ := m[key].([]any)
		for i, v := range l {
			if err == nil && isSchema(v) {
				var c *snode
				c, err = b.node(ptr+"/"+key+"/"+strconv.Itoa(i), v)
				*to = append(*to, c)
			}
		}
	}
	each := func(key string, add func(name string, c *snode)) {
		mm, _ := m[key].(map[string]any)
		for name, v := range mm {
			if err == nil && isSchema(v) { // draft-07's dependencies may list names
				var c *snode
				c, err = b.node(ptr+"/"+key+"/"+escapeToken(name), v)
				add(name, c)
			}
		}
	}
	for _, k := range []string{"not", "if", "then", "else"} {
		one(&n.same, k)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list(&n.same, k)
	}
	for _, k := range []string{"dependentSchemas", "dependencies"} {
		each(k, func(_ string, c *snode) { n.same = append(n.same, c) })
	}
	for _, k := range []string{"additionalProperties", "unevaluatedProperties", "propertyNames"} {
		one(&n.other, k)
	}
	for _, k := range []string{"items", "additionalItems", "contains", "unevaluatedItems"} {
		one(&n.items, k)
	}
	list(&n.first, "prefixItems")
	list(&n.first, "items")
	each("properties", func(name string, c *snode) {
		if n.props == nil {
			n.props = map[string]*snode{}
		}
		n.props[name] = c
	})
	each("patternProperties", func(pat string, c *snode) {
		// jsonschema-go compiled it already; one it cannot is refused there.
		if re, reErr := regexp.Compile(pat); reErr == nil {
			n.pats = append(n.pats, patEdge{re, c})
		}
	})
	if ref, ok := m["$ref"].(string); ok && err == nil {
		var target any
		var tptr string
		if target, tptr, err = b.resolve(ref); err == nil {
			var c *snode
			c, err = b.node(tptr, target)
			n.same = append(n.same, c)
		}
	}
	return n, err
}

func isSchema(v any) bool {
	switch v.(type) {
	case map[string]any, bool:
		return true
	}
	return false
}

// resolve finds a local reference ("#", "#/$defs/x") in the document.
func (b *builder) resolve(ref string) (any, string, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok || frag != "" && !strings.HasPrefix(frag, "/") {
		return nil, "", errUnfollowed
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, "", errUnfollowed
	}
	node := b.root
	if frag == "" {
		return node, "", nil
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = unescapeToken(tok)
		switch n := node.(type) {
		case map[string]any:
			node, ok = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			ok = err == nil && i >= 0 && i < len(n)
			if ok {
				node = n[i]
			}
		default:
			ok = false
		}
		if !ok {
			return nil, "", errUnfollowed // jsonschema-go resolved it some other way
		}
	}
	return node, frag, nil
}

func escapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// walk counts the subschemas each schema applies to one value.
type walk struct {
	// entered holds the schemas being counted, each with how many steps
	// into the value it was entered at; work, those counted.
	entered map[*snode]int
	work    map[*snode]int
}

// count is how many subschemas n applies, at most maxSchemaWork+1; depth
// counts the steps into the value (properties, items) taken to it.
func (w *walk) count(n *snode, depth int) (int, error) {
	if c, ok := w.work[n]; ok {
		return c, nil
	}
	if d, ok := w.entered[n]; ok {
		if d == depth {
			return 0, fmt.Errorf("the schema at %q refers back to itself for the same value, so checking a call would never end", "#"+n.ptr)
		}
		return 1, nil // recursion into what the value holds ends with the value
	}
	w.entered[n] = depth
	total := 1
	add := func(c *snode, d int) error {
		k, err := w.count(c, d)
		if err != nil {
			return err
		}
		if total = min(total+k, maxSchemaWork+1); total > maxSchemaWork {
			return fmt.Errorf("the schema applies more than %d subschemas, its references written out", maxSchemaWork)
		}
		return nil
	}
	for _, c := range n.same {
		if err := add(c, depth); err != nil {
			return 0, err
		}
	}
	for _, c := range n.inner() {
		if err := add(c, depth+1); err != nil {
			return 0, err
		}
	}
	delete(w.entered, n)
	w.work[n] = total
	return total, nil
}

// inner lists what n applies to the values a value holds.
func (n *snode) inner() []*snode {
	out := append(append(append([]*snode{}, n.other...), n.first...), n.items...)
	for _, c := range n.props {
		out = append(out, c)
	}
	for _, p := range n.pats {
		out = append(out, p.n)
	}
	return out
}

// checkWork counts the subschemas validating v against n applies, at
// most maxCheckWork+1, in at most about as many steps: a value and a
// subschema met again by another path are counted once.
func checkWork(n *snode, v any) int {
	c := &coster{memo: map[costKey]int{}}
	return c.cost(n, v)
}

type coster struct {
	memo  map[costKey]int
	steps int
}

type costKey struct {
	n *snode
	v uintptr // the map or slice; 0 for a scalar, whose cost is the same whatever it is
}

func (c *coster) cost(n *snode, v any) int {
	key := costKey{n: n}
	switch v.(type) {
	case map[string]any, []any:
		key.v = reflect.ValueOf(v).Pointer()
	}
	if got, ok := c.memo[key]; ok {
		return got
	}
	if c.steps++; c.steps > maxCheckWork {
		return maxCheckWork + 1
	}
	total := 1
	add := func(k int) bool {
		total = min(total+k, maxCheckWork+1)
		return total <= maxCheckWork
	}
	for _, s := range n.same {
		if !add(c.cost(s, v)) {
			return total
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for name, child := range x {
			if s, ok := n.props[name]; ok && !add(c.cost(s, child)) {
				return total
			}
			for _, p := range n.pats {
				if p.re.MatchString(name) && !add(c.cost(p.n, child)) {
					return total
				}
			}
			for _, s := range n.other {
				if !add(c.cost(s, child)) {
					return total
				}
			}
		}
	case []any:
		for i, child := range x {
			if i < len(n.first) && !add(c.cost(n.first[i], child)) {
				return total
			}
			for _, s := range n.items {
				if !add(c.cost(s, child)) {
					return total
				}
			}
		}
	}
	c.memo[key] = total
	return total
}
