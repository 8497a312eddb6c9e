package tools

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestResponseID(t *testing.T) {
	tests := map[string]struct {
		head, id string
		ok       bool
	}{
		"response":              {`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"bbbb`, "7", true},
		"string id":             {`{"jsonrpc":"2.0","id":"a-1","result":{`, `"a-1"`, true},
		"error answer":          {`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"xxxx`, "3", true},
		"server request":        {`{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{`, "", false},
		"notification":          {`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xxx`, "", false},
		"id after the result":   {`{"jsonrpc":"2.0","result":{"content":"xxxx`, "", false},
		"not an object":         {`[1,2,3`, "", false},
		"garbage":               {`HTTP/1.1 500`, "", false},
		"nested id is not ours": {`{"result":{"id":5,"content":"xxx`, "", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id, ok := responseID([]byte(tc.head))
			if ok != tc.ok || string(id) != tc.id {
				t.Fatalf("responseID = %s, %v; want %s, %v", id, ok, tc.id, tc.ok)
			}
		})
	}
}

// Both guards pass messages under the limit through byte for byte and
// put an error answer to the same call in place of one over it.
func TestGuardsReplaceOnlyOversizeMessages(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":2,"result":{"text":"` + strings.Repeat("b", 300) + `"}}`
	t.Run("stdio", func(t *testing.T) {
		in := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + big + "\n" + `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("n", 300) + `"}` + "\n" + `{"jsonrpc":"2.0","id":3,"result":{}}` + "\n"
		got, err := io.ReadAll(newStdioGuard(io.NopCloser(strings.NewReader(in)), 100, zerolog.Nop()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		if len(lines) != 3 || lines[0] != `{"jsonrpc":"2.0","id":1,"result":{}}` || lines[2] != `{"jsonrpc":"2.0","id":3,"result":{}}` ||
			!strings.Contains(lines[1], `"id":2`) || !strings.Contains(lines[1], "over agentd's limit of 100 bytes") {
			t.Fatalf("guarded stream:\n%s", got)
		}
	})
	t.Run("event stream", func(t *testing.T) {
		small := "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
		in := small + "event: message\ndata: " + big + "\n\n"
		g := &sseGuard{src: bufio.NewReader(strings.NewReader(in)), limit: 100, id: []byte("2"), log: zerolog.Nop()}
		got, err := io.ReadAll(&frames{next: g.next, closer: io.NopCloser(nil)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(got), small) || strings.Contains(string(got), "bbbb") ||
			!strings.Contains(string(got), `data: {"error":{"code":-32099`) || !strings.Contains(string(got), `"id":2`) {
			t.Fatalf("guarded stream:\n%s", got)
		}
	})
}
