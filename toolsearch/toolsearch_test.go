package toolsearch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestWords(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []string
	}{
		"snake case":        {"get_current_weather", []string{"get", "current", "weather"}},
		"camel case":        {"getCurrentWeather", []string{"get", "current", "weather"}},
		"pascal case":       {"GetWeather", []string{"get", "weather"}},
		"dotted":            {"math.factorial", []string{"math", "factorial"}},
		"acronym then word": {"HTTPServer", []string{"http", "server"}},
		"digits stay":       {"mp3_player", []string{"mp3", "player"}},
		"digit then hump":   {"Weather_1_GetWeather", []string{"weather", "1", "get", "weather"}},
		"sentence":          {"What's the forecast?", []string{"what", "s", "the", "forecast"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := words(c.in); !slices.Equal(got, c.want) {
				t.Errorf("words(%q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}

// The ASCII path of eachWord cuts words as the rune path does.
func TestWordsASCIIAsUnicode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.SampledFrom([]rune("aZ9_ .-/AbCDeFgh1"))).Draw(t, "s")
		if got, want := words(s), unicodeWords(s); !slices.Equal(got, want) {
			t.Fatalf("words(%q) = %q, by runes %q", s, got, want)
		}
	})
}

func TestStem(t *testing.T) {
	// Final stems from the worked examples in Porter (1980).
	exact := map[string]string{
		"caresses": "caress", "ponies": "poni", "cats": "cat", "hopping": "hop",
		"motoring": "motor", "happy": "happi", "generalizations": "gener",
		"agreed": "agre", "filing": "file",
	}
	for in, want := range exact {
		t.Run(in, func(t *testing.T) {
			if got := stem(in); got != want {
				t.Errorf("stem(%q) = %q, want %q", in, got, want)
			}
		})
	}
	// What ranking relies on: inflections of one verb meet.
	same := [][]string{
		{"calculate", "calculates", "calculating", "calculated", "calculation"},
		{"remember", "remembers", "remembering"},
		{"search", "searches", "searching"},
	}
	for _, g := range same {
		t.Run(g[0]+" family", func(t *testing.T) {
			for _, w := range g[1:] {
				if stem(w) != stem(g[0]) {
					t.Errorf("stem(%q) = %q, stem(%q) = %q; want equal", w, stem(w), g[0], stem(g[0]))
				}
			}
		})
	}
}

// registry is a small daemon-like set of tools for reasoned ranking cases.
var registry = []Doc{
	{Name: "get_weather", Description: "Current conditions for a city.", Params: []Param{{"city", "City name"}, {"unit", "celsius or fahrenheit"}}},
	{Name: "memory_add", Description: "Store a fact about the person for later chats.", Params: []Param{{"fact", "The fact to keep"}}},
	{Name: "remember", Description: "Save something the person asked to keep.", Params: []Param{{"text", "What to keep"}}},
	{Name: "web_fetch", Description: "Download a page and return its text.", Params: []Param{{"url", "Address of the page"}}},
	{Name: "browser_open", Description: "Open a page in the browser and read it.", Params: []Param{{"url", "Page to open"}}},
	{Name: "send_email", Description: "Send a mail message.", Params: []Param{{"to", "Recipient"}, {"subject", "Subject line"}}},
	{Name: "calendar.createEvent", Description: "Add an appointment to the calendar.", Params: []Param{{"when", "Start time"}}},
	{Name: "StockPrice", Description: "Latest quote for a ticker symbol.", Params: []Param{{"symbol", "Ticker"}}},
	{Name: "flight_search", Description: "Find flights between two airports.", Params: []Param{{"from", "Origin airport"}, {"to", "Destination airport"}}},
	{Name: "hotel_search", Description: "Find hotels in a city.", Params: []Param{{"city", "City"}}},
	{Name: "list_files", Description: "List the files in a directory.", Params: []Param{{"path", "Directory"}}},
	{Name: "sum", Description: "Add two numbers.", Params: []Param{{"a", "First"}, {"b", "Second"}}},
}

func rank(hits []Hit, name string) int {
	for i, h := range hits {
		if h.Name == name {
			return i
		}
	}
	return -1
}

func TestSearch(t *testing.T) {
	ix := NewIndex(registry)
	cases := map[string]struct {
		query string
		want  string
		top   int // want must be within the first top hits
	}{
		// "forecast" is not in get_weather's text: only the synonym links them.
		"synonym forecast means weather": {"what's the forecast for Lisbon", "get_weather", 1},
		// "mail" appears in send_email's description but "email" in its name.
		"synonym email":                 {"write an email to Ann", "send_email", 1},
		"camel case name split":         {"stock price of ACME", "StockPrice", 1},
		"dotted and camel name split":   {"create an event tomorrow", "calendar.createEvent", 1},
		"stemming flights":              {"searching for cheap flights", "flight_search", 1},
		"address means the web":         {"what does example.com say", "web_fetch", 2},
		"exact identifier in a request": {"please call calendar.createEvent now", "calendar.createEvent", 1},
		"whole query is a plain name":   {"sum", "sum", 1},
		"parameter words count":         {"temperature in fahrenheit please", "get_weather", 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			hits := ix.Search(c.query, 5)
			if r := rank(hits, c.want); r < 0 || r >= c.top {
				t.Errorf("Search(%q): %s at rank %d, want < %d; hits %v", c.query, c.want, r, c.top, hits)
			}
		})
	}
}

// A request with two asks gets a tool for each near the top, even though
// one ask is wordier than the other.
func TestSearchSeveralAsks(t *testing.T) {
	ix := NewIndex(registry)
	q := "Find me a flight from Lisbon to Paris between the two airports on Friday morning. Then find a hotel."
	hits := ix.Search(q, 3)
	for _, want := range []string{"flight_search", "hotel_search"} {
		if rank(hits, want) < 0 {
			t.Errorf("Search(%q) = %v, want %s in the top 3", q, hits, want)
		}
	}
}

func TestSearchEdges(t *testing.T) {
	ix := NewIndex(registry)
	if got := ix.Search("weather", 0); got != nil {
		t.Errorf("k=0: got %v, want nil", got)
	}
	if got := ix.Search("the of and", 5); len(got) != 0 {
		t.Errorf("stopwords only: got %v, want nothing", got)
	}
	if got := NewIndex(nil).Search("weather", 5); got != nil {
		t.Errorf("empty index: got %v", got)
	}
	if got := ix.Search("weather city", 2); len(got) > 2 {
		t.Errorf("k=2: got %d hits", len(got))
	}
}

func TestNamedIn(t *testing.T) {
	ix := NewIndex(registry)
	cases := map[string]struct {
		msg     string
		limit   int
		want    []string // each must be present
		notWant []string
	}{
		"remember names remember first": {
			msg: "Please remember that my favourite tea is oolong", limit: 3,
			want: []string{"remember", "memory_add"},
		},
		"address names the web tools": {
			msg: "What does the front page of example.com say?", limit: 3,
			want: []string{"web_fetch", "browser_open"},
		},
		"browser by name": {msg: "open it in the browser", limit: 3, want: []string{"browser_open"}},
		"generic words name nothing": {
			msg: "get me the list", limit: 3, notWant: []string{"list_files"},
		},
		"limit respected": {msg: "remember this page at https://example.org", limit: 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := ix.NamedIn(c.msg, c.limit)
			if len(got) > c.limit {
				t.Errorf("NamedIn returned %d > limit %d: %v", len(got), c.limit, got)
			}
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("NamedIn(%q) = %v, want %s", c.msg, got, w)
				}
			}
			for _, w := range c.notWant {
				if slices.Contains(got, w) {
					t.Errorf("NamedIn(%q) = %v, must not name %s", c.msg, got, w)
				}
			}
		})
	}
	// The tool whose whole name was said beats one reached by a synonym.
	if got := ix.NamedIn("Please remember that my favourite tea is oolong", 3); len(got) == 0 || got[0] != "remember" {
		t.Errorf("remember should come first, got %v", got)
	}
}

func TestAddRemove(t *testing.T) {
	ix := NewIndex(registry[:2])
	if ix.Len() != 2 {
		t.Fatalf("Len = %d, want 2", ix.Len())
	}
	ix.Add(Doc{Name: "tide_table", Description: "High and low tide times for a harbour."})
	if r := rank(ix.Search("when is high tide", 3), "tide_table"); r != 0 {
		t.Errorf("added tool at rank %d, want 0", r)
	}
	// Re-adding a name replaces the tool rather than duplicating it.
	ix.Add(Doc{Name: "tide_table", Description: "Moon phases."})
	if ix.Len() != 3 {
		t.Errorf("Len after replace = %d, want 3", ix.Len())
	}
	if r := rank(ix.Search("harbour", 3), "tide_table"); r >= 0 {
		t.Errorf("replaced description still matches")
	}
	ix.Remove("tide_table", "no_such_tool")
	if ix.Len() != 2 || rank(ix.Search("moon phases", 3), "tide_table") >= 0 {
		t.Errorf("removed tool still present (Len %d)", ix.Len())
	}
	if r := rank(ix.Search("weather", 3), "get_weather"); r != 0 {
		t.Errorf("remaining tool lost after Remove: rank %d", r)
	}
}

var nameWords = []string{"get", "weather", "city", "stock", "price", "send", "mail", "file", "list", "book", "flight", "hotel", "memory", "note", "search", "image"}

func genDoc(t *rapid.T, i int) Doc {
	n := rapid.IntRange(1, 3).Draw(t, "nwords")
	name := ""
	for j := range n {
		w := rapid.SampledFrom(nameWords).Draw(t, "w")
		if j > 0 {
			name += rapid.SampledFrom([]string{"_", ".", ""}).Draw(t, "sep")
		}
		name += w
	}
	desc := ""
	for range rapid.IntRange(0, 8).Draw(t, "ndesc") {
		desc += rapid.SampledFrom(nameWords).Draw(t, "d") + " "
	}
	return Doc{Name: fmt.Sprintf("%s%d", name, i), Description: desc}
}

// Properties: a request that is exactly a tool's name finds that tool first;
// the ranking does not depend on the order tools were registered in.
func TestSearchProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "n")
		docs := make([]Doc, n)
		for i := range docs {
			docs[i] = genDoc(t, i)
		}
		ix := NewIndex(docs)
		pick := docs[rapid.IntRange(0, n-1).Draw(t, "pick")]
		if hits := ix.Search(pick.Name, 5); len(hits) == 0 || hits[0].Name != pick.Name {
			t.Fatalf("Search(%q) = %v, want it first", pick.Name, hits)
		}
		shuffled := slices.Clone(docs)
		rand.New(rand.NewPCG(uint64(n), 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		q := rapid.SampledFrom(nameWords).Draw(t, "q1") + " " + rapid.SampledFrom(nameWords).Draw(t, "q2")
		a, b := ix.Search(q, 10), NewIndex(shuffled).Search(q, 10)
		if len(a) != len(b) {
			t.Fatalf("order changed result size: %v vs %v", a, b)
		}
		for i := range a {
			if a[i].Name != b[i].Name {
				t.Fatalf("order changed ranking for %q:\n%v\n%v", q, a, b)
			}
		}
	})
}

// A tool with no description is found by its name: an empty field's weight
// (1/(1-b), +Inf for the description's b = 1) once made its score NaN, and
// the tool never came back.
func TestNoDescriptionIsFound(t *testing.T) {
	for _, docs := range [][]Doc{
		{{Name: "get_weather"}},
		{{Name: "get_weather"}, {Name: "send_mail", Description: "Send an email."}},
	} {
		hits := NewIndex(docs).Search("weather", 3)
		if len(hits) == 0 || hits[0].Name != "get_weather" || math.IsNaN(hits[0].Score) {
			t.Errorf("Search(weather) over %v = %v, want get_weather first with a score", docs, hits)
		}
	}
}
