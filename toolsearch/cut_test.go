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
		for _, c := range []struct {
			what      string
			cut, want any
		}{
			{"vocab", cut.vocab, one.vocab},
			{"pairs", cut.pairIDs, one.pairIDs},
			{"words", cut.wordTerm, one.wordTerm},
			{"term texts", cut.termText, one.termText},
			{"synonyms", cut.synTerms, one.synTerms},
			{"postings", cut.post, one.post},
			{"log df", cut.logDF, one.logDF},
			{"name terms", cut.byNameTerm, one.byNameTerm},
			{"docs", cut.docs, one.docs},
			{"lengths", cut.lens, one.lens},
			{"field sums", cut.fieldSum, one.fieldSum},
			{"names", cut.byName, one.byName},
		} {
			if !reflect.DeepEqual(c.cut, c.want) {
				t.Fatalf("%s differ between a cut batch and one doc at a time", c.what)
			}
		}
	})
}
