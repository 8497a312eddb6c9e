package openai

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestTailAppendsAsEncoded compares the body's closing fields appended by
// hand with their reflective encoding, for named edge cases and for
// settings drawn at random.
func TestTailAppendsAsEncoded(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	slot := int64(3)
	cases := map[string]wireTail{
		"empty":          {},
		"stream options": {StreamOptions: &wireStreamOpts{IncludeUsage: true}},
		"everything": {MaxCompletionTokens: 4096, MaxTokens: 7, StreamOptions: &wireStreamOpts{}, Temperature: f(0.7), TopP: f(1),
			Stop: []string{"a", "b"}, ReasoningEffort: "low", PromptCacheKey: "chat-1", CachePrompt: true, IDSlot: &slot, ParallelToolCalls: new(false)},
		"negative ints":      {MaxTokens: -1, IDSlot: new(int64(-9))},
		"zero float":         {Temperature: f(0), TopP: f(math.Copysign(0, -1))},
		"tiny float":         {Temperature: f(1e-7), TopP: f(5e-324)},
		"huge float":         {Temperature: f(1e21), TopP: f(-1.5e300)},
		"just below e":       {Temperature: f(1e-6), TopP: f(999999999999999999999)},
		"escapes":            {Stop: []string{"\n", `"`, `\`, "<&>", "\u2028", "é", "\x7f", "\xff", ""}, ReasoningEffort: "\t", PromptCacheKey: "ключ"},
		"one empty stop":     {Stop: []string{""}},
		"empty stop list":    {Stop: []string{}},
		"parallel calls set": {ParallelToolCalls: new(true)},
	}
	// A field added to wireTail and not to appendFields fails here: the
	// case "everything" must set every one.
	all := reflect.ValueOf(cases["everything"])
	for i := range all.NumField() {
		if all.Field(i).IsZero() {
			t.Fatalf("the case \"everything\" leaves wireTail.%s unset", all.Type().Field(i).Name)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		cases["random "+string(rune('a'+i%26))+string(rune('a'+i/26))] = randomTail(r)
	}
	for name, tail := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := encodeJSON(tail)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tail.appendFields([]byte("{"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > 1 {
				got[1] = '{' // the first field's comma
				got = got[1:]
			}
			if got = append(got, '}'); !bytes.Equal(got, want) {
				t.Fatalf("appended %s\nencoded  %s", got, want)
			}
		})
	}
}

// TestTailRefusesWhatEncodingRefuses: a temperature JSON cannot write is
// the encoder's error, not a body.
func TestTailRefusesWhatEncodingRefuses(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		tail := wireTail{TopP: &v}
		_, want := encodeJSON(tail)
		if _, err := tail.appendFields(nil); err == nil || want == nil {
			t.Fatalf("%v: appended without error (encoding: %v)", v, want)
		}
	}
}

func randomTail(r *rand.Rand) wireTail {
	var t wireTail
	maybe := func() bool { return r.IntN(2) == 0 }
	floats := []float64{0, 0.1, 0.7, 1, 2, 1.0 / 3, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125}
	words := []string{"", "low", "high", "chat-\u00e9", "a\"b", "line\nbreak", "<tag>&", "\x01", "\u2029", "STOP"}
	if maybe() {
		t.MaxCompletionTokens = r.IntN(1 << 20)
	}
	if maybe() {
		t.MaxTokens = r.IntN(1<<20) - 100
	}
	if maybe() {
		t.StreamOptions = &wireStreamOpts{IncludeUsage: maybe()}
	}
	if maybe() {
		v := floats[r.IntN(len(floats))] * float64(1-2*r.IntN(2))
		t.Temperature = &v
	}
	if maybe() {
		v := r.Float64() * math.Pow(10, float64(r.IntN(50)-25))
		t.TopP = &v
	}
	for range r.IntN(5) {
		t.Stop = append(t.Stop, words[r.IntN(len(words))])
	}
	if maybe() {
		t.ReasoningEffort = words[r.IntN(len(words))]
	}
	if maybe() {
		t.PromptCacheKey = words[r.IntN(len(words))]
	}
	t.CachePrompt = maybe()
	if maybe() {
		s := r.Int64() - r.Int64()
		t.IDSlot = &s
	}
	if maybe() {
		t.ParallelToolCalls = new(maybe())
	}
	return t
}
