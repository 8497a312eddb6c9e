package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
)

// Search limits.
const (
	DefaultSearchLimit = 5
	MaxSearchLimit     = 20
)

// Hit is one search result.
type Hit struct {
	Memory
	Score float64 `json:"score"`
}

// Search finds the tenant's active memories that share words with query,
// best first: each query word counts by how rare it is among the tenant's
// memories (a word in every memory says little), a word that starts the
// other (garden, gardening) counts less than an exact one, and the whole
// query found as a phrase adds a bonus. Ties go to the newer memory. Waiting
// and undone memories are never found: the model uses only what is active.
// A new memory is found at once (the memory map, by contrast, changes once a
// day). k <= 0 means DefaultSearchLimit; k is capped at MaxSearchLimit.
func (s *Store) Search(ctx context.Context, tenant, query string, k int) ([]Hit, error) {
	if k <= 0 {
		k = DefaultSearchLimit
	}
	k = min(k, MaxSearchLimit)
	q := queryWords(query)
	if len(q) == 0 {
		return nil, nil
	}
	mems, err := s.List(ctx, tenant, StateActive)
	if err != nil {
		return nil, fmt.Errorf("search memories: %w", err)
	}
	docs := make([][]string, len(mems))
	df := map[string]int{}
	for i, m := range mems {
		docs[i] = words(m.Text)
		for _, w := range q {
			if match(w, docs[i]) > 0 {
				df[w]++
			}
		}
	}
	phrase := strings.Join(words(query), " ")
	var hits []Hit
	for i, m := range mems {
		var score float64
		for _, w := range q {
			if f := match(w, docs[i]); f > 0 {
				score += f * math.Log(1+float64(len(mems))/float64(df[w]))
			}
		}
		if score == 0 {
			continue
		}
		if len(q) > 1 && strings.Contains(strings.Join(docs[i], " "), phrase) {
			score += 1
		}
		hits = append(hits, Hit{Memory: m, Score: score})
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// match is 1 for an exact word, 0.6 when one word starts the other and the
// shorter has at least four letters (a cheap stand-in for stemming), else 0.
func match(w string, doc []string) float64 {
	best := 0.0
	for _, d := range doc {
		if d == w {
			return 1
		}
		short, long := d, w
		if len(short) > len(long) {
			short, long = long, short
		}
		if len([]rune(short)) >= 4 && strings.HasPrefix(long, short) {
			best = 0.6
		}
	}
	return best
}

// words splits text into lower-case words of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// queryWords are the query's distinct words without stopwords, unless only
// stopwords were asked for.
func queryWords(query string) []string {
	all := words(query)
	var out []string
	for _, w := range all {
		if !stopwords[w] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		for _, w := range all {
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// stopwords are English function words that say nothing of a memory's topic.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or but of to in on at for with by from as is are was were be been
		it its this that these those i me my mine you your he she him her his they them their we us our
		do does did not no yes so if then than there here what which who whom when where why how
		have has had will would can could should shall may might must about into over under again
		very just also too all any some more most other such only own same s t am being`) {
		stopwords[w] = true
	}
}
