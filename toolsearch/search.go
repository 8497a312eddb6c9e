package toolsearch

import (
	"iter"
	"math"
	"slices"
	"strings"
)

// weighted is a query term and how much it counts.
type weighted struct {
	term   int32
	weight float64
}

// cand is a doc and its score in one search.
type cand struct {
	doc   int32
	score float64
}

// scratch is one search's working memory, pooled: dense arrays by doc and by
// term that a search leaves zeroed for the next.
type scratch struct {
	scores  []float64 // by doc
	touched []int32   // docs with a score
	hi      float64   // the highest of their scores
	slot    []int32   // by term: its position+1 in the query's terms
	qt      []weighted
	idf     []float64 // by query term, as score computed it
	sel     []float64 // the scores topK selects from
	norm    fieldNorms
	word    []byte
	ids     []int32
	stems   []string
}

func (ix *Index) getScratch() *scratch {
	s, _ := ix.scratch.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	if n := len(ix.docs); len(s.scores) < n {
		s.scores = make([]float64, n+n/4)
		s.touched = make([]int32, 0, n+n/4+1)
	}
	if n := len(ix.post); len(s.slot) < n {
		s.slot = make([]int32, n+n/4)
	}
	return s
}

// lookup returns the term of a stem, or -1 if no tool has it.
func (ix *Index) lookup(stem string) int32 {
	if t, ok := ix.vocab[stem]; ok {
		return t
	}
	return -1
}

// own returns the terms of a request's words, as the index numbers them
// (-1 for a stem no tool has), and their stems. Both live in s.
func (ix *Index) own(text string, s *scratch) ([]int32, []string) {
	ids, stems := s.ids[:0], s.stems[:0]
	s.word = eachWord(text, s.word, func(w []byte) {
		if t, ok := ix.wordTerm[string(w)]; ok {
			if t >= 0 {
				ids, stems = append(ids, t), append(stems, ix.termText[t])
			}
			return
		}
		ws := string(w)
		if stopwords[ws] || isNumber(ws) {
			return
		}
		st := stem(ws)
		ids, stems = append(ids, ix.lookup(st)), append(stems, st)
	})
	s.ids, s.stems = ids, stems
	return ids, stems
}

// idf is the inverse document frequency of t, log(1+(n-df+0.5)/(df+0.5))
// = log((n+1)/(df+0.5)), given logN1 = log(n+1) for the n tools held.
func (ix *Index) idf(t int32, logN1 float64) float64 { return logN1 - ix.logDF[t] }

// queryTerms turns a request into weighted terms: its own words at 1, their
// adjacent pairs, their synonyms lower, and the web terms when it contains
// an address. Terms no tool has are left out. It marks each term's slot;
// clearSlots undoes that.
func (ix *Index) queryTerms(query string, s *scratch) []weighted {
	out := s.qt[:0]
	put := func(t int32, w float64) {
		if t < 0 {
			return
		}
		if j := s.slot[t]; j > 0 {
			out[j-1].weight = max(out[j-1].weight, w)
			return
		}
		out = append(out, weighted{t, w})
		s.slot[t] = int32(len(out))
	}
	ids, own := ix.own(query, s)
	for _, t := range ids {
		put(t, 1)
	}
	for i := 1; i < len(ids); i++ {
		if p, ok := ix.pairIDs[[2]int32{ids[i-1], ids[i]}]; ok {
			put(p, phraseWeight)
		}
	}
	for i, st := range own {
		if t := ids[i]; t >= 0 {
			for _, u := range ix.synTerms[t] {
				put(u, synonymWeight)
			}
			continue
		}
		for _, syn := range synonyms[st] {
			put(ix.lookup(syn), synonymWeight)
		}
	}
	if hasAddress(query) {
		for _, w := range webTerms {
			put(ix.lookup(w), addressWeight)
		}
	}
	s.qt = out
	return out
}

func clearSlots(qt []weighted, s *scratch) {
	for _, q := range qt {
		s.slot[q.term] = 0
	}
}

// Search returns up to k tools for query, best first. Equal scores are
// ordered by name so the same tools and query always give the same list,
// whatever order the tools were added in.
//
// A request with several asks ("find a flight, and then a hotel") is also
// searched ask by ask; each ask's leaders are merged with the whole
// request's, scores scaled to the leader of their own list, so every ask
// gets a tool near the top.
func (ix *Index) Search(query string, k int) []Hit {
	if k <= 0 || ix.Len() == 0 {
		return nil
	}
	s := ix.getScratch()
	defer ix.scratch.Put(s)
	named := ix.named(query)
	// The first k hits are returned, and as many more as the named tools
	// promoted above them can push out.
	full := ix.single(query, max(k, rerankDepth), k+len(named), s)
	full = promote(named, full)
	segs := segments(query)
	if len(segs) < 2 || len(full) == 0 {
		return ix.hits(full[:min(k, len(full))])
	}
	lists := [][]cand{full}
	var best float64
	for _, q := range segs {
		// The merge reads an ask's leader and the scores of the rest.
		l := ix.single(q, segmentDepth, 1, s)
		if len(l) > 0 {
			lists = append(lists, l)
			best = max(best, l[0].score)
		}
	}
	// The merge keeps each doc's best scaled score in the scratch's scores.
	fused := s.touched[:0]
	for i, l := range lists {
		top := l[0].score
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
			if s.scores[h.doc] == 0 {
				fused = append(fused, h.doc)
			}
			s.scores[h.doc] = max(s.scores[h.doc], weight*h.score/top)
		}
	}
	out := make([]cand, len(fused))
	for i, d := range fused {
		out[i] = cand{d, s.scores[d]}
		s.scores[d] = 0
	}
	s.touched = fused[:0]
	ix.best(out, k)
	return ix.hits(out[:min(k, len(out))])
}

func (ix *Index) hits(cs []cand) []Hit {
	out := make([]Hit, len(cs))
	for i, c := range cs {
		out[i] = Hit{Name: ix.docs[c.doc].name, Score: c.score}
	}
	return out
}

// identifiers yields the spans of a request that could be a tool's exact
// name, in order: a letter or '_', then letters, digits, '_', '.' or '-',
// ending in a letter, digit or '_'. It is what the regexp
// `[A-Za-z_][A-Za-z0-9_.\-]*[A-Za-z0-9_]` finds (TestIdentifiersAsPattern),
// written out because the regexp was a tenth of a search's time.
func identifiers(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := 0; i < len(text); i++ {
			if c := text[i]; !isLetter(c) && c != '_' {
				continue
			}
			end := i + 1
			for end < len(text) && (isASCIIAlnum(text[end]) || isJoiner(text[end])) {
				end++
			}
			for end > i+1 && (text[end-1] == '.' || text[end-1] == '-') {
				end--
			}
			if end > i+1 {
				if !yield(text[i:end]) {
					return
				}
				i = end - 1
			}
		}
	}
}

// named returns the tools the request names exactly ("use
// calculate_final_velocity"): naming the tool is the strongest evidence
// there is, so promote puts them above any score.
func (ix *Index) named(query string) []int32 {
	var named []int32
	add := func(name string) {
		if d, ok := ix.byName[name]; ok && !slices.Contains(named, d) {
			named = append(named, d)
		}
	}
	// The whole request may be a name: a lookup, whatever the name looks like.
	add(strings.TrimSpace(query))
	for id := range identifiers(query) {
		// "sum", "add", "todo": a plain word is language, not a name.
		if looksLikeCode(id) {
			add(id)
		}
	}
	return named
}

// promote puts the named docs at the top of hits, whose first is its best,
// in the order named.
func promote(named []int32, hits []cand) []cand {
	if len(named) == 0 {
		return hits
	}
	top := 0.0
	if len(hits) > 0 {
		top = hits[0].score
	}
	out := make([]cand, len(named), len(named)+len(hits))
	for i, d := range named {
		out[i] = cand{d, top + float64(len(named)-i)}
	}
	for _, h := range hits {
		if !slices.Contains(named, h.doc) {
			out = append(out, h)
		}
	}
	return out
}

// single ranks tools for one ask: BM25F, then the name-coverage rerank of the
// depth leaders, of which the first m come back in order and the rest in
// none.
func (ix *Index) single(query string, depth, m int, s *scratch) []cand {
	qt := ix.queryTerms(query, s)
	defer clearSlots(qt, s)
	if len(qt) == 0 {
		return nil
	}
	n := float64(ix.Len())
	logN1 := math.Log(n + 1)
	ix.score(qt, n, logN1, s)
	top := ix.topK(s, depth)
	for _, d := range s.touched {
		s.scores[d] = 0
	}
	s.touched = s.touched[:0]
	for i := range top {
		top[i].score *= 1 + coverageBoost*ix.coverage(top[i].doc, logN1, s)
	}
	ix.best(top, m)
	return top
}

// score accumulates BM25F scores into the scratch's dense array; touched
// lists the docs with a score so clearing and ranking skip the rest.
func (ix *Index) score(qt []weighted, n, logN1 float64, s *scratch) {
	// touched has room for every doc and one more, so each posting writes
	// its doc and only a first score moves past it: no branch to mispredict.
	touched := s.touched[:len(ix.docs)+1]
	cnt := 0
	// A doc's score only grows, so the largest score ever written is the
	// largest final one, which topK needs.
	var hi float64
	scores := s.scores
	s.idf = s.idf[:0]
	for _, q := range qt {
		idf := ix.idf(q.term, logN1)
		s.idf = append(s.idf, idf)
		w := idf * q.weight
		ps := ix.post[q.term]
		imp := ix.impactsOf(q.term, n, s)[:len(ps)] // no bounds check below
		for k, p := range ps {
			d := p.doc
			sc := scores[d]
			touched[cnt] = d
			if sc == 0 {
				cnt++
			}
			sc += w * float64(imp[k])
			scores[d] = sc
			if sc > hi {
				hi = sc
			}
		}
	}
	s.touched, s.hi = touched[:cnt], hi
}

// impactCache is one term's BM25F weights, by posting, for the statistics
// of one version of the index.
type impactCache struct {
	version uint64
	w       []float32
}

// impactsOf returns t's weights for the statistics of this moment: cached
// until the index changes, so a change costs nothing until a search reads
// the term again. Concurrent searches that both fill it store the same
// weights.
func (ix *Index) impactsOf(t int32, n float64, s *scratch) []float32 {
	if c := ix.impacts[t].Load(); c != nil && c.version == ix.version {
		return c.w
	}
	ix.norms(n, s)
	tab := &s.norm.table
	ps := ix.post[t]
	w := make([]float32, len(ps))
	for k, p := range ps {
		l := &ix.lens[p.doc]
		var x float64
		if l[0]|l[1]|l[2]|l[3] < normTable {
			// Fields without the term add 0 × their norm, which leaves x
			// exactly as skipping them would.
			x = float64(p.tf[0])*tab[0][l[0]] + float64(p.tf[1])*tab[1][l[1]] +
				float64(p.tf[2])*tab[2][l[2]] + float64(p.tf[3])*tab[3][l[3]]
		} else {
			for f := range numFields {
				if tf := p.tf[f]; tf != 0 {
					x += float64(tf) * s.norm.weight(f, l[f])
				}
			}
		}
		// float32, as the stored impacts of the first index were: look-alike
		// tools then tie and go by name, the ranking the constants were
		// tuned on (BENCHMARKS.md, "Tool search").
		w[k] = float32(x * (k1 + 1) / (x + k1))
	}
	ix.impacts[t].Store(&impactCache{version: ix.version, w: w})
	return w
}

// normTable is how many field lengths norms tabulates: nearly every field
// of a tool is shorter.
const normTable = 64

// fieldNorms gives an occurrence's BM25F weight in a field of some length:
// fieldWeight / (1 - b + b*length/average).
type fieldNorms struct {
	n     float64
	sum   [numFields]int
	c0    [numFields]float64
	c1    [numFields]float64
	table [numFields][normTable]float64
}

func (fn *fieldNorms) weight(f int, length uint32) float64 {
	if length < normTable {
		return fn.table[f][length]
	}
	return fn.direct(f, length)
}

func (fn *fieldNorms) direct(f int, length uint32) float64 {
	return fieldWeight[f] / (fn.c0[f] + fn.c1[f]*float64(length))
}

// norms fills s.norm for the statistics of this moment, unless it already
// holds them (a pooled scratch serves many searches between changes).
func (ix *Index) norms(n float64, s *scratch) {
	fn := &s.norm
	if fn.n == n && fn.sum == ix.fieldSum {
		return
	}
	fn.n, fn.sum = n, ix.fieldSum
	for f := range numFields {
		avg := math.Max(1, float64(ix.fieldSum[f])/math.Max(1, n))
		fn.c0[f] = 1 - fieldB[f]
		fn.c1[f] = fieldB[f] / avg
		// An empty field holds no occurrence to weigh, and its weight can be
		// +Inf (b = 1), which the sum in impactsOf would turn into 0 × Inf =
		// NaN: a tool with no description then lost every search.
		for l := uint32(1); l < normTable; l++ {
			fn.table[f][l] = fn.direct(f, l)
		}
	}
}

// order sorts best first, then by name.
func (ix *Index) order(a, b cand) int {
	switch {
	case a.score > b.score:
		return -1
	case a.score < b.score:
		return 1
	}
	return strings.Compare(ix.docs[a.doc].name, ix.docs[b.doc].name)
}

// topK returns the k best touched docs, unordered. A histogram of their
// scores finds the bucket the k-th best falls in, so only the docs in it and
// above are collected (Hoare's selection over all of them was a tenth of a
// search); the k-th best score is selected from those, and only a tie at that
// score needs names to cut it.
func (ix *Index) topK(s *scratch, k int) []cand {
	touched, scores := s.touched, s.scores
	if len(touched) <= k {
		out := make([]cand, len(touched))
		for i, d := range touched {
			out[i] = cand{d, scores[d]}
		}
		return out
	}
	if k <= 0 {
		return nil
	}
	hi := s.hi
	// bucket never decreases as a score grows, so every doc at or above
	// the k-th best score is in the k-th best's bucket or above it.
	scale := scoreBuckets / hi
	bucket := func(v float64) int { return min(int(v*scale), scoreBuckets-1) }
	var hist [scoreBuckets]int32
	for _, d := range touched {
		hist[bucket(scores[d])]++
	}
	b, above := scoreBuckets-1, 0
	for above+int(hist[b]) < k {
		above += int(hist[b])
		b--
	}
	out := make([]cand, 0, above+int(hist[b]))
	xs := s.sel[:0]
	// bucket(v) >= b is v*scale >= b: a score's bucket is its scaled
	// value's whole part, capped at the last bucket.
	low := float64(b)
	for _, d := range touched {
		if v := scores[d]; v*scale >= low {
			out = append(out, cand{d, v})
			xs = append(xs, v)
		}
	}
	s.sel = xs
	floor := kthLargest(xs, k)
	kept := out[:0]
	for _, c := range out {
		if c.score >= floor {
			kept = append(kept, c)
		}
	}
	if len(kept) > k {
		// The docs above the floor are in; names choose among those at it.
		above := 0
		for i, c := range kept {
			if c.score > floor {
				kept[above], kept[i] = c, kept[above]
				above++
			}
		}
		ix.best(kept[above:], k-above)
		kept = kept[:k]
	}
	return kept
}

// scoreBuckets is how many buckets topK's histogram has.
const scoreBuckets = 256

// best moves the m best of cs, by order, to its front, in order; the rest
// follow in no order. Searches return a few of the hundred leaders they
// rerank, and sorting them all was a tenth of a search.
func (ix *Index) best(cs []cand, m int) {
	if 2*m >= len(cs) {
		slices.SortFunc(cs, ix.order)
		return
	}
	if m <= 0 {
		return
	}
	slices.SortFunc(cs[:m], ix.order)
	for i := m; i < len(cs); i++ {
		if ix.order(cs[i], cs[m-1]) >= 0 {
			continue
		}
		cs[i], cs[m-1] = cs[m-1], cs[i]
		for j := m - 1; j > 0 && ix.order(cs[j], cs[j-1]) < 0; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// kthLargest returns the k-th largest of xs (1 <= k <= len(xs)), which it
// reorders: Hoare's selection, linear on average.
func kthLargest(xs []float64, k int) float64 {
	lo, hi, want := 0, len(xs)-1, k-1
	for lo < hi {
		pivot := xs[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] > pivot {
				i++
			}
			for xs[j] < pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case want <= j:
			hi = j
		case want >= i:
			lo = i
		default:
			return xs[want]
		}
	}
	return xs[want]
}

// coverage is the idf-weighted share of doc's name terms that the query
// says, synonyms counting at their weight.
func (ix *Index) coverage(doc int32, logN1 float64, s *scratch) float64 {
	var have, all float64
	for _, t := range ix.docs[doc].nameTerms {
		// A query term's idf is at hand; only the others are read from
		// the index (reading them all was a tenth of a search).
		var idf float64
		if j := s.slot[t]; j > 0 {
			idf = s.idf[j-1]
			have += idf * s.qt[j-1].weight
		} else {
			idf = ix.idf(t, logN1)
		}
		all += idf
	}
	if all == 0 {
		return 0
	}
	return have / all
}

// looksLikeCode reports whether id is written like an identifier rather than
// a word: it has a separator or a lower-to-upper case change.
func looksLikeCode(id string) bool {
	for i := range len(id) {
		if isJoiner(id[i]) || i > 0 && isUpper(id[i]) && isLower(id[i-1]) {
			return true
		}
	}
	return false
}

// isJoiner reports whether c joins the words of an identifier.
func isJoiner(c byte) bool { return c == '_' || c == '.' || c == '-' }
