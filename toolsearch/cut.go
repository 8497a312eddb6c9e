package toolsearch

import (
	"runtime"
	"slices"
	"sync"
)

// cutFrom is how many docs each processor must get before an Add cuts
// their words out over them: the words and their lookups were half of
// building an index of 50,000 tools. A variable only so tests can cut small
// batches.
var cutFrom = 1024

// cut is the words and adjacent pairs of a contiguous run of an Add's docs
// (from lo), numbered locally by the goroutine that cut them, so no index
// state is read or written; number then numbers them as the index does, doc
// by doc in the Add's order, and so gives every term the number that cutting
// the docs one by one would.
type cut struct {
	lo    int
	words []string // by local word: its lowercase form
	stems []string // by local word: its stem
	// skipped are the stopwords and numbers met, which have no term: the
	// index remembers them so, as one doc at a time would, and a search
	// need not look them up again.
	skipped []string
	pairs   [][2]int32 // by local pair: its two local words
	// toks holds the run's fields, doc after doc: local words for the
	// name, description and parameters, local pairs for the phrase field,
	// until number rewrites them as the index's terms; ends[k][f] is where
	// doc k's field f ends in it.
	toks []int32
	ends [][numFields]int32
	// term and pairTerm map local words and pairs to the index's terms, -1
	// until number meets them.
	term, pairTerm []int32
}

// cutAll cuts docs into one run per processor, in goroutines it waits for,
// or returns nil for a batch too small to be worth it.
func cutAll(docs []Doc) []*cut {
	workers := min(runtime.GOMAXPROCS(0), len(docs)/cutFrom)
	if workers <= 1 {
		return nil
	}
	cuts := make([]*cut, workers)
	var wg sync.WaitGroup
	for w := range cuts {
		lo, hi := w*len(docs)/workers, (w+1)*len(docs)/workers
		cuts[w] = &cut{lo: lo}
		wg.Go(func() { cuts[w].run(docs[lo:hi]) })
	}
	wg.Wait()
	return cuts
}

// skip remembers the words the cuts skipped as having no term.
func (ix *Index) skip(cuts []*cut) {
	for _, c := range cuts {
		for _, w := range c.skipped {
			ix.wordTerm[w] = -1
		}
	}
}

// run cuts docs as fieldsOf would: the same words, skipped and stemmed the
// same way, in the same order.
func (c *cut) run(docs []Doc) {
	words := map[string]int32{}
	pairs := map[[2]int32]int32{}
	var buf []byte
	text := func(s string) {
		buf = eachWord(s, buf, func(w []byte) {
			id, ok := words[string(w)]
			if !ok {
				ws := string(w)
				id = -1
				if !stopwords[ws] && !isNumber(ws) {
					id = int32(len(c.words))
					c.words = append(c.words, ws)
					c.stems = append(c.stems, stem(ws))
				} else {
					c.skipped = append(c.skipped, ws)
				}
				words[ws] = id
			}
			if id >= 0 {
				c.toks = append(c.toks, id)
			}
		})
	}
	pairsOf := func(lo, hi int) {
		for k := lo + 1; k < hi; k++ {
			key := [2]int32{c.toks[k-1], c.toks[k]}
			id, ok := pairs[key]
			if !ok {
				id = int32(len(c.pairs))
				c.pairs = append(c.pairs, key)
				pairs[key] = id
			}
			c.toks = append(c.toks, id)
		}
	}
	c.ends = make([][numFields]int32, len(docs))
	for k, d := range docs {
		start := len(c.toks)
		text(d.Name)
		name := len(c.toks)
		text(d.Description)
		desc := len(c.toks)
		for _, p := range d.Params {
			text(p.Name)
			text(p.Description)
		}
		param := len(c.toks)
		pairsOf(start, name)
		pairsOf(name, desc)
		c.ends[k] = [numFields]int32{int32(name), int32(desc), int32(param), int32(len(c.toks))}
	}
	c.term = make([]int32, len(c.words))
	c.pairTerm = make([]int32, len(c.pairs))
	for i := range c.term {
		c.term[i] = -1
	}
	for i := range c.pairTerm {
		c.pairTerm[i] = -1
	}
}

// number turns the cuts' local words and pairs into the index's terms, in
// place, doc by doc in the Add's order, numbering new terms as fieldsOf
// would; then it grows each term's postings once by the docs that hold it,
// where appending them one by one regrew the lists (a tenth of a build).
func (ix *Index) number(cuts []*cut) {
	var held []int32 // by term: how many of the batch's docs hold it
	var seen []int32 // by term: the last doc (+1) that counted it
	doc := int32(0)
	for _, c := range cuts {
		start := int32(0)
		for k := range c.ends {
			docStart := start
			for f := range numFields {
				end := c.ends[k][f]
				for p, id := range c.toks[start:end] {
					if f == fieldPhrase {
						c.toks[start+int32(p)] = ix.termOfPair(c, id)
					} else {
						c.toks[start+int32(p)] = ix.termOfWord(c, id)
					}
				}
				start = end
			}
			doc++
			if n := len(ix.post); len(held) < n {
				held = append(held, make([]int32, n-len(held))...)
				seen = append(seen, make([]int32, n-len(seen))...)
			}
			for _, t := range c.toks[docStart:start] {
				if seen[t] != doc {
					seen[t] = doc
					held[t]++
				}
			}
		}
	}
	for t, n := range held {
		if n > 0 {
			ix.post[t] = slices.Grow(ix.post[t], int(n))
		}
	}
}

// fieldsOfCut is fieldsOf for doc k of c's run, once number has run.
func (ix *Index) fieldsOfCut(c *cut, k int) {
	b := &ix.build
	start := int32(0)
	if k > 0 {
		start = c.ends[k-1][numFields-1]
	}
	for f := range numFields {
		end := c.ends[k][f]
		b.fields[f], start = append(b.fields[f][:0], c.toks[start:end]...), end
	}
}

// termOfWord returns the term of c's local word id, numbering it as
// termsOf would.
func (ix *Index) termOfWord(c *cut, id int32) int32 {
	if t := c.term[id]; t >= 0 {
		return t
	}
	ws := c.words[id]
	t, ok := ix.wordTerm[ws]
	if !ok {
		t = ix.word(c.stems[id])
		ix.wordTerm[ws] = t
	}
	c.term[id] = t
	return t
}

// termOfPair returns the term of c's local pair id, whose words its doc's
// word fields have already numbered.
func (ix *Index) termOfPair(c *cut, id int32) int32 {
	if t := c.pairTerm[id]; t >= 0 {
		return t
	}
	p := c.pairs[id]
	t := ix.pair([2]int32{c.term[p[0]], c.term[p[1]]})
	c.pairTerm[id] = t
	return t
}
