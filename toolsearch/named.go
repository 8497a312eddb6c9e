package toolsearch

import (
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// genericNameWords are words of tool names that say how, not what: "get",
// "list", "search". A message that says "get" has not named get_weather.
var genericNameWords = stemSet(`get set list create update delete find search make run use add new
info data tool tools api function do check show calc calculate compute read write by for from to
of in on all item items value values result results detail details current default`)

func stemSet(list string) map[string]bool {
	m := map[string]bool{}
	for w := range setOf(list) {
		m[stem(w)] = true
	}
	return m
}

// namedSynonymWeight is how much a synonym of a message word counts towards
// naming a tool ("remember" names memory_save, less surely than it names
// remember).
const namedSynonymWeight = 0.5

// namedEdgeBytes is how much of a long message's start and end NamedIn
// reads.
const namedEdgeBytes = 4096

// edges is what NamedIn reads of a message: all of a short one; the first
// and last namedEdgeBytes of a long one, cut at a space so no word is cut.
// A person's own words open and close what they paste; a word in the middle
// of a pasted log names a tool by accident, and reading 200 KB of it held
// the one index every tenant asks for 8 ms.
func edges(message string) string {
	if len(message) <= 2*namedEdgeBytes {
		return message
	}
	head, tail := message[:namedEdgeBytes], message[len(message)-namedEdgeBytes:]
	if i := strings.LastIndexFunc(head, unicode.IsSpace); i > 0 {
		head = head[:i]
	}
	if i := strings.IndexFunc(tail, unicode.IsSpace); i >= 0 {
		tail = tail[i:]
	}
	return head + "\n" + tail
}

// NamedIn returns up to limit tools that a word of the message names: a
// word of the tool's own name ("Please remember that …" names remember; "in
// the browser" names browser_open), an everyday synonym of one ("remember"
// names memory_add), or a web address, which names the web tools (web_fetch,
// browse). Generic name words ("get", "list") do not count. Tools whose name
// the message covers most come first; ties go by name. Of a long message it
// reads the start and the end (edges).
func (ix *Index) NamedIn(message string, limit int) []string {
	if limit <= 0 || ix.Len() == 0 {
		return nil
	}
	message = edges(message)
	exact := ix.exactNames(message)
	if len(exact) >= limit {
		return exact[:limit]
	}
	// weights keeps the message's terms in the order said, so the sums
	// below add up the same way every time.
	var weights []weighted
	put := func(stem string, w float64) {
		t := ix.lookup(stem)
		if genericNameWords[stem] || t < 0 {
			return
		}
		if i := slices.IndexFunc(weights, func(q weighted) bool { return q.term == t }); i >= 0 {
			weights[i].weight = max(weights[i].weight, w)
			return
		}
		weights = append(weights, weighted{t, w})
	}
	s := ix.getScratch()
	defer ix.scratch.Put(s)
	_, own := ix.own(message, s)
	for _, t := range own {
		for _, syn := range synonyms[t] {
			put(syn, namedSynonymWeight)
		}
	}
	for _, t := range own {
		put(t, 1)
	}
	if hasAddress(message) {
		for _, t := range webTerms {
			put(t, 1)
		}
	}
	logN1 := math.Log(float64(ix.Len()) + 1)
	found := map[int32]float64{}
	for _, q := range weights {
		idf := ix.idf(q.term, logN1)
		for _, d := range ix.byNameTerm[q.term] {
			found[d] += q.weight * idf
		}
	}
	hits := make([]Hit, 0, len(found))
	for d, have := range found {
		var all float64
		for _, t := range ix.docs[d].nameTerms {
			all += ix.idf(t, logN1)
		}
		hits = append(hits, Hit{Name: ix.docs[d].name, Score: have / all})
	}
	sort.Slice(hits, func(i, j int) bool { return less(hits[i], hits[j]) })
	out := exact
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		if !slices.Contains(exact, h.Name) {
			out = append(out, h.Name)
		}
	}
	return out
}

// exactNames are the tools a message names by their whole registry name,
// in its order. Words cannot tell kit__tool_042 from kit__tool_001 (numbers
// are no terms), so a name copied whole comes first. Only identifiers count
// (a name with '_', '-', '.' or a digit): a plain word such as "calculate"
// is left to the word rules.
func (ix *Index) exactNames(message string) []string {
	var out []string
	words := strings.FieldsFunc(message, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' && r != '.'
	})
	for _, w := range words {
		w = strings.TrimRight(w, ".-")
		if !ix.has(w) || !strings.ContainsAny(w, "_-.0123456789") || slices.Contains(out, w) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// less orders hits best first, then by name.
func less(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Name < b.Name
}
