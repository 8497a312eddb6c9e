package attachments

import (
	"context"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

// ownerSet holds "tenant/id" pairs, as the hub's ownership records do.
type ownerSet map[string]bool

func (o ownerSet) Owns(_ context.Context, tenant, id string) (bool, error) {
	return o[tenant+"/"+id], nil
}

func TestToolsResolveIDsWithinTheCallersTenant(t *testing.T) {
	s := newStore(t, 0)
	text := putFile(t, s, writeTemp(t, "secret.txt", "alice's secret line\n"))
	pdf := putFile(t, s, makePDF(t, testPDF{Pages: 2}))
	img := putFile(t, s, writeTemp(t, "dot.png", string(pngBytes(t, 8, 8))))
	sheet := putFile(t, s, writeTemp(t, "secret.csv", "alice's secret line,1\n"))
	doc := putFile(t, s, writeTemp(t, "secret.md", "# Secrets\n\nalice's secret line\n"))
	owners := ownerSet{}
	for _, a := range []chat.Attachment{text, pdf, img, sheet, doc} {
		owners["alice/"+a.ID] = true
	}
	r := registryOwnedBy(t, s, owners)
	// nobody holds this id: the store has never seen it.
	unknown := strings.Repeat("ab", 32)
	cases := map[string]struct {
		tool string
		id   string
		args map[string]any
	}{
		"file_read":    {ToolFileRead, text.ID, nil},
		"file_search":  {ToolFileSearch, text.ID, map[string]any{"words": "secret"}},
		"pdf_info":     {ToolPDFInfo, pdf.ID, nil},
		"pdf_search":   {ToolPDFSearch, pdf.ID, map[string]any{"words": "marker"}},
		"pdf_read":     {ToolPDFRead, pdf.ID, nil},
		"image_view":   {ToolImageView, img.ID, nil},
		"sheet_read":   {ToolSheetRead, sheet.ID, nil},
		"sheet_search": {ToolSheetSearch, sheet.ID, map[string]any{"words": "secret"}},
		"doc_info":     {ToolDocInfo, doc.ID, nil},
		"doc_read":     {ToolDocRead, doc.ID, nil},
		"doc_search":   {ToolDocSearch, doc.ID, map[string]any{"words": "secret"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			args := func(id string) map[string]any {
				a := map[string]any{"attachment_id": id}
				for k, v := range c.args {
					a[k] = v
				}
				return a
			}
			if res := callAs(t, r, "alice", c.tool, args(c.id)); res.IsError {
				t.Fatalf("the owner's call failed: %s", res.Text)
			}
			foreign := callAs(t, r, "bob", c.tool, args(c.id))
			if !foreign.IsError || len(foreign.Images) != 0 || strings.Contains(foreign.Text, "secret line") {
				t.Fatalf("bob read alice's attachment: %+v", foreign)
			}
			none := callAs(t, r, "bob", c.tool, args(unknown))
			if strings.ReplaceAll(foreign.Text, c.id, "ID") != strings.ReplaceAll(none.Text, unknown, "ID") {
				t.Fatalf("a foreign id is answered unlike an unknown one:\n foreign: %s\n unknown: %s", foreign.Text, none.Text)
			}
		})
	}
}

func TestToolsRefuseACallFromNoChat(t *testing.T) {
	s := newStore(t, 0)
	a := putFile(t, s, writeTemp(t, "a.txt", "hello\n"))
	r := registryOwnedBy(t, s, ownersFunc(func(string, string) bool { return true }))
	res, err := r.Call(context.Background(), chat.ToolCall{ID: "c", Name: ToolFileRead, Arguments: `{"attachment_id":"` + a.ID + `"}`}, tools.Limits{})
	if err != nil || !res.IsError || strings.Contains(res.Text, "hello") {
		t.Fatalf("a call without a chat read the file: %+v %v", res, err)
	}
}
