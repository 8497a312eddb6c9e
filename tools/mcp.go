package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
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
	// Headers are sent with every HTTP request (for example Authorization);
	// ${VAR} in a value is replaced by the variable from agentd's
	// environment, so a token need not sit in the configuration file.
	Headers map[string]string
	// MaxResultBytes bounds one message from the server. A larger answer
	// fails that call only: it is dropped unread and the model is told, and
	// the connection stays up. Optional. Defaults to 8 MiB.
	MaxResultBytes int
	// Trusted says the server's output is the operator's own data; otherwise
	// every result is marked Untrusted, as outside text.
	Trusted bool
	// BareNames registers the tools under their own names, unprefixed.
	BareNames bool
	// MaxTools refuses a server that lists more tools (an application's,
	// held to a toolset's bound; its pages could go on for the whole
	// connect timeout). Optional. Defaults to no bound.
	MaxTools int
	// MaxToolBytes refuses a server whose tools take more bytes as listed
	// (their JSON: names, descriptions, schemas), with ErrToolsTooLarge and
	// no page read after: an application's, held to what its toolset could
	// bring in a request body; one tool a page, each page up to
	// MaxResultBytes, would hold megabytes a tool. Optional. Defaults to no
	// bound.
	MaxToolBytes int
}

// ErrToolsTooLarge refuses a server whose tools take more than its
// MaxToolBytes.
var ErrToolsTooLarge = errors.New("the server's tools take too many bytes")

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
// a repeated name), and then nothing is connected. Each answer is bounded
// by the server's MaxResultBytes: a larger one fails that call only. A
// server that dies later is reconnected by the next call to one of its
// tools (see mcpConn). close ends every session and removes the tools it
// added.
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

// mcpTarget is a server with the way to reach it: a new transport for each
// connection (a stdio server is started again); tests use the SDK's
// in-memory transport here.
type mcpTarget struct {
	server    MCPServer
	transport func() (mcp.Transport, error)
}

func mcpTransport(s MCPServer, log zerolog.Logger) func() (mcp.Transport, error) {
	limit := limitOrDefault(s.MaxResultBytes)
	log = log.With().Str("mcp_server", s.Name).Logger()
	if len(s.Command) > 0 {
		return func() (mcp.Transport, error) { return &stdioTransport{server: s, limit: limit, log: log}, nil }
	}
	return func() (mcp.Transport, error) {
		headers, err := expandHeaders(s.Headers)
		if err != nil {
			return nil, err
		}
		return streamableTransport(s.URL, http.DefaultTransport, headers, limit, log), nil
	}
}

// streamableTransport reaches a streamable-HTTP server through base, with
// headers on every request and each answer bounded by limit. It follows
// a redirect only within the server's origin (sameOrigin).
func streamableTransport(url string, base http.RoundTripper, headers map[string]string, limit int, log zerolog.Logger) *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{
		Endpoint: url,
		HTTPClient: &http.Client{Transport: httpGuard{base: headerTransport{base: base, headers: headers}, limit: limit, log: log},
			CheckRedirect: sameOrigin},
		// agentd lists tools once at connect and does not act on server
		// notifications, so the standing GET stream would only cost a
		// connection per server.
		DisableStandaloneSSE: true,
		// httpGuard bounds each event; this only must not bite first.
		MaxEventSize: 2*limit + headKeep,
	}
}

// envRef is a ${VAR} reference in a header value.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandHeaders replaces ${VAR} in header values from the environment; a
// variable that is not set is an error, not an empty token.
func expandHeaders(h map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(h))
	var missing []string
	for k, v := range h {
		out[k] = envRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := ref[2 : len(ref)-1]
			val, ok := os.LookupEnv(name)
			if !ok {
				missing = append(missing, k+": ${"+name+"}")
			}
			return val
		})
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("header %s: the variable is not set in agentd's environment", strings.Join(missing, ", "))
	}
	return out, nil
}

// stdioTransport starts the server's command for each connection and reads
// its output through a stdioGuard. The SDK's own command transport reads
// with its frame limit, past which it closes the whole connection.
type stdioTransport struct {
	server MCPServer
	limit  int
	log    zerolog.Logger
}

// mcpStopWait is how long a stopping server gets after its stdin closes,
// and again after SIGTERM, before it is killed.
const mcpStopWait = 5 * time.Second

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	s := t.server
	// Not CommandContext: the process must outlive the connect context.
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = &logLines{log: t.log}
	cmd.WaitDelay = mcpStopWait
	// Our own pipe, not StdoutPipe: Wait runs beside the reads, and must not
	// close the pipe before everything the server wrote is read.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	_ = w.Close()
	if err != nil {
		_ = out.Close()
		return nil, err
	}
	p := &childProcess{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go p.wait()
	// MaxLineLength -1: the guard already bounds every line.
	return (&mcp.IOTransport{Reader: newStdioGuard(out, t.limit, t.log), Writer: p, MaxLineLength: -1}).Connect(ctx)
}

// childProcess is a running stdio server: writes go to its stdin; Close
// stops it (stdin closed, then SIGTERM, then kill) and reaps it.
type childProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
}

func (p *childProcess) wait() {
	_ = p.cmd.Wait()
	close(p.exited)
}

func (p *childProcess) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *childProcess) Close() error {
	_ = p.stdin.Close()
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Kill} {
		select {
		case <-p.exited:
			return nil
		case <-time.After(mcpStopWait):
		}
		_ = p.cmd.Process.Signal(sig)
	}
	<-p.exited
	return nil
}

// connectMCPTargets connects all targets in parallel (one slow server does
// not delay the others), then registers tools in configuration order so the
// outcome of a name collision does not depend on timing.
func connectMCPTargets(ctx context.Context, targets []mcpTarget, r *Registry, log zerolog.Logger) func() error {
	type connected struct {
		conn  *mcpConn
		tools []*mcp.Tool
		err   error
	}
	results := make([]connected, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			conn := newMCPConn(t.server.Name, t.transport, log.With().Str("mcp_server", t.server.Name).Logger())
			tl, err := listMCPTools(ctx, conn, t.server)
			results[i] = connected{conn: conn, tools: tl, err: err}
		})
	}
	wg.Wait()

	var conns []*mcpConn
	var added []string
	for i, t := range targets {
		res := results[i]
		slog := log.With().Str("mcp_server", t.server.Name).Logger()
		if res.err != nil {
			_ = res.conn.close()
			slog.Error().Err(res.err).Msg("mcp server skipped: it did not start or list its tools")
			continue
		}
		conns = append(conns, res.conn)
		n := 0
		for _, mt := range res.tools {
			tool := mcpTool(t.server, res.conn, mt, slog)
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
			for _, c := range conns {
				if err := c.close(); err != nil {
					errs = append(errs, err)
				}
			}
			closeErr = errors.Join(errs...)
		})
		return closeErr
	}
}

// listMCPTools connects and lists the server's tools, sorted by name; past
// s.MaxTools tools or s.MaxToolBytes bytes of them is an error, and no page
// after is read.
func listMCPTools(ctx context.Context, conn *mcpConn, s MCPServer) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	session, err := conn.get(ctx)
	if err != nil {
		return nil, err
	}
	var list []*mcp.Tool
	size := 0
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if s.MaxTools > 0 && len(list) == s.MaxTools {
			return nil, fmt.Errorf("list tools: the server lists more than %d tools", s.MaxTools)
		}
		if s.MaxToolBytes > 0 {
			b, err := json.Marshal(tool)
			if err != nil {
				return nil, fmt.Errorf("list tools: tool %q: %w", tool.Name, err)
			}
			if size += len(b); size > s.MaxToolBytes {
				return nil, fmt.Errorf("list tools: %w: more than %d bytes of names, descriptions and schemas", ErrToolsTooLarge, s.MaxToolBytes)
			}
		}
		list = append(list, tool)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, nil
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

// mcpTool is the registry's tool for the server's tool mt. Its calls are
// held to mt's inputSchema, as an application's tools are to theirs
// (argcheck.go): a call the schema does not take is answered with the
// same error result and never reaches the server. A schema agentd cannot
// compile (not of "type": "object", a reference that loops) is logged
// and its calls go to the server unchecked, which checks its own.
func mcpTool(s MCPServer, conn *mcpConn, mt *mcp.Tool, log zerolog.Logger) Tool {
	params := json.RawMessage(`{"type":"object","properties":{}}`)
	if mt.InputSchema != nil {
		if b, err := json.Marshal(mt.InputSchema); err == nil && len(b) > 0 && b[0] == '{' {
			params = b
		}
	}
	args, err := compileArgs(params)
	if err != nil {
		log.Warn().Err(err).Str("mcp_tool", mt.Name).Msg("mcp tool's input schema cannot be checked: its calls go to the server unchecked")
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
		args:        args,
		Run: func(ctx context.Context, args json.RawMessage) (Result, error) {
			res, err := conn.call(ctx, &mcp.CallToolParams{Name: remote, Arguments: args})
			if err != nil {
				// A JSON-RPC error is the server refusing this call (bad
				// arguments, unknown tool) or agentd refusing its oversize
				// answer: the model can act on it. Anything else is the
				// connection failing, a system error.
				var we *jsonrpc.Error
				switch {
				case errors.As(err, &we) && we.Code == codeTooLarge:
					return Result{Text: tooLargeText(s.Name, remote, we), IsError: true, Untrusted: untrusted}, nil
				case errors.As(err, &we):
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

// sameOrigin follows a redirect to the same scheme, host and port alone:
// headerTransport adds the server's configured headers (its token among
// them) to every request, so a redirect elsewhere would hand them to
// another host, which net/http's own policy does not prevent for headers
// added below the client.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if o := via[0].URL; req.URL.Scheme != o.Scheme || req.URL.Host != o.Host {
		return fmt.Errorf("the server redirected to %s://%s, another origin than its url's (%s://%s), which is not followed: its headers would go there; set the url to where the server is",
			req.URL.Scheme, req.URL.Host, o.Scheme, o.Host)
	}
	return nil
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
