package openaifake

import (
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// TestBlankedToolListReadsAsTheDecoderDoes: a body whose known tool list
// is blanked out while it decodes reads as the whole body does (or is
// refused as it is), is given back as it came, and is blanked where it is
// plain.
func TestBlankedToolListReadsAsTheDecoderDoes(t *testing.T) {
	list := `[{"type":"function","function":{"name":"get_weather","description":"The \"weather\" \\ in a city.","parameters":{"type":"object","properties":{"tools":{"type":"array"}}}}}]`
	// Only list and other are known: the fake's lists are every test's.
	lists.mu.Lock()
	lists.lists = nil
	lists.mu.Unlock()
	other := `[{"type":"function","function":{"name":"clock"}}]`
	for _, l := range []string{list, other} {
		if _, err := lists.get([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	msgs := `"messages":[{"role":"user","content":"say \"tools\":` + strings.ReplaceAll(list, `"`, `\"`) + ` \\"},{"role":"assistant","content":"a\\\\","tools":` + list + `}]`
	cases := []struct {
		body  string
		blank bool
	}{
		{`{"model":"m",` + msgs + `,"tools":` + list + `}`, true},
		{`{"tools":` + list + `,"model":"m",` + msgs + `}`, true},
		{" {\n \"model\" : \"m\" ,\t\"tools\" :\r\n" + list + " , \"stream\" : true ,\"max_tokens\":10,\"x\":null,\"y\":[1,{\"a\":[]}],\"z\":false}\n", true},
		{`{"model":"m","max_tokens":-1.5e3,"stream_options":{"include_usage":true},"tools":` + list + `}`, true},
		{`{"model":"m",,"tools":` + list + `}`, true},
		{`{"model":"m","tools":` + list + `}}`, true},
		{`{"model":"m","tools":` + list, true},
		{`{"model":"m","tools":` + list + `,"stream":tru}`, true},
		{`{"model":"m","Tools":` + list + `}`, false},
		{`{"model":"m","tools":` + list + `,"tools":null}`, false},
		{`{"model":"m","tools":` + list + `,"tools":` + other + `}`, true},
		{`{"model":"m","tools":` + list + `,"Tools":` + other + `}`, false},
		{`{"model":"m","Tools":` + other + `,"tools":` + list + `}`, false},
		{`{"model":"m","tools":` + list + `,"tool\u0073":` + other + `}`, false},
		{`{"model":"m","tools":null,"tools":` + list + `}`, false},
		{`{"model":"m","tool\u0073":` + list + `}`, false},
		{`{"model":"m","tools":` + strings.TrimSuffix(list, "]") + `,{"type":"function","function":{"name":"more"}}]}`, false},
		{`{"model":"m","tools":[{"type":"function","function":{"name":"not_seen_before"}}]}`, false},
		{`{"model":"m","messages":"unterminated,"tools":` + list + `}`, false},
		{`[` + list + `]`, false},
		{``, false},
	}
	for _, c := range cases {
		blanked := []byte(c.body)
		if tools, at := lists.blank(blanked); (tools != nil) != c.blank {
			t.Errorf("%s: blanked %v, want %v", c.body, tools != nil, c.blank)
		} else if tools != nil && string(blanked[at:at+len(tools.raw)]) != "null"+strings.Repeat(" ", len(tools.raw)-4) {
			t.Errorf("%s: blanked as %s", c.body, blanked)
		}
		var whole wireRequest
		wholeErr := jsonv2.Unmarshal([]byte(c.body), &whole, v1)
		raw := []byte(c.body)
		part, partErr := decodeRequest(raw)
		if string(raw) != c.body {
			t.Errorf("%s: decoding left the body as %s", c.body, raw)
		}
		if (wholeErr == nil) != (partErr == nil) {
			t.Errorf("%s: whole body's error %v, blanked body's %v", c.body, wholeErr, partErr)
			continue
		}
		if wholeErr == nil && !reflect.DeepEqual(whole, part) {
			t.Errorf("%s: whole body reads %+v, blanked body %+v", c.body, whole, part)
		}
	}
}
