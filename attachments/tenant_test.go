package attachments

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

// ownerSet holds records by "tenant/id", as the hub's ownership records do.
type ownerSet map[string]chat.Attachment

func (o ownerSet) Owned(_ context.Context, tenant, id string) (chat.Attachment, bool, error) {
	a, ok := o[tenant+"/"+id]
	return a, ok, nil
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
		owners["alice/"+a.ID] = a
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
	r := registryOwnedBy(t, s, ownersFunc{s, func(string, string) bool { return true }})
	res, err := r.Call(context.Background(), chat.ToolCall{ID: "c", Name: ToolFileRead, Arguments: `{"attachment_id":"` + a.ID + `"}`}, tools.Limits{})
	if err != nil || !res.IsError || strings.Contains(res.Text, "hello") {
		t.Fatalf("a call without a chat read the file: %+v %v", res, err)
	}
}

// An upload's answer (kind, note, tools) must come from its own bytes, name
// and media type: when another tenant stored the same bytes first, under
// another name or type, the answer would otherwise confirm a guess of that
// tenant's file and hand the later uploader the first one's reading.
func TestAnUploadIsAnsweredAsIfItWereTheFirstOfItsBytes(t *testing.T) {
	const content = "name,salary\nalice,123456\nbob,2\n"
	uploads := []struct{ tenant, name, declared, tool string }{
		{"alice", "salaries.txt", "text/plain", ToolFileRead},
		{"bob", "guess.csv", "", ToolSheetRead},
		{"carol", "guess.md", "", ToolDocRead},
		{"dave", "guess", "text/csv", ToolSheetRead},
	}
	putIn := func(s *Store, name, declared string) chat.Attachment {
		t.Helper()
		a, err := s.Put(context.Background(), strings.NewReader(content), name, declared, Quota{})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// What each would hear as the first to store these bytes, and the
	// extraction that answer took.
	first := map[string]chat.Attachment{}
	extractions := map[string]int64{}
	for _, u := range uploads {
		s := newStore(t, 0)
		first[u.tenant] = putIn(s, u.name, u.declared)
		extractions[u.tenant] = s.extractions.Load()
	}
	for _, reversed := range []bool{false, true} {
		order := slices.Clone(uploads)
		if reversed {
			slices.Reverse(order)
		}
		s := newStore(t, 0)
		owners := ownerSet{}
		for _, u := range order {
			before := s.extractions.Load()
			a := putIn(s, u.name, u.declared)
			if a != first[u.tenant] {
				t.Errorf("reversed=%v: %s's upload of bytes stored before is answered\n %+v\nwant what a first upload hears\n %+v", reversed, u.tenant, a, first[u.tenant])
			}
			// A stored reading reused would make this upload measurably
			// quicker than a first one: the work is the same.
			if n := s.extractions.Load() - before; n != extractions[u.tenant] {
				t.Errorf("reversed=%v: %s's upload extracted %d times, a first upload %d", reversed, u.tenant, n, extractions[u.tenant])
			}
			owners[u.tenant+"/"+a.ID] = a
		}
		r := registryOwnedBy(t, s, owners)
		for _, u := range uploads {
			if res := callAs(t, r, u.tenant, u.tool, map[string]any{"attachment_id": first[u.tenant].ID}); res.IsError || !strings.Contains(res.Text, "123456") {
				t.Errorf("reversed=%v: %s's %s, the tool its note names: %s", reversed, u.tenant, u.tool, res.Text)
			}
		}
	}
}
