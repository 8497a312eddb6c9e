package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Client talks to a running agentd.
type Client struct {
	BaseURL string // e.g. http://127.0.0.1:8420
	Token   string // bearer token; empty when the daemon has none
	HTTP    *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	return c.doWith(ctx, method, path, body, accept, nil)
}

// doWith is do with header's fields added to the request's.
func (c *Client) doWith(ctx context.Context, method, path string, body any, accept string, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		e := &Error{Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, e) != nil || e.Message == "" {
			e.Message = fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
		}
		return nil, e
	}
	return resp, nil
}

func (c *Client) getJSON(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// CreateChat makes a chat.
func (c *Client) CreateChat(ctx context.Context, req CreateChatRequest) (Chat, error) {
	var out Chat
	err := c.getJSON(ctx, http.MethodPost, "/v1/chats", req, &out)
	return out, err
}

// Models lists the models agentd knows and which providers did not answer.
func (c *Client) Models(ctx context.Context) (Models, error) {
	var out Models
	err := c.getJSON(ctx, http.MethodGet, "/v1/models", nil, &out)
	return out, err
}

// RefreshModels has agentd re-read every provider's model list now.
func (c *Client) RefreshModels(ctx context.Context) (Models, error) {
	var out Models
	err := c.getJSON(ctx, http.MethodPost, "/v1/models/refresh", nil, &out)
	return out, err
}

// Health reads GET /healthz; a failing daemon's answer (503) is its
// Health too, not an error.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var out Health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+"/healthz", nil)
	if err != nil {
		return out, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return out, &Error{Status: resp.StatusCode, Message: "GET /healthz: " + resp.Status}
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// DeleteChat deletes a chat and everything stored under it.
func (c *Client) DeleteChat(ctx context.Context, chatID string) error {
	resp, err := c.do(ctx, http.MethodDelete, "/v1/chats/"+chatID, nil, "")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Chat reads one chat.
func (c *Client) Chat(ctx context.Context, chatID string) (Chat, error) {
	var out Chat
	err := c.getJSON(ctx, http.MethodGet, "/v1/chats/"+url.PathEscape(chatID), nil, &out)
	return out, err
}

// Chats reads one page of the tenant's chats, after the id after ("" from
// the first).
func (c *Client) Chats(ctx context.Context, after string) (ChatList, error) {
	var out ChatList
	path := "/v1/chats"
	if after != "" {
		path += "?after=" + url.QueryEscape(after)
	}
	err := c.getJSON(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// PatchChat changes a chat (model, title, setup) and returns it after.
func (c *Client) PatchChat(ctx context.Context, chatID string, req PatchChatRequest) (Chat, error) {
	var out Chat
	err := c.getJSON(ctx, http.MethodPatch, "/v1/chats/"+url.PathEscape(chatID), req, &out)
	return out, err
}

// Export reads a chat whole, as POST /v1/chats/import takes it back.
func (c *Client) Export(ctx context.Context, chatID string) (ChatExport, error) {
	var out ChatExport
	err := c.getJSON(ctx, http.MethodGet, "/v1/chats/"+url.PathEscape(chatID)+"/export", nil, &out)
	return out, err
}

// Import stores an export as a new chat.
func (c *Client) Import(ctx context.Context, exp ChatExport) (Chat, error) {
	var out Chat
	err := c.getJSON(ctx, http.MethodPost, "/v1/chats/import", exp, &out)
	return out, err
}

// Memories lists the tenant's memories in a state ("" for all).
func (c *Client) Memories(ctx context.Context, state string) ([]Memory, error) {
	var out struct {
		Memories []Memory `json:"memories"`
	}
	err := c.getJSON(ctx, http.MethodGet, "/v1/memories?state="+url.QueryEscape(state), nil, &out)
	return out.Memories, err
}

// EditMemory replaces a memory's text.
func (c *Client) EditMemory(ctx context.Context, id, text string) (Memory, error) {
	var out Memory
	err := c.getJSON(ctx, http.MethodPatch, "/v1/memories/"+url.PathEscape(id), EditMemoryRequest{Text: text}, &out)
	return out, err
}

// DeleteMemory forgets one memory.
func (c *Client) DeleteMemory(ctx context.Context, id string) error {
	resp, err := c.do(ctx, http.MethodDelete, "/v1/memories/"+url.PathEscape(id), nil, "")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Transcript reads every message of a chat.
func (c *Client) Transcript(ctx context.Context, chatID string) ([]Message, error) {
	return c.TranscriptFrom(ctx, chatID, 0)
}

// TranscriptFrom reads a chat's messages from seq from on.
func (c *Client) TranscriptFrom(ctx context.Context, chatID string, from int64) ([]Message, error) {
	var out struct {
		Messages []Message `json:"messages"`
	}
	err := c.getJSON(ctx, http.MethodGet, fmt.Sprintf("/v1/chats/%s/transcript?from_seq=%d", url.PathEscape(chatID), from), nil, &out)
	return out.Messages, err
}

// Activity reads one page of a chat's activity log: items with id > after
// (0: from the first), limit of them (0: the server's default).
func (c *Client) Activity(ctx context.Context, chatID string, after int64, limit int) (ActivityPage, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/chats/" + chatID + "/activity"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out ActivityPage
	err := c.getJSON(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Context reads what a chat's model is sent now.
func (c *Client) Context(ctx context.Context, chatID string) (Context, error) {
	var out Context
	err := c.getJSON(ctx, http.MethodGet, "/v1/chats/"+chatID+"/context", nil, &out)
	return out, err
}

// Send posts a message and streams its turn's events to onEvent (which may
// be nil), returning the turn's result: completed, or paused with status
// requires_action and the tool calls the application runs.
func (c *Client) Send(ctx context.Context, chatID string, req SendMessageRequest, onEvent func(Event)) (TurnResult, error) {
	return c.streamTurn(ctx, "/v1/chats/"+chatID+"/messages", req, nil, onEvent)
}

// SendKeyed is Send with an idempotency key (a UUID, say, made once per
// message): sent again with the same key after an answer that was lost,
// the message is stored and answered once. Sent while its turn runs, it
// joins that turn's events; after, the result is the turn's messages read
// from the transcript (Replayed). While it waits its turn, or its turn
// waits for tool results, it is a 409 *Error: send it again later.
func (c *Client) SendKeyed(ctx context.Context, chatID, key string, req SendMessageRequest, onEvent func(Event)) (TurnResult, error) {
	return c.streamTurn(ctx, "/v1/chats/"+chatID+"/messages", req, http.Header{"Idempotency-Key": {key}}, onEvent)
}

// SendToolResults answers a paused turn's calls and streams the resumed
// turn as Send does.
func (c *Client) SendToolResults(ctx context.Context, chatID string, req ToolResultsRequest, onEvent func(Event)) (TurnResult, error) {
	return c.streamTurn(ctx, "/v1/chats/"+chatID+"/tool-results", req, nil, onEvent)
}

// PutToolset registers or replaces one of the tenant's toolsets.
func (c *Client) PutToolset(ctx context.Context, name string, req PutToolsetRequest) (Toolset, error) {
	var out Toolset
	err := c.getJSON(ctx, http.MethodPut, "/v1/toolsets/"+name, req, &out)
	return out, err
}

func (c *Client) streamTurn(ctx context.Context, path string, body any, header http.Header, onEvent func(Event)) (TurnResult, error) {
	resp, err := c.doWith(ctx, http.MethodPost, path, body, "text/event-stream", header)
	if err != nil {
		return TurnResult{}, err
	}
	defer resp.Body.Close()
	var res TurnResult
	var dropped StreamDropped
	var refused *StreamError
	err = ReadSSE(resp.Body, func(ev Event) bool {
		if onEvent != nil {
			onEvent(ev)
		}
		switch ev.Type {
		case EventTurnCompleted, EventTurnRequiresAction:
			_ = json.Unmarshal(ev.Data, &res)
			return false
		case EventStreamDropped:
			_ = json.Unmarshal(ev.Data, &dropped)
			return false
		case EventError:
			refused = &StreamError{}
			_ = json.Unmarshal(ev.Data, refused)
			return false
		}
		return true
	})
	switch {
	case err != nil:
		return res, err
	case refused != nil:
		return res, &Error{Message: refused.Message, Kind: refused.Kind, Status: refused.Status}
	case dropped.Reason != "":
		return res, fmt.Errorf("the stream was dropped (%s); the turn goes on: read the transcript after seq %d", dropped.Reason, dropped.LastSeq)
	case res.TurnID == "" && !res.Replayed:
		return res, fmt.Errorf("the stream ended before the turn completed")
	}
	return res, nil
}

// ReadSSE reads Server-Sent Events from r, calling fn for each until it
// returns false or the stream ends.
func ReadSSE(r io.Reader, fn func(Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var ev Event
			if err := json.Unmarshal([]byte(data.String()), &ev); err != nil {
				return fmt.Errorf("bad event %q: %w", data.String(), err)
			}
			data.Reset()
			if !fn(ev) {
				return nil
			}
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return sc.Err()
}

// Post sends a JSON body to path and decodes the JSON answer into out.
func (c *Client) Post(ctx context.Context, path string, body, out any) error {
	return c.getJSON(ctx, http.MethodPost, path, body, out)
}
