package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDebugTooLong(t *testing.T) {
	cases := map[string]struct {
		args []string
		body string
		want string
	}{
		// Bodies from providers/testdata/too_long.jsonl (A002, A015, A100, A030).
		"openai names its window": {
			[]string{"--provider", "openai", "--status", "400"},
			`{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4111 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			`{"too_long":true,"window":4097}`,
		},
		"anthropic, status unknown": {
			[]string{"--provider", "anthropic"},
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 200251 tokens > 200000 maximum"}}`,
			`{"too_long":true,"window":200000}`,
		},
		"rate limit is not too long": {
			[]string{"--provider", "openai", "--status", "429"},
			`429 Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 61337.`,
			`{"too_long":false,"window":null}`,
		},
		"stream event with no window, unknown provider": {
			[]string{"--provider", "some-gateway", "--status", "200"},
			`{"type":"error","sequence_number":2,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}}`,
			`{"too_long":true,"window":null}`,
		},
		"empty body": {
			[]string{"--provider", "ollama"},
			``,
			`{"too_long":false,"window":null}`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := newDebugTooLongCmd()
			var out bytes.Buffer
			cmd.SetIn(strings.NewReader(c.body))
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(c.args)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("execute: %v (output %q)", err, out.String())
			}
			if out.String() != c.want+"\n" {
				t.Errorf("printed %q, want exactly one line %q", out.String(), c.want)
			}
		})
	}
}

func TestDebugTooLongNeedsProvider(t *testing.T) {
	cmd := newDebugTooLongCmd()
	var out bytes.Buffer
	cmd.SetIn(strings.NewReader("prompt is too long"))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err == nil {
		t.Errorf("ran without --provider; printed %q", out.String())
	}
}

func TestDebugTooLongIsRegistered(t *testing.T) {
	found := false
	for _, c := range debugCmd.Commands() {
		if c.Name() == "too-long" {
			found = true
		}
	}
	if !found {
		t.Error("`agentd debug too-long` is not registered")
	}
}

// TestDebugTooLongExplain: --explain says what decided and which figure is
// which, on one JSON line.
func TestDebugTooLongExplain(t *testing.T) {
	cases := map[string]struct {
		args     []string
		body     string
		contains []string
	}{
		"the rule and the figures": {
			[]string{"--provider", "llamacpp", "--status", "400", "--explain"},
			`{"error":{"code":400,"message":"request (3030 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3030,"n_ctx":2048}}`,
			[]string{`{"too_long":true,"window":2048,"explain":{`, `"field n_ctx"`, `"field type=exceed_context_size_error"`, `exceeds the available context size`, `"requested":3030`, `"input":3030`},
		},
		"the look-alike": {
			[]string{"--provider", "groq", "--status", "413", "--explain"},
			`Request too large on tokens per minute (TPM)`,
			[]string{`{"too_long":false,"window":null,"explain":{"look_alike":"per (?:minute|min|hour|day)\\b","rules":[]}}`},
		},
		"the status": {
			[]string{"--provider", "openai", "--status", "429", "--explain"},
			`prompt is too long`,
			[]string{`"status":"HTTP 429 is never about the window"`},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := newDebugTooLongCmd()
			var out bytes.Buffer
			cmd.SetIn(strings.NewReader(c.body))
			cmd.SetOut(&out)
			cmd.SetArgs(c.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if strings.Count(out.String(), "\n") != 1 {
				t.Errorf("want one line, got %q", out.String())
			}
			for _, w := range c.contains {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %s lacks %s", out.String(), w)
				}
			}
		})
	}
}
