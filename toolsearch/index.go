package toolsearch

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
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

// posting is one doc's occurrences of one term, per field. BM25F weights
// are computed from these counts when a search runs, with the statistics of
// that moment (tool count, document frequency, average field lengths), so
// adding a tool writes its own postings and changes no other.
type posting struct {
	doc int32
	tf  [numFields]uint16 // saturated; no real tool comes near
}

// doc is one tool as the index keeps it. A removed tool leaves its slot
// empty for the next Add to reuse.
type doc struct {
	name string
	// terms are the doc's distinct terms, so Remove finds its postings.
	terms []int32
	// nameTerms are its distinct name terms, in order (for the coverage
	// rerank and NamedIn).
	nameTerms []int32
}

// Index ranks tools for a request. Build it with NewIndex; Add and Remove
// change it in place and are not safe to call concurrently with anything
// else. Search and NamedIn may run concurrently with each other (a search
// caches the weights it computes atomically).
//
// Add and Remove cost what the tools they change hold (their postings), not
// the size of the index: nothing is rebuilt.
type Index struct {
	docs   []doc
	lens   [][numFields]uint32 // by doc: its length in terms, per field
	free   []int32             // empty slots of docs
	byName map[string]int32
	// fieldSum is the total length of each field over the tools held.
	fieldSum [numFields]int
	// vocab numbers word terms (stems) and pairIDs the phrase field's
	// adjacent pairs, by their two words; both share one numbering.
	vocab    map[string]int32
	pairIDs  map[[2]int32]int32
	termText []string // by term: a word term's stem ("" for a pair)
	// synTerms is, by word term, synonymTerms of its stem: kept as terms are
	// numbered (vocab only grows), so a search reads no synonym by name.
	synTerms [][]int32
	// wordTerm caches the term of a lowercase word (-1 for a stopword or a
	// number), so indexing stems each distinct word once.
	wordTerm map[string]int32
	post     [][]posting // by term, sorted by doc
	// logDF is log(df+0.5) by term, kept with its postings: a term's idf,
	// log((n+1)/(df+0.5)), is then one subtraction at search time.
	logDF []float64
	// byNameTerm lists, by term, the docs whose name contains it (sorted).
	byNameTerm [][]int32
	// impacts caches, by term, its postings' BM25F weights for the
	// statistics of one version; a search fills it for the terms it reads.
	impacts []*atomic.Pointer[impactCache]
	// version changes with every change of the statistics.
	version uint64
	// posted counts the postings Add and Remove have written or removed:
	// their work, which tests hold to the size of the tools changed.
	posted  int
	build   buildScratch
	scratch sync.Pool
}

// buildScratch is reused by every Add (which never overlaps anything).
type buildScratch struct {
	fields [numFields][]int32
	slot   []int32 // by term: its position+1 in list while a doc is posted
	list   []posting
	ids    []int32 // the term of each entry of list
	word   []byte
	// changed lists the terms whose logDF a change has left stale (marked
	// in stale, by term).
	changed []int32
	stale   []bool
}

// NewIndex builds an index over docs. A later doc with the same name as an
// earlier one replaces it.
func NewIndex(docs []Doc) *Index {
	ix := &Index{
		byName:   map[string]int32{},
		vocab:    map[string]int32{},
		pairIDs:  map[[2]int32]int32{},
		wordTerm: map[string]int32{},
	}
	ix.Add(docs...)
	return ix
}

func (ix *Index) has(name string) bool {
	_, ok := ix.byName[name]
	return ok
}

// Len is the number of tools in the index.
func (ix *Index) Len() int { return len(ix.byName) }

// Add registers tools, replacing any of the same name.
func (ix *Index) Add(docs ...Doc) {
	defer ix.updateLogDF()
	if len(ix.byName) == 0 {
		ix.byName = make(map[string]int32, len(docs)) // a build: no rehashing as it fills
	}
	ix.docs = slices.Grow(ix.docs, len(docs))
	ix.lens = slices.Grow(ix.lens, len(docs))
	cuts := cutAll(docs)
	ix.skip(cuts)
	ix.number(cuts)
	for j, d := range docs {
		if len(cuts) > 0 {
			if len(cuts) > 1 && j == cuts[1].lo {
				cuts = cuts[1:]
			}
			ix.fieldsOfCut(cuts[0], j-cuts[0].lo)
		} else {
			ix.fieldsOf(d)
		}
		if i, ok := ix.byName[d.Name]; ok {
			ix.unindex(i)
			ix.index(i, d.Name, false)
			continue
		}
		var i int32
		last := len(ix.free) == 0
		if !last {
			i, ix.free = ix.free[len(ix.free)-1], ix.free[:len(ix.free)-1]
		} else {
			i = int32(len(ix.docs))
			ix.docs = append(ix.docs, doc{})
			ix.lens = append(ix.lens, [numFields]uint32{})
		}
		ix.byName[d.Name] = i
		ix.index(i, d.Name, last)
	}
}

// Remove drops the named tools; unknown names are ignored.
func (ix *Index) Remove(names ...string) {
	defer ix.updateLogDF()
	for _, n := range names {
		if i, ok := ix.byName[n]; ok {
			ix.unindex(i)
			delete(ix.byName, n)
			ix.free = append(ix.free, i)
		}
	}
}

// changed notes that t's document frequency changed.
func (ix *Index) changed(t int32) {
	b := &ix.build
	if int(t) >= len(b.stale) {
		b.stale = append(b.stale, make([]bool, len(ix.post)-len(b.stale))...)
	}
	if !b.stale[t] {
		b.stale[t] = true
		b.changed = append(b.changed, t)
	}
}

// updateLogDF brings logDF up to date for the terms a change touched: once
// per term, not once per posting, in a batch.
func (ix *Index) updateLogDF() {
	b := &ix.build
	for _, t := range b.changed {
		ix.logDF[t] = math.Log(float64(len(ix.post[t])) + 0.5)
		b.stale[t] = false
	}
	b.changed = b.changed[:0]
}

// fieldsOf puts the terms of d's fields in the build scratch, numbering
// new ones.
func (ix *Index) fieldsOf(d Doc) {
	b := &ix.build
	b.fields[fieldName] = ix.termsOf(d.Name, b.fields[fieldName][:0])
	b.fields[fieldDesc] = ix.termsOf(d.Description, b.fields[fieldDesc][:0])
	ps := b.fields[fieldParam][:0]
	for _, p := range d.Params {
		ps = ix.termsOf(p.Name, ps)
		ps = ix.termsOf(p.Description, ps)
	}
	b.fields[fieldParam] = ps
	ph := ix.pairsOf(b.fields[fieldName], b.fields[fieldPhrase][:0])
	b.fields[fieldPhrase] = ix.pairsOf(b.fields[fieldDesc], ph)
}

// index puts the doc named name, whose terms fieldsOf left in the build
// scratch, in slot i, which holds nothing; last says i is above every slot
// that holds a doc, so its postings go at the end of their lists.
func (ix *Index) index(i int32, name string, last bool) {
	ix.version++
	b := &ix.build
	if n := len(ix.post); len(b.slot) < n {
		b.slot = append(b.slot, make([]int32, n-len(b.slot))...)
	}
	b.list, b.ids = b.list[:0], b.ids[:0]
	for f := range numFields {
		ix.lens[i][f] = uint32(len(b.fields[f]))
		ix.fieldSum[f] += len(b.fields[f])
		for _, t := range b.fields[f] {
			if b.slot[t] == 0 {
				b.list = append(b.list, posting{doc: i})
				b.ids = append(b.ids, t)
				b.slot[t] = int32(len(b.list))
			}
			if p := &b.list[b.slot[t]-1]; p.tf[f] < math.MaxUint16 {
				p.tf[f]++
			}
		}
	}
	for k, t := range b.ids {
		b.slot[t] = 0
		if last {
			ix.post[t] = append(ix.post[t], b.list[k])
		} else {
			ix.post[t] = insertSorted(ix.post[t], b.list[k], postingDoc)
		}
		ix.changed(t)
	}
	ix.posted += len(b.list)
	var names []int32
	for _, t := range b.fields[fieldName] {
		if !slices.Contains(names, t) {
			names = append(names, t)
			if last {
				ix.byNameTerm[t] = append(ix.byNameTerm[t], i)
			} else {
				ix.byNameTerm[t] = insertSorted(ix.byNameTerm[t], i, self)
			}
		}
	}
	ix.docs[i] = doc{name: name, terms: slices.Clone(b.ids), nameTerms: names}
}

// unindex takes slot i's postings out of the index and empties it.
func (ix *Index) unindex(i int32) {
	ix.version++
	d := ix.docs[i]
	for _, t := range d.terms {
		ix.post[t] = deleteSorted(ix.post[t], i, postingDoc)
		ix.changed(t)
	}
	ix.posted += len(d.terms)
	for _, t := range d.nameTerms {
		ix.byNameTerm[t] = deleteSorted(ix.byNameTerm[t], i, self)
	}
	for f := range numFields {
		ix.fieldSum[f] -= int(ix.lens[i][f])
	}
	ix.lens[i] = [numFields]uint32{}
	ix.docs[i] = doc{}
}

func postingDoc(p posting) int32 { return p.doc }
func self(d int32) int32         { return d }

// insertSorted puts x into s, sorted by key.
func insertSorted[T any](s []T, x T, key func(T) int32) []T {
	j, _ := slices.BinarySearchFunc(s, key(x), func(e T, k int32) int { return cmp.Compare(key(e), k) })
	return slices.Insert(s, j, x)
}

// deleteSorted removes the entry of s whose key is k, if any.
func deleteSorted[T any](s []T, k int32, key func(T) int32) []T {
	if j, ok := slices.BinarySearchFunc(s, k, func(e T, k int32) int { return cmp.Compare(key(e), k) }); ok {
		return slices.Delete(s, j, j+1)
	}
	return s
}

// termsOf appends the terms of text to dst, numbering new ones: its words,
// minus stopwords and bare numbers, stemmed.
func (ix *Index) termsOf(text string, dst []int32) []int32 {
	ix.build.word = eachWord(text, ix.build.word, func(w []byte) {
		t, ok := ix.wordTerm[string(w)]
		if !ok {
			ws := string(w)
			t = -1
			if !stopwords[ws] && !isNumber(ws) {
				t = ix.word(stem(ws))
			}
			ix.wordTerm[ws] = t
		}
		if t >= 0 {
			dst = append(dst, t)
		}
	})
	return dst
}

// word returns the term of a stem, numbering it if new.
func (ix *Index) word(s string) int32 {
	if t, ok := ix.vocab[s]; ok {
		return t
	}
	t := ix.newTerm(s)
	ix.vocab[s] = t
	ix.synTerms[t] = ix.synonymTerms(s)
	for _, o := range synonyms[s] {
		if u := ix.lookup(o); u >= 0 {
			ix.synTerms[u] = ix.synonymTerms(o)
		}
	}
	return t
}

// synonymTerms returns the terms of a stem's synonyms that some tool has, in
// the order of synonyms.
func (ix *Index) synonymTerms(stem string) []int32 {
	var out []int32
	for _, o := range synonyms[stem] {
		if u := ix.lookup(o); u >= 0 {
			out = append(out, u)
		}
	}
	return out
}

// pairsOf appends the adjacent pairs of ts to dst ("current weather"
// prefers get_current_weather over a tool with the two words far apart).
func (ix *Index) pairsOf(ts, dst []int32) []int32 {
	for k := 1; k < len(ts); k++ {
		dst = append(dst, ix.pair([2]int32{ts[k-1], ts[k]}))
	}
	return dst
}

// pair returns the term of an adjacent pair of terms, numbering it if new.
func (ix *Index) pair(key [2]int32) int32 {
	t, ok := ix.pairIDs[key]
	if !ok {
		t = ix.newTerm("")
		ix.pairIDs[key] = t
	}
	return t
}

func (ix *Index) newTerm(text string) int32 {
	ix.post = append(ix.post, nil)
	ix.logDF = append(ix.logDF, 0)
	ix.impacts = append(ix.impacts, new(atomic.Pointer[impactCache]))
	ix.byNameTerm = append(ix.byNameTerm, nil)
	ix.termText = append(ix.termText, text)
	ix.synTerms = append(ix.synTerms, nil)
	return int32(len(ix.post) - 1)
}
