package toolsearch

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// A batch large enough to be cut over the processors builds the index that
// adding its docs one at a time builds: the same terms with the same
// numbers, the same postings, lengths and names. Docs repeat names (a later
// one replaces an earlier one), words, stopwords, numbers and non-ASCII
// text, and the index may already hold tools.
func TestCutIsSequential(t *testing.T) {
	defer func(n, procs int) { cutFrom = n; runtime.GOMAXPROCS(procs) }(cutFrom, runtime.GOMAXPROCS(3))
	cutFrom = 16
	words := append(slices.Clone(nameWords), "the", "of", "42", "3.5", "Grüße", "HTTPServer", "getWeather")
	rapid.Check(t, func(t *rapid.T) {
		text := func(label string, max int) string {
			s := ""
			for range rapid.IntRange(0, max).Draw(t, label+"s") {
				s += rapid.SampledFrom(words).Draw(t, label) + rapid.SampledFrom([]string{" ", "_", ", "}).Draw(t, label+"sep")
			}
			return s
		}
		var before []Doc
		for i := range rapid.IntRange(0, 5).Draw(t, "before") {
			before = append(before, Doc{Name: fmt.Sprintf("old%d", i), Description: text("old", 6)})
		}
		// One, two or three runs, of uneven sizes.
		n := rapid.IntRange(cutFrom, 4*cutFrom+3).Draw(t, "n")
		docs := make([]Doc, n)
		for i := range docs {
			docs[i] = Doc{
				Name:        text("name", 3) + fmt.Sprint(rapid.IntRange(0, n).Draw(t, "id")),
				Description: text("desc", 8),
				Params:      []Param{{Name: text("param", 2), Description: text("pdesc", 4)}},
			}
		}
		cut, one := NewIndex(before), NewIndex(before)
		cut.Add(docs...)
		for _, d := range docs {
			one.Add(d)
		}
		// Every part of the index's state, by name.
		parts := []string{"vocab", "pairs", "words", "term texts", "synonyms", "postings", "log df",
			"name terms", "docs", "lengths", "field sums", "names"}
		state := func(ix *Index) []any {
			return []any{ix.vocab, ix.pairIDs, ix.wordTerm, ix.termText, ix.synTerms, ix.post, ix.logDF,
				ix.byNameTerm, ix.docs, ix.lens, ix.fieldSum, ix.byName}
		}
		got, want := state(cut), state(one)
		for i, part := range parts {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("%s differ between a cut batch and one doc at a time", part)
			}
		}
	})
}
