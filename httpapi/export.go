package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
)

// exportChat answers a chat whole: JSON that POST /v1/chats/import takes
// back, or with ?format=markdown a document for people.
func (s *Server) exportChat(w http.ResponseWriter, r *http.Request, tenant string) {
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "markdown" {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("format %q: use json or markdown", clip(format, 20)))
		return
	}
	exp, err := s.hub.Export(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	if format != "markdown" {
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="chat-%s.json"`, exp.Chat.ID))
		writeJSON(w, http.StatusOK, exp)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="chat-%s.md"`, exp.Chat.ID))
	_, _ = io.WriteString(w, markdown(exp))
}

// importChat stores an export as a new chat of the caller's tenant. The
// body is bounded by limits.max_import_bytes, not max_body_bytes: a chat
// is bigger than a request. 201 comes once every message is durable.
func (s *Server) importChat(w http.ResponseWriter, r *http.Request, tenant string) {
	limitBody(w, r, s.cfg.HTTP.ReadTimeout.Duration)
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxImportBytes)
	var exp api.ChatExport
	if !decode(w, r, &exp) {
		return
	}
	if exp.Chat.Title != "" && !s.titleFits(w, &exp.Chat.Title) {
		return
	}
	for _, m := range exp.Messages {
		if len(m.Content) > s.cfg.Limits.MaxMessageBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("message seq %d is %d bytes; the limit is %d", m.Seq, len(m.Content), s.cfg.Limits.MaxMessageBytes))
			return
		}
	}
	c, err := s.hub.Import(r.Context(), tenant, exp)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// markdown renders an export for people: the title, the summary of what
// came before the kept messages, then each message under its author.
func markdown(exp api.ChatExport) string {
	var b strings.Builder
	title := exp.Chat.Title
	if title == "" {
		title = "Chat " + exp.Chat.ID
	}
	fmt.Fprintf(&b, "# %s\n\n", oneLine(title))
	fmt.Fprintf(&b, "- chat: `%s`\n- model: `%s`\n- created: %s\n- exported: %s\n- messages: %d\n\n", exp.Chat.ID, exp.Chat.Model,
		exp.Chat.CreatedAt.Format(time.RFC3339), exp.ExportedAt.Format(time.RFC3339), len(exp.Messages))
	if exp.Summary != "" {
		fmt.Fprintf(&b, "## Summary of messages before seq %d\n\n%s\n\n", exp.FirstKeptSeq, exp.Summary)
	}
	for _, m := range exp.Messages {
		who := string(m.Role)
		switch {
		case m.Role == api.RoleTool:
			who = "tool " + m.ToolName
		case m.Role == api.RoleAssistant && m.Model != "":
			who = "assistant (" + m.Model + ")"
		case m.Origin != "":
			who = "user (" + m.Origin + ")"
		}
		fmt.Fprintf(&b, "### %s · #%d · %s\n\n", who, m.Seq, m.CreatedAt.Format(time.RFC3339))
		if m.Content != "" {
			b.WriteString(fence(m.Content, m.Role == api.RoleTool))
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "Calls `%s`:\n\n%s", c.Name, fence(c.Arguments, true))
		}
		for _, a := range m.Attachments {
			fmt.Fprintf(&b, "Attached: %s (%s, %d bytes)\n\n", a.Name, a.MediaType, a.Size)
		}
		if m.Problem != "" {
			fmt.Fprintf(&b, "> Cut short: %s\n\n", oneLine(m.Problem))
		}
	}
	return b.String()
}

// fence writes text as a paragraph, or as a code block whose fence is
// longer than any run of backticks inside it.
func fence(text string, code bool) string {
	if !code {
		return strings.TrimRight(text, "\n") + "\n\n"
	}
	ticks := "```"
	for strings.Contains(text, ticks) {
		ticks += "`"
	}
	return ticks + "\n" + strings.TrimRight(text, "\n") + "\n" + ticks + "\n\n"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
