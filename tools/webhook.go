package tools

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/netguard"
)

// A webhook tool is run by an application's HTTP endpoint: agentd POSTs
// each call as JSON, signed the Standard Webhooks way
// (https://www.standardwebhooks.com: headers webhook-id, webhook-timestamp
// and webhook-signature "v1,<base64 HMAC-SHA256 of id.timestamp.body>"),
// and the response body is the result. Every failure is a result the model
// can read; nothing is retried, since a tool call may not be idempotent.

// Webhook is where and how a toolset's calls are sent.
type Webhook struct {
	URL string
	// Secret signs each body; a "whsec_" secret is base64 after the prefix.
	Secret  string
	Timeout time.Duration
	// AllowPrivate lets the URL be a loopback or private address.
	AllowPrivate bool
}

// Webhook limits.
const (
	defaultWebhookTimeout = 30 * time.Second
	maxWebhookTimeout     = 10 * time.Minute
	maxWebhookBytes       = 1 << 20
)

// WebhookCall is the body of each POST.
type WebhookCall struct {
	Type      string          `json:"type"` // "tool.call"
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	ChatID    string          `json:"chat_id,omitempty"`
	Tenant    string          `json:"tenant,omitempty"`
}

// CheckWebhookURL refuses what a webhook may not be: anything but http(s),
// and, unless private addresses are allowed, a loopback or private host
// named by address (a name is checked again on each connection).
func CheckWebhookURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("webhook url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("webhook url %q: only http and https", raw)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("webhook url %q: no host", raw)
	}
	if allowPrivate {
		return nil
	}
	if strings.EqualFold(u.Hostname(), "localhost") {
		return fmt.Errorf("webhook url %q: %w (the yaml's toolsets.webhooks_allow_private allows it)", raw, netguard.ErrNotPublic)
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := netguard.Check(ip); err != nil {
			return fmt.Errorf("webhook url %q: %w (the yaml's toolsets.webhooks_allow_private allows it)", raw, err)
		}
	}
	return nil
}

// WebhookRunner returns the Run of a tool whose calls go to w.
func WebhookRunner(name string, w Webhook) func(context.Context, json.RawMessage) (Result, error) {
	if w.Timeout <= 0 {
		w.Timeout = defaultWebhookTimeout
	}
	w.Timeout = min(w.Timeout, maxWebhookTimeout)
	client := &http.Client{
		Timeout:   w.Timeout,
		Transport: guardedTransport(w.Timeout, w.AllowPrivate),
		// A webhook answers where it is asked; a redirect is its error.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	secret := webhookKey(w.Secret)
	return func(ctx context.Context, args json.RawMessage) (Result, error) {
		ci, _ := CallInfoFrom(ctx)
		body, err := json.Marshal(WebhookCall{Type: "tool.call", CallID: ci.CallID, Tool: name, Arguments: args, ChatID: ci.ChatID, Tenant: ci.Tenant})
		if err != nil {
			return Result{}, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
		if err != nil {
			return Result{}, err
		}
		id := webhookID(ci)
		// What bounds the wait: the webhook's timeout, or the call's own
		// deadline (limits.tool_timeout) when that comes first.
		limit := w.Timeout
		if dl, ok := ctx.Deadline(); ok {
			limit = min(limit, time.Until(dl).Round(100*time.Millisecond))
		}
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", ts)
		req.Header.Set("webhook-signature", "v1,"+SignWebhook(secret, id, ts, body))
		resp, err := client.Do(req)
		if err != nil {
			return webhookFailure(name, limit, err), nil
		}
		defer resp.Body.Close()
		text, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookBytes+1))
		if err != nil {
			return webhookFailure(name, limit, err), nil
		}
		if len(text) > maxWebhookBytes {
			text = []byte(HeadTail(string(text), maxWebhookBytes, ""))
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return errorResult("The tool %s failed: its webhook answered %s: %s", name, resp.Status, clipText(string(text), 2000)), nil
		}
		return Result{Text: string(text)}, nil
	}
}

// guardedTransport reaches only public addresses unless allowPrivate,
// checked on the resolved address of every connection.
func guardedTransport(timeout time.Duration, allowPrivate bool) *http.Transport {
	dialer := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		dialer = netguard.Dialer(timeout)
	}
	// No proxy: through one the dialer would check the proxy's address.
	return &http.Transport{Proxy: nil, DialContext: dialer.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
}

func webhookFailure(name string, limit time.Duration, err error) Result {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return errorResult("The tool %s did not answer within %s and was given up. Tell the person it is not answering.", name, limit)
	}
	if errors.Is(err, netguard.ErrNotPublic) {
		return errorResult("The tool %s is at a private or local network address, which agentd may not reach.", name)
	}
	return errorResult("The tool %s could not be reached: %v", name, err)
}

// webhookKey is the signing key of a secret: a Standard Webhooks
// "whsec_" secret is base64 after its prefix; any other is used as it is.
func webhookKey(secret string) []byte {
	if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if key, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return key
		}
	}
	return []byte(secret)
}

// webhookID is a call's webhook-id, which a Standard Webhooks receiver
// de-duplicates by: the same for every delivery of one call, and never
// another call's. A model's call id alone is not that: Ollama's hash the
// call and the count of messages before it, so two chats (of two tenants)
// making the same call give the same id, and others are unique only
// within a chat. So it digests the tenant, the chat, the seq of the answer
// that made the call, and the call's id.
func webhookID(ci CallInfo) string {
	if ci.ChatID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return "msg_" + hex.EncodeToString(b[:])
	}
	h := sha256.New()
	for _, part := range []string{ci.Tenant, ci.ChatID, strconv.FormatInt(ci.Seq, 10), ci.CallID} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return "msg_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// SignWebhook is the Standard Webhooks signature of one message.
func SignWebhook(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
