package openaifake

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAppendStringIsEncodingJSONs: the fake quotes every byte, every rune
// and broken UTF-8 as encoding/json does, so its chunks stay the bytes
// they were.
func TestAppendStringIsEncodingJSONs(t *testing.T) {
	var cases []string
	for c := range 256 {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	var all strings.Builder
	for r := rune(0); r <= 0x10FFFF; r++ {
		all.WriteRune(r)
		if r%4096 == 4095 {
			cases = append(cases, all.String())
			all.Reset()
		}
	}
	cases = append(cases, all.String(), "", awkward,
		"\xed\xa0\x80", "\xe2\x80", "\xf0\x9f\x99", "x\xe2\x80\xa8y\xe2\x80\xa9", "\xc0\xaf", "\xf4\x90\x80\x80")
	for _, s := range cases {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString([]byte("prefix"), s); string(got) != "prefix"+string(want) {
			t.Errorf("%q: quoted %s, encoding/json %s", s, got[len("prefix"):], want)
		}
	}
}
