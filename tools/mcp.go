package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
)

// MCPServer is one MCP server from the configuration: a local command spoken
// to over stdio when Command is set, or a streamable-HTTP endpoint when URL
// is set.
type MCPServer struct {
	// Name prefixes the server's tools: tool "search" of server "docs" is
	// registered as "docs__search".
	Name    string
	Command []string
	// Env is added to the daemon's own environment for the command.
	Env map[string]string
	URL string
	// Headers are sent with every HTTP request (for example Authorization).
	Headers map[string]string
	// Trusted says the server's output is the operator's own data; otherwise
	// every result is marked Untrusted, as outside text.
	Trusted bool
	// BareNames registers the tools under their own names, unprefixed.
	BareNames bool
}

// MCPSeparator joins a server's name and its tool's name.
const MCPSeparator = "__"

// mcpConnectTimeout bounds starting one server and listing its tools, so a
// server that hangs cannot hold the daemon's start-up.
const mcpConnectTimeout = 30 * time.Second

// ConnectMCP connects to each server, lists its tools and adds them to r as
// "<server>__<tool>" (characters other than letters, digits, '_' and '-'
// become '_', and the name is cut to 64), with Source "mcp:<server>". A
// server that fails to start or to list its tools is logged and skipped; a
// tool whose name collides is logged and skipped. The error is non-nil only
// for a configuration mistake (no name, both or neither of Command and URL,
// a repeated name), and then nothing is connected. close ends every session
// and removes the tools it added.
func ConnectMCP(ctx context.Context, servers []MCPServer, r *Registry, log zerolog.Logger) (close func() error, err error) {
	if err := validateMCPServers(servers); err != nil {
		return func() error { return nil }, err
	}
	targets := make([]mcpTarget, len(servers))
	for i, s := range servers {
		targets[i] = mcpTarget{server: s, transport: mcpTransport(s, log)}
	}
	return connectMCPTargets(ctx, targets, r, log), nil
}

func validateMCPServers(servers []MCPServer) error {
	var errs []error
	seen := make(map[string]bool, len(servers))
	for i, s := range servers {
		switch {
		case !ValidName(s.Name):
			errs = append(errs, fmt.Errorf("mcp server %d: name %q must be letters, digits, '_' or '-'", i, s.Name))
		case seen[s.Name]:
			errs = append(errs, fmt.Errorf("mcp server %q: listed twice", s.Name))
		case len(s.Command) > 0 && s.URL != "":
			errs = append(errs, fmt.Errorf("mcp server %q: set command or url, not both", s.Name))
		case len(s.Command) == 0 && s.URL == "":
			errs = append(errs, fmt.Errorf("mcp server %q: set command (stdio) or url (streamable HTTP)", s.Name))
		case len(s.Command) > 0 && s.Command[0] == "":
			errs = append(errs, fmt.Errorf("mcp server %q: empty command", s.Name))
		}
		seen[s.Name] = true
	}
	return errors.Join(errs...)
}

// mcpTarget is a server with the transport to reach it; tests use the SDK's
// in-memory transport here.
type mcpTarget struct {
	server    MCPServer
	transport mcp.Transport
}

func mcpTransport(s MCPServer, log zerolog.Logger) mcp.Transport {
	if len(s.Command) > 0 {
		// Not CommandContext: the process must outlive the connect context.
		cmd := exec.Command(s.Command[0], s.Command[1:]...)
		cmd.Env = os.Environ()
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &logLines{log: log.With().Str("mcp_server", s.Name).Logger()}
		return &mcp.CommandTransport{Command: cmd}
	}
	return &mcp.StreamableClientTransport{
		Endpoint:   s.URL,
		HTTPClient: &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: s.Headers}},
		// agentd lists tools once at connect and does not act on server
		// notifications, so the standing GET stream would only cost a
		// connection per server.
		DisableStandaloneSSE: true,
	}
}

// connectMCPTargets connects all targets in parallel (one slow server does
// not delay the others), then registers tools in configuration order so the
// outcome of a name collision does not depend on timing.
func connectMCPTargets(ctx context.Context, targets []mcpTarget, r *Registry, log zerolog.Logger) func() error {
	type connected struct {
		session *mcp.ClientSession
		tools   []*mcp.Tool
		err     error
	}
	results := make([]connected, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			s, tl, err := connectMCPServer(ctx, t, log)
			results[i] = connected{session: s, tools: tl, err: err}
		})
	}
	wg.Wait()

	var sessions []*mcp.ClientSession
	var added []string
	for i, t := range targets {
		res := results[i]
		slog := log.With().Str("mcp_server", t.server.Name).Logger()
		if res.err != nil {
			slog.Error().Err(res.err).Msg("mcp server skipped: it did not start or list its tools")
			continue
		}
		sessions = append(sessions, res.session)
		n := 0
		for _, mt := range res.tools {
			tool := mcpTool(t.server, res.session, mt)
			if err := r.Add(tool); err != nil {
				slog.Warn().Err(err).Str("mcp_tool", mt.Name).Msg("mcp tool skipped")
				continue
			}
			added = append(added, tool.Name)
			n++
		}
		slog.Info().Int("tools", n).Msg("mcp server connected")
	}

	var once sync.Once
	var closeErr error
	return func() error {
		once.Do(func() {
			for _, name := range added {
				r.Remove(name)
			}
			var errs []error
			for _, s := range sessions {
				if err := s.Close(); err != nil {
					errs = append(errs, err)
				}
			}
			closeErr = errors.Join(errs...)
		})
		return closeErr
	}
}

func connectMCPServer(ctx context.Context, t mcpTarget, log zerolog.Logger) (*mcp.ClientSession, []*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	sdkLog := log.With().Str("component", "mcp").Str("mcp_server", t.server.Name).Logger().Level(zerolog.WarnLevel)
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd", Version: "1"}, &mcp.ClientOptions{
		Logger: slog.New(zerolog.NewSlogHandler(sdkLog)),
	})
	session, err := client.Connect(ctx, t.transport, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	var list []*mcp.Tool
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			_ = session.Close()
			return nil, nil, fmt.Errorf("list tools: %w", err)
		}
		list = append(list, tool)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return session, list, nil
}

// mcpToolName builds the registry name of an MCP tool.
func mcpToolName(server, tool string, bare bool) string {
	name := server + MCPSeparator + sanitizeName(tool)
	if bare {
		name = sanitizeName(tool)
	}
	if len(name) > maxNameLen {
		name = name[:maxNameLen]
	}
	return name
}

func sanitizeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

func mcpTool(s MCPServer, session *mcp.ClientSession, mt *mcp.Tool) Tool {
	params := json.RawMessage(`{"type":"object","properties":{}}`)
	if mt.InputSchema != nil {
		if b, err := json.Marshal(mt.InputSchema); err == nil && len(b) > 0 && b[0] == '{' {
			params = b
		}
	}
	desc := mt.Description
	if desc == "" {
		desc = mt.Title
	}
	remote := mt.Name
	untrusted := !s.Trusted
	name := mcpToolName(s.Name, mt.Name, s.BareNames)
	return Tool{
		Name:        name,
		Description: desc,
		Parameters:  params,
		Source:      "mcp:" + s.Name,
		Run: func(ctx context.Context, args json.RawMessage) (Result, error) {
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: remote, Arguments: args})
			if err != nil {
				// A JSON-RPC error is the server refusing this call (bad
				// arguments, unknown tool): the model can act on it. Anything
				// else is the connection failing, a system error.
				var we *jsonrpc.Error
				if errors.As(err, &we) {
					return Result{Text: fmt.Sprintf("The MCP server %s refused the call to %s: %s", s.Name, remote, we.Message), IsError: true, Untrusted: untrusted}, nil
				}
				return Result{}, fmt.Errorf("mcp %s: call %s: %w", s.Name, remote, err)
			}
			out := convertMCPResult(res)
			out.Untrusted = untrusted
			return out, nil
		},
	}
}

// convertMCPResult flattens MCP content into one text plus images. Content
// agentd cannot pass on (audio, binary resources) is named rather than
// dropped silently, so the model knows something was there.
func convertMCPResult(res *mcp.CallToolResult) Result {
	var parts []string
	var images []chat.Image
	for _, c := range res.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		case *mcp.ImageContent:
			images = append(images, chat.Image{MediaType: x.MIMEType, Data: x.Data})
		case *mcp.EmbeddedResource:
			if x.Resource == nil {
				continue
			}
			if x.Resource.Text != "" {
				parts = append(parts, x.Resource.Text)
			} else {
				parts = append(parts, fmt.Sprintf("[binary resource %s (%s) not shown]", x.Resource.URI, x.Resource.MIMEType))
			}
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", x.Name, x.URI))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio (%s) not shown]", x.MIMEType))
		default:
			parts = append(parts, fmt.Sprintf("[%T content not shown]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return Result{Text: strings.Join(parts, "\n"), IsError: res.IsError, Images: images}
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// logLines writes a child process's stderr to the log, one entry a line.
type logLines struct {
	log zerolog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Info().Str("stderr", strings.TrimRight(string(l.buf[:i]), "\r")).Msg("mcp server output")
		l.buf = l.buf[i+1:]
	}
	// A process that never writes a newline must not grow the buffer forever.
	if len(l.buf) > 64<<10 {
		l.log.Info().Str("stderr", string(l.buf)).Msg("mcp server output")
		l.buf = nil
	}
	return len(p), nil
}

var _ io.Writer = (*logLines)(nil)
