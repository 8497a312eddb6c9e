package toolsearch

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// An index changed one tool at a time (added, replaced, removed) ranks
// exactly as one built at once from the tools it ends with: same hits, same
// scores, same names found.
func TestIncrementalIsFresh(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ix := NewIndex(nil)
		held := map[string]Doc{}
		for i := range rapid.IntRange(1, 60).Draw(t, "ops") {
			names := slices.Sorted(maps.Keys(held))
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 2 && len(names) > 0:
				n := rapid.SampledFrom(names).Draw(t, "remove")
				ix.Remove(n)
				delete(held, n)
			case op < 4 && len(names) > 0:
				d := genDoc(t, i)
				d.Name = rapid.SampledFrom(names).Draw(t, "replace")
				ix.Add(d)
				held[d.Name] = d
			default:
				d := genDoc(t, i)
				ix.Add(d)
				held[d.Name] = d
			}
		}
		fresh := NewIndex(slices.Collect(maps.Values(held)))
		if ix.Len() != fresh.Len() {
			t.Fatalf("Len = %d, fresh %d", ix.Len(), fresh.Len())
		}
		queries := []string{rapid.SampledFrom(nameWords).Draw(t, "q1") + " " + rapid.SampledFrom(nameWords).Draw(t, "q2") + ". Then " + rapid.SampledFrom(nameWords).Draw(t, "q3")}
		for n := range held {
			queries = append(queries, n)
			break
		}
		for _, q := range queries {
			if a, b := ix.Search(q, 10), fresh.Search(q, 10); !slices.Equal(a, b) {
				t.Fatalf("Search(%q):\nchanged one at a time %v\nbuilt at once         %v", q, a, b)
			}
			if a, b := ix.NamedIn(q, 5), fresh.NamedIn(q, 5); !slices.Equal(a, b) {
				t.Fatalf("NamedIn(%q): %v, built at once %v", q, a, b)
			}
		}
	})
}

// Registering one tool writes that tool's postings and no other, however
// many tools the index holds: it is not rebuilt. posted counts every
// posting written or removed.
func TestAddWritesOnlyItsOwnPostings(t *testing.T) {
	tide := Doc{Name: "tide_table", Description: "High and low tide times for a harbour, by day.",
		Params: []Param{{Name: "harbour_code", Description: "UN/LOCODE of the harbour"}}}
	own := NewIndex([]Doc{tide}).posted
	moon := Doc{Name: "tide_table", Description: "Moon phases."}
	ownMoon := NewIndex([]Doc{moon}).posted
	for _, n := range []int{100, 10_000} {
		docs := make([]Doc, n)
		for i := range docs {
			docs[i] = Doc{Name: fmt.Sprintf("tool_%d", i), Description: fmt.Sprintf("Report reading %d of the harbour gauge for a city", i),
				Params: []Param{{Name: "city", Description: "the city"}}}
		}
		ix := NewIndex(docs)
		if total := postings(ix); ix.posted != total {
			t.Fatalf("%d tools: posted %d, the index holds %d postings", n, ix.posted, total)
		}
		for _, step := range []struct {
			what string
			do   func()
			want int
		}{
			{"add", func() { ix.Add(tide) }, own},
			{"replace", func() { ix.Add(moon) }, own + ownMoon},
			{"remove", func() { ix.Remove(moon.Name) }, ownMoon},
		} {
			before := ix.posted
			step.do()
			if got := ix.posted - before; got != step.want {
				t.Errorf("%d tools, %s one: %d postings written or removed, want %d", n, step.what, got, step.want)
			}
		}
		if ix.Len() != n || postings(ix) != ix.posted-2*own-2*ownMoon {
			t.Errorf("%d tools: Len %d, %d postings after adding and removing one", n, ix.Len(), postings(ix))
		}
	}
}

func postings(ix *Index) int {
	n := 0
	for _, p := range ix.post {
		n += len(p)
	}
	return n
}

// The synonyms kept by term are always those a search would look up by name,
// whatever order their words arrive in, one tool at a time.
func TestSynonymTermsKept(t *testing.T) {
	words := []string{"weather", "forecast", "temperature", "find", "search", "lookup", "movie", "film", "cinema", "mail", "email", "other"}
	rapid.Check(t, func(t *rapid.T) {
		ix := NewIndex(nil)
		for i := range rapid.IntRange(1, 12).Draw(t, "tools") {
			ix.Add(Doc{Name: fmt.Sprintf("tool%d", i), Description: rapid.SampledFrom(words).Draw(t, "w1") + " " + rapid.SampledFrom(words).Draw(t, "w2")})
			for term, text := range ix.termText {
				if text == "" {
					continue
				}
				if got, want := ix.synTerms[term], ix.synonymTerms(text); !slices.Equal(got, want) {
					t.Fatalf("after tool %d, synonyms of %q = %v, looked up by name %v", i, text, got, want)
				}
			}
		}
	})
}
