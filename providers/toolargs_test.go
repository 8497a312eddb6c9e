package providers

import "testing"

func TestToolArguments(t *testing.T) {
	for _, c := range []struct {
		args, want string
		ok         bool
	}{
		{`{"city":"Paris"}`, `{"city":"Paris"}`, true},
		{"  {\"a\":1}\n", `{"a":1}`, true},
		{`{}`, `{}`, true},
		{``, `{}`, false},
		{`{`, `{}`, false},
		{`{"query":`, `{}`, false},
		{"{\n\"", `{}`, false},
		{`[1,2]`, `{}`, false},
		{`"Paris"`, `{}`, false},
		{`{"a":1} trailing`, `{}`, false},
	} {
		got, ok := ToolArguments(c.args)
		if got != c.want || ok != c.ok {
			t.Errorf("ToolArguments(%q) = %q, %v; want %q, %v", c.args, got, ok, c.want, c.ok)
		}
	}
}
