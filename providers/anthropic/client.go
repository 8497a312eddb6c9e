// Package anthropic adapts the Anthropic Messages API to providers.Client:
// one streamed request with text, thinking and tool calls, usage as
// reported, refusals classified by the shared "too long" detector, and the
// model list with each model's input window (max_input_tokens).
//
// Thinking is kept intact. A single thinking block travels in
// chat.Message.Thinking and ThinkingSignature exactly as it arrived; an
// answer with several thinking blocks or a redacted_thinking block keeps all
// of them, byte for byte, in ThinkingSignature behind the prefix
// BlocksPrefix (Thinking then holds their readable text, for display). On
// the next request the blocks are sent back unedited, but only to the model
// that wrote them: a signature is bound to its model, so thinking from a
// message whose Model names another model is left out.
//
// A Client is immutable after New and safe for concurrent use. Stream calls
// emit on the caller's goroutine and returns when the stream ends or ctx is
// done; it owns no goroutine past its return.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentd/agentd/providers"
)

// Config configures a Client.
type Config struct {
	// Name names this provider in ModelInfo and errors. Optional. Defaults
	// to "anthropic".
	Name string
	// BaseURL is the API root, without /v1. Optional. Defaults to
	// https://api.anthropic.com.
	BaseURL string
	// APIKey authenticates. Optional (a local proxy may need none).
	APIKey string
	// Models, when set, is the list Models returns, in this order; the
	// provider's list then only supplies their figures. Optional. Defaults
	// to every model the provider lists.
	Models []string
	// Windows are input windows for models the provider's list does not
	// describe. Optional.
	Windows map[string]int
	// HTTPClient carries the requests. Optional. Defaults to
	// http.DefaultClient.
	HTTPClient *http.Client
	// MaxTokens is the answer room when a request names none (the API
	// requires one). Optional. Defaults to DefaultMaxTokens.
	MaxTokens int
	// Thinking asks for extended thinking: "" (off), "adaptive" (the model
	// decides) or "enabled" (with ThinkingBudget). Optional. Defaults to off.
	Thinking string
	// ThinkingBudget is budget_tokens for Thinking "enabled". It is cut to
	// half of max_tokens when it would not fit under it, and thinking is
	// left off when that is below the API's minimum of 1024. Optional.
	// Defaults to 4096.
	ThinkingBudget int
}

// Defaults.
const (
	DefaultName           = "anthropic"
	DefaultMaxTokens      = 8192
	DefaultThinkingBudget = 4096
	// minThinkingBudget is the smallest budget_tokens the API accepts
	// (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking).
	minThinkingBudget = 1024
)

// Thinking modes for Config.Thinking.
const (
	ThinkingOff      = ""
	ThinkingAdaptive = "adaptive"
	ThinkingEnabled  = "enabled"
)

// detector is the provider name the shared refusal detector knows.
const detector = "anthropic"

// Client is one configured Anthropic endpoint.
type Client struct {
	cfg Config
	sdk anthropic.Client
}

// New checks cfg and builds a Client. It does no I/O.
func New(cfg Config) (*Client, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.ThinkingBudget <= 0 {
		cfg.ThinkingBudget = DefaultThinkingBudget
	}
	switch cfg.Thinking {
	case ThinkingOff, ThinkingAdaptive, ThinkingEnabled:
	default:
		return nil, fmt.Errorf("anthropic %s: %w: thinking %q (want \"\", %q or %q)", cfg.Name, ErrConfig, cfg.Thinking, ThinkingAdaptive, ThinkingEnabled)
	}
	// The environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles) must
	// not change what the yaml configured, and retries are the daemon's
	// decision, not the SDK's.
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithMaxRetries(0)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	cfg.Models = append([]string(nil), cfg.Models...)
	windows := make(map[string]int, len(cfg.Windows))
	for k, v := range cfg.Windows {
		windows[k] = v
	}
	cfg.Windows = windows
	return &Client{cfg: cfg, sdk: anthropic.NewClient(opts...)}, nil
}

// Name is the provider name this client reports.
func (c *Client) Name() string { return c.cfg.Name }

// Stream sends one request and streams the answer. On an error after part
// of the answer arrived, the returned Response holds that part, marked
// Partial. Errors from the API are *providers.Error; a done ctx yields an
// error that wraps ctx.Err().
func (c *Client) Stream(ctx context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return providers.Response{}, fmt.Errorf("anthropic %s: build request: %w", req.Model, err)
	}
	if emit == nil {
		emit = func(providers.Event) {}
	}
	stream := c.sdk.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	res, err := consume(stream, providers.NewAnswerBudget(req), emit)
	if err != nil {
		return res, c.wrap(ctx, req.Model, err)
	}
	res.Message.Model = c.cfg.Name + "/" + req.Model
	return res, nil
}

// wrap turns what the SDK or the stream reader returned into the error
// Stream promises.
func (c *Client) wrap(ctx context.Context, model string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic %s: %w", model, ctx.Err())
	}
	var api *anthropic.Error
	if errors.As(err, &api) {
		var header http.Header
		if api.StatusCode != http.StatusOK && api.Response != nil {
			header = api.Response.Header
		}
		e := providers.ClassifyHTTPError(detector, api.StatusCode, api.RawJSON(), header)
		e.Provider = c.cfg.Name
		return e
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		pe.Provider = c.cfg.Name
		return pe
	}
	// A body cut short or a connection that failed: worth another try.
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %w", ErrStreamCut, err)
	}
	return &providers.Error{Provider: c.cfg.Name, Retryable: true, Err: fmt.Errorf("%s: %w", model, err)}
}
