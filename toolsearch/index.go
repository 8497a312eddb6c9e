package toolsearch

import (
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Doc is what the index reads of one tool: its name, its description and its
// parameters' names and descriptions.
type Doc struct {
	Name        string
	Description string
	Params      []Param
}

// Param is one parameter of a tool, nested ones included (flattened by the
// caller).
type Param struct {
	Name        string
	Description string
}

// Hit is one search result. Score only orders hits of the same search; it
// has no meaning across searches.
type Hit struct {
	Name  string
	Score float64
}

// Fields and their weights in BM25F. A word of the tool's own name is the
// strongest evidence (people ask for "the weather", tools are called
// get_weather); the description says what the tool does; parameters say what
// it needs, which a request often mentions ("in fahrenheit", "by ISBN").
const (
	fieldName = iota
	fieldDesc
	fieldParam
	// fieldPhrase holds adjacent word pairs of the name and the description,
	// so "current weather" prefers get_current_weather over a tool that has
	// "current" and "weather" far apart.
	fieldPhrase
	numFields
)

var (
	fieldWeight = [numFields]float64{1.0, 1.0, 1.0, 1.0}
	fieldB      = [numFields]float64{0.3, 1.0, 0.75, 0.75}
)

// The ranking constants below were chosen on the shared BFCL-derived
// benchmark (see BENCHMARKS.md, "Tool search"); they are variables only so tests can sweep them.
var (
	k1 = 1.2
	// synonymWeight is how much a synonym of a query word counts against the
	// word itself: enough to find a tool that only uses the other word, not
	// enough to outrank one that uses the person's own word.
	synonymWeight = 0.2
	// addressWeight is how much the web terms an address stands for count.
	addressWeight = 0.6
	// coverageBoost rewards a tool most of whose name the query says: among
	// tools that all mention "weather", get_current_weather wins for "current
	// weather".
	coverageBoost = 0.3
	// rerankDepth is how many BM25F leaders get the name-coverage rerank.
	rerankDepth = 100
	// segmentFloor drops an ask whose best tool scores below this share of
	// the strongest ask's best.
	segmentFloor = 0.3
	// segmentWeight scales an ask's normalized scores against the whole
	// request's.
	segmentWeight = 0.8
	// phraseWeight is how much an adjacent pair of query words counts.
	phraseWeight = 0.5
	// segmentDepth is how many leaders of each ask join the merge.
	segmentDepth = 10
)

// analyzed is a document cut into per-field terms, kept so Add and Remove
// rebuild postings without tokenizing every tool again.
type analyzed struct {
	name   string
	fields [numFields][]string
}

type posting struct {
	doc    int32
	impact float32 // BM25F saturation of the weighted term frequency, idf excluded
}

// Index ranks tools for a request. Build it with NewIndex; Add and Remove
// change it in place and are not safe to call concurrently with anything
// else. Search and NamedIn only read and may run concurrently with each
// other.
type Index struct {
	docs   []analyzed
	byName map[string]int
	post   map[string][]posting
	idf    map[string]float64
	// nameTerms lists, for each doc, its distinct name terms (for coverage
	// and NamedIn).
	nameTerms [][]string
	// byNameTerm maps a name term to the docs whose name contains it.
	byNameTerm map[string][]int32
	scratch    sync.Pool
}

// NewIndex builds an index over docs. A later doc with the same name as an
// earlier one replaces it.
func NewIndex(docs []Doc) *Index {
	ix := &Index{byName: map[string]int{}}
	ix.Add(docs...)
	return ix
}

func (ix *Index) has(name string) bool {
	_, ok := ix.byName[name]
	return ok
}

// Len is the number of tools in the index.
func (ix *Index) Len() int { return len(ix.docs) }

// Add registers tools, replacing any of the same name, and rebuilds the
// postings once. Register many at once: each call costs a pass over the
// whole index.
func (ix *Index) Add(docs ...Doc) {
	for _, d := range docs {
		a := analyze(d)
		if i, ok := ix.byName[d.Name]; ok {
			ix.docs[i] = a
			continue
		}
		ix.byName[d.Name] = len(ix.docs)
		ix.docs = append(ix.docs, a)
	}
	ix.rebuild()
}

// Remove drops the named tools; unknown names are ignored.
func (ix *Index) Remove(names ...string) {
	drop := map[string]bool{}
	for _, n := range names {
		if _, ok := ix.byName[n]; ok {
			drop[n] = true
		}
	}
	if len(drop) == 0 {
		return
	}
	kept := ix.docs[:0]
	for _, a := range ix.docs {
		if !drop[a.name] {
			kept = append(kept, a)
		}
	}
	ix.docs = kept
	ix.byName = make(map[string]int, len(kept))
	for i, a := range kept {
		ix.byName[a.name] = i
	}
	ix.rebuild()
}

func analyze(d Doc) analyzed {
	a := analyzed{name: d.Name}
	a.fields[fieldName] = terms(d.Name)
	a.fields[fieldDesc] = terms(d.Description)
	var ps []string
	for _, p := range d.Params {
		ps = append(ps, terms(p.Name)...)
		ps = append(ps, terms(p.Description)...)
	}
	a.fields[fieldParam] = ps
	a.fields[fieldPhrase] = append(pairs(a.fields[fieldName]), pairs(a.fields[fieldDesc])...)
	return a
}

// rebuild recomputes postings, idf and the name-term map from ix.docs.
func (ix *Index) rebuild() {
	n := len(ix.docs)
	var avg [numFields]float64
	for _, a := range ix.docs {
		for f := range numFields {
			avg[f] += float64(len(a.fields[f]))
		}
	}
	for f := range avg {
		avg[f] = math.Max(1, avg[f]/math.Max(1, float64(n)))
	}
	ix.post = make(map[string][]posting)
	ix.nameTerms = make([][]string, n)
	ix.byNameTerm = make(map[string][]int32)
	for i, a := range ix.docs {
		tf := map[string]float64{}
		for f := range numFields {
			norm := 1 - fieldB[f] + fieldB[f]*float64(len(a.fields[f]))/avg[f]
			for _, t := range a.fields[f] {
				tf[t] += fieldWeight[f] / norm
			}
		}
		for t, w := range tf {
			ix.post[t] = append(ix.post[t], posting{doc: int32(i), impact: float32(w * (k1 + 1) / (w + k1))})
		}
		seen := map[string]bool{}
		for _, t := range a.fields[fieldName] {
			if !seen[t] {
				seen[t] = true
				ix.nameTerms[i] = append(ix.nameTerms[i], t)
				ix.byNameTerm[t] = append(ix.byNameTerm[t], int32(i))
			}
		}
	}
	ix.idf = make(map[string]float64, len(ix.post))
	for t, p := range ix.post {
		df := float64(len(p))
		ix.idf[t] = math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
	}
	ix.scratch = sync.Pool{}
}

// weighted is a query term and how much it counts.
type weighted struct {
	term   string
	weight float64
}

// queryTerms turns a request into weighted terms: its own words at 1, their
// synonyms lower, and the web terms when it contains an address.
func queryTerms(query string) []weighted {
	var out []weighted
	idx := map[string]int{}
	put := func(t string, w float64) {
		if i, ok := idx[t]; ok {
			out[i].weight = math.Max(out[i].weight, w)
			return
		}
		idx[t] = len(out)
		out = append(out, weighted{t, w})
	}
	own := terms(query)
	for _, t := range own {
		put(t, 1)
	}
	for _, p := range pairs(own) {
		put(p, phraseWeight)
	}
	for _, t := range own {
		for _, s := range synonyms[t] {
			put(s, synonymWeight)
		}
	}
	if hasAddress(query) {
		for _, t := range webTerms {
			put(t, addressWeight)
		}
	}
	return out
}

// Search returns up to k tools for query, best first. Equal scores are
// ordered by name so the same index and query always give the same list.
//
// A request with several asks ("find a flight, and then a hotel") is also
// searched ask by ask; each ask's leaders are merged with the whole
// request's, scores scaled to the leader of their own list, so every ask
// gets a tool near the top.
func (ix *Index) Search(query string, k int) []Hit {
	if k <= 0 || len(ix.docs) == 0 {
		return nil
	}
	depth := max(k, rerankDepth)
	full := ix.single(query, depth)
	full = ix.promoteNamed(query, full)
	segs := segments(query)
	if len(segs) < 2 || len(full) == 0 {
		return full[:min(k, len(full))]
	}
	lists := [][]Hit{full}
	var best float64
	for _, s := range segs {
		l := ix.single(s, segmentDepth)
		if len(l) > 0 {
			lists = append(lists, l)
			best = max(best, l[0].Score)
		}
	}
	fused := map[string]float64{}
	for i, l := range lists {
		if len(l) == 0 {
			continue
		}
		top := l[0].Score
		weight := 1.0
		if i > 0 {
			// An ask with little evidence ("can you assist me with these?")
			// should not push real candidates out.
			if top < segmentFloor*best {
				continue
			}
			weight = segmentWeight
		}
		for _, h := range l {
			fused[h.Name] = max(fused[h.Name], weight*h.Score/top)
		}
	}
	out := make([]Hit, 0, len(fused))
	for n, s := range fused {
		out = append(out, Hit{Name: n, Score: s})
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out[:min(k, len(out))]
}

// identifier finds the spans of a request that could be a tool's exact name.
var identifier = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.\-]*[A-Za-z0-9_]`)

// promoteNamed puts tools the request names exactly ("use
// calculate_final_velocity") at the top, above any score: naming the tool is
// the strongest evidence there is.
func (ix *Index) promoteNamed(query string, hits []Hit) []Hit {
	var named []Hit
	seen := map[string]bool{}
	if q := strings.TrimSpace(query); ix.has(q) {
		// The whole request is a name: a lookup, whatever the name looks like.
		seen[q] = true
		named = append(named, Hit{Name: q})
	}
	for _, id := range identifier.FindAllString(query, -1) {
		if !looksLikeCode(id) {
			// "sum", "add", "todo": a plain word is language, not a name.
			continue
		}
		if _, ok := ix.byName[id]; ok && !seen[id] {
			seen[id] = true
			named = append(named, Hit{Name: id})
		}
	}
	if len(named) == 0 {
		return hits
	}
	top := 0.0
	if len(hits) > 0 {
		top = hits[0].Score
	}
	for i := range named {
		named[i].Score = top + float64(len(named)-i)
	}
	out := append(named, hits...)
	kept := out[:0]
	dup := map[string]bool{}
	for _, h := range out {
		if !dup[h.Name] {
			dup[h.Name] = true
			kept = append(kept, h)
		}
	}
	return kept
}

// single ranks tools for one ask: BM25F, then the name-coverage rerank of the
// leaders.
func (ix *Index) single(query string, depth int) []Hit {
	qt := queryTerms(query)
	if len(qt) == 0 {
		return nil
	}
	scores, touched := ix.score(qt)
	top := ix.topK(scores, touched, depth)
	ix.release(scores, touched)
	ix.rerank(top, qt)
	return top
}

type scratch struct {
	scores  []float64
	touched []int32
}

// score accumulates BM25F scores into a dense array; touched lists the docs
// with a non-zero score so clearing and ranking skip the rest.
func (ix *Index) score(qt []weighted) ([]float64, []int32) {
	s, _ := ix.scratch.Get().(*scratch)
	if s == nil || len(s.scores) != len(ix.docs) {
		s = &scratch{scores: make([]float64, len(ix.docs))}
	}
	touched := s.touched[:0]
	for _, q := range qt {
		idf := ix.idf[q.term] * q.weight
		for _, p := range ix.post[q.term] {
			if s.scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			s.scores[p.doc] += idf * float64(p.impact)
		}
	}
	return s.scores, touched
}

func (ix *Index) release(scores []float64, touched []int32) {
	for _, d := range touched {
		scores[d] = 0
	}
	ix.scratch.Put(&scratch{scores: scores, touched: touched[:0]})
}

// less orders hits best first, then by name.
func less(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Name < b.Name
}

// topK selects the k best touched docs with a bounded min-heap.
func (ix *Index) topK(scores []float64, touched []int32, k int) []Hit {
	h := make([]Hit, 0, k+1)
	for _, d := range touched {
		hit := Hit{Name: ix.docs[d].name, Score: scores[d]}
		if len(h) == k && !less(hit, h[0]) {
			continue
		}
		h = append(h, hit)
		up(h, len(h)-1)
		if len(h) > k {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
			down(h, 0)
		}
	}
	sort.Slice(h, func(i, j int) bool { return less(h[i], h[j]) })
	return h
}

// The heap keeps the worst hit at the root.
func up(h []Hit, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !less(h[p], h[i]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func down(h []Hit, i int) {
	for {
		l, w := 2*i+1, i
		if l < len(h) && less(h[w], h[l]) {
			w = l
		}
		if r := l + 1; r < len(h) && less(h[w], h[r]) {
			w = r
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// rerank multiplies each leader's score by how much of its name the query
// covers, weighted by idf, and re-sorts.
func (ix *Index) rerank(top []Hit, qt []weighted) {
	qw := make(map[string]float64, len(qt))
	for _, q := range qt {
		qw[q.term] = q.weight
	}
	for i := range top {
		top[i].Score *= 1 + coverageBoost*ix.coverage(ix.byName[top[i].Name], qw)
	}
	sort.Slice(top, func(i, j int) bool { return less(top[i], top[j]) })
}

// coverage is the idf-weighted share of doc's name terms that the query
// says, synonyms counting at their weight.
func (ix *Index) coverage(doc int, qw map[string]float64) float64 {
	var have, all float64
	for _, t := range ix.nameTerms[doc] {
		idf := ix.idf[t]
		all += idf
		have += idf * qw[t]
	}
	if all == 0 {
		return 0
	}
	return have / all
}

// pairs returns the adjacent pairs of ts as single terms ("current weather"
// becomes "current weather" with a space, which no word contains).
func pairs(ts []string) []string {
	if len(ts) < 2 {
		return nil
	}
	out := make([]string, 0, len(ts)-1)
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i-1]+" "+ts[i])
	}
	return out
}

// looksLikeCode reports whether id is written like an identifier rather than
// a word: it has a separator or a lower-to-upper case change.
func looksLikeCode(id string) bool {
	if strings.ContainsAny(id, "_.-") {
		return true
	}
	for i := 1; i < len(id); i++ {
		if id[i] >= 'A' && id[i] <= 'Z' && id[i-1] >= 'a' && id[i-1] <= 'z' {
			return true
		}
	}
	return false
}
