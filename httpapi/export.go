package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/agentd/agentd/api"
)

// exportChat answers a chat whole: JSON that POST /v1/chats/import takes
// back, or with ?format=markdown a document for people. Like a transcript
// it is read a page and written a message at a time, so a client that
// reads slowly holds one page, not the chat.
func (s *Server) exportChat(w http.ResponseWriter, r *http.Request, tenant string) {
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "markdown" {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("format %q: use json or markdown", clip(format, 20)))
		return
	}
	id := r.PathValue("id")
	exp, err := s.hub.ExportHead(r.Context(), tenant, id)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	pages := &messagePages{hub: s.hub, tenant: tenant, id: id, next: 1, last: exp.Chat.Messages}
	first, err := pages.read(r.Context())
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	ext := "json"
	if format == "markdown" {
		ext = "md"
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="chat-%s.%s"`, exp.Chat.ID, ext))
	w.WriteHeader(http.StatusOK)
	pw := newPieceWriter(w, s.cfg.HTTP.WriteTimeout.Duration)
	defer pw.end()
	if format == "markdown" {
		_, _ = io.WriteString(pw, markdownHead(exp))
		eachMessage(r, pages, first, func(m api.Message) error {
			_, err := io.WriteString(pw, markdownMessage(m))
			return err
		})
		return
	}
	s.exportJSON(r, pw, tenant, exp, pages, first)
}

// exportJSON writes an export as one JSON object, the bytes json.Marshal
// would give for it whole: the head, the messages, then the activity
// (absent when there is none).
func (s *Server) exportJSON(r *http.Request, pw *pieceWriter, tenant string, exp api.ChatExport, pages *messagePages, first []api.Message) {
	exp.Messages, exp.Activity = nil, nil
	head, err := json.Marshal(exp)
	if err != nil {
		abortAnswer(r, err)
	}
	// head ends with the messages, null: `…,"messages":null}`.
	_, _ = pw.Write(bytes.TrimSuffix(head, []byte("null}")))
	_, _ = io.WriteString(pw, "[")
	list := &jsonList{w: pw}
	eachMessage(r, pages, first, func(m api.Message) error { return list.add(m) })
	_, _ = io.WriteString(pw, "]")
	list = &jsonList{w: pw}
	for after, more := int64(0), true; more && pw.err == nil; {
		var page []api.ActivityItem
		if page, more, err = s.hub.Activity(r.Context(), tenant, exp.Chat.ID, after, defaultChatPage); err != nil {
			abortAnswer(r, err)
		}
		for _, a := range page {
			if list.n == 0 {
				_, _ = io.WriteString(pw, `,"activity":[`)
			}
			_ = list.add(a)
			after = a.ID
		}
	}
	if list.n > 0 {
		_, _ = io.WriteString(pw, "]")
	}
	_, _ = io.WriteString(pw, "}\n")
}

// importChat stores an export as a new chat of the caller's tenant. The
// body is bounded by limits.max_import_bytes, not max_body_bytes: a chat
// is bigger than a request. 201 comes once every message is durable.
func (s *Server) importChat(w http.ResponseWriter, r *http.Request, tenant string) {
	if !bodyFits(w, r, s.cfg.Limits.MaxImportBytes, writeError) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxImportBytes)
	var exp api.ChatExport
	if !decode(w, r, &exp, importLists(s.cfg.Limits.MaxHistoryMessages)) {
		return
	}
	if exp.Chat.Title != "" && !s.titleFits(w, &exp.Chat.Title) {
		return
	}
	most := s.cfg.Limits.MaxMessageBytes
	for _, m := range exp.Messages {
		if len(m.Content) > most {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("message seq %d is %d bytes; the limit is %d", m.Seq, len(m.Content), most))
			return
		}
		for _, c := range m.ToolCalls {
			if len(c.Arguments) > most {
				writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the arguments of tool call %s of message seq %d are %d bytes; the limit is %d", clip(c.ID, 80), m.Seq, len(c.Arguments), most))
				return
			}
		}
	}
	c, err := s.hub.Import(r.Context(), tenant, exp)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// importLists bounds each kind of list an import holds (its messages,
// their tool calls, images and attachments, the chat's tools and toolsets) to
// most elements in all, as they are read, and leaves its activity, which
// an import does not keep, unread.
func importLists(most int) jsonv2.Options {
	const setting = "limits.max_history_messages"
	return jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		boundedList[api.Message](most, "messages", setting),
		boundedList[api.ToolCall](most, "tool calls", setting),
		boundedList[api.Image](most, "images", setting),
		boundedList[api.Attachment](most, "attachments", setting),
		boundedList[api.Tool](most, "tools", setting),
		boundedList[string](most, "toolset names", setting),
		skipList[api.ActivityItem]()))
}

// markdownHead renders the head of an export for people: the title, then
// the summary of what came before the kept messages. markdownMessage
// renders each message after it under its author.
func markdownHead(exp api.ChatExport) string {
	var b strings.Builder
	title := exp.Chat.Title
	if title == "" {
		title = "Chat " + exp.Chat.ID
	}
	fmt.Fprintf(&b, "# %s\n\n", oneLine(title))
	fmt.Fprintf(&b, "- chat: `%s`\n- model: `%s`\n- created: %s\n- exported: %s\n- messages: %d\n\n", exp.Chat.ID, exp.Chat.Model,
		exp.Chat.CreatedAt.Format(time.RFC3339), exp.ExportedAt.Format(time.RFC3339), exp.Chat.Messages)
	if exp.Summary != "" {
		fmt.Fprintf(&b, "## Summary of messages before seq %d\n\n%s\n\n", exp.FirstKeptSeq, exp.Summary)
	}
	return b.String()
}

func markdownMessage(m api.Message) string {
	var b strings.Builder
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
	return b.String()
}

// fence writes text as a paragraph, or as a code block whose fence is
// longer than any run of backticks inside it (at least three).
func fence(text string, code bool) string {
	if !code {
		return strings.TrimRight(text, "\n") + "\n\n"
	}
	ticks := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	return ticks + "\n" + strings.TrimRight(text, "\n") + "\n" + ticks + "\n\n"
}

// longestRun is the length of the longest run of c in s, in one pass: a
// tenant's text of a million backticks costs a million steps, not a
// million scans of it.
func longestRun(s string, c byte) int {
	most, run := 0, 0
	for i := range len(s) {
		if s[i] != c {
			run = 0
			continue
		}
		run++
		most = max(most, run)
	}
	return most
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
