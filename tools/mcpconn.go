package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// Reconnect backoff after a failed attempt: doubling from the first to the
// cap. The first attempt after a server died is made at once.
const (
	mcpBackoffFirst = time.Second
	mcpBackoffMax   = time.Minute
)

// errMCPDown is what a call gets while a dead server's backoff runs.
var errMCPDown = errors.New("the MCP server is not connected")

// mcpConn is one server's connection. It connects on demand: a server
// that died (its process exited, its HTTP session is gone, its transport
// failed) is reconnected by the next call, no sooner than the backoff after
// a failed attempt allows. It owns one goroutine per live session, which
// ends when that session does.
type mcpConn struct {
	name string
	dial func() (mcp.Transport, error) // a new transport for each attempt
	log  zerolog.Logger
	now  func() time.Time

	mu       sync.Mutex
	session  *mcp.ClientSession
	dialing  chan struct{} // closed when the attempt under way ends
	failures int           // failed attempts in a row
	retryAt  time.Time
	lastErr  error
	closed   bool
}

func newMCPConn(name string, dial func() (mcp.Transport, error), log zerolog.Logger) *mcpConn {
	return &mcpConn{name: name, dial: dial, log: log, now: time.Now}
}

// get returns the live session, connecting when there is none.
func (c *mcpConn) get(ctx context.Context) (*mcp.ClientSession, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: agentd is shutting its connections", errMCPDown)
		case c.session != nil:
			s := c.session
			c.mu.Unlock()
			return s, nil
		case c.dialing != nil:
			wait := c.dialing
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if left := c.retryAt.Sub(c.now()); left > 0 {
			err := fmt.Errorf("%w (last attempt: %v); agentd tries again in %s", errMCPDown, c.lastErr, left.Round(time.Second))
			c.mu.Unlock()
			return nil, err
		}
		done := make(chan struct{})
		c.dialing = done
		c.mu.Unlock()

		s, err := c.connect(ctx)

		c.mu.Lock()
		c.dialing = nil
		close(done)
		if err == nil && c.closed {
			_ = s.Close()
			err = fmt.Errorf("%w: agentd is shutting its connections", errMCPDown)
		}
		if err != nil {
			c.failures++
			c.retryAt = c.now().Add(min(mcpBackoffFirst<<(c.failures-1), mcpBackoffMax))
			c.lastErr = err
			c.mu.Unlock()
			return nil, err
		}
		if c.failures > 0 || c.lastErr != nil {
			c.log.Info().Msg("mcp server reconnected")
		}
		c.failures, c.lastErr, c.session = 0, nil, s
		c.mu.Unlock()
		go c.watch(s)
		return s, nil
	}
}

func (c *mcpConn) connect(ctx context.Context) (*mcp.ClientSession, error) {
	t, err := c.dial()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	sdkLog := c.log.With().Str("component", "mcp").Logger().Level(zerolog.WarnLevel)
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd", Version: "1"}, &mcp.ClientOptions{
		Logger: slog.New(zerolog.NewSlogHandler(sdkLog)),
	})
	s, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return s, nil
}

// watch forgets s once it ends, so the next call reconnects.
func (c *mcpConn) watch(s *mcp.ClientSession) {
	err := s.Wait()
	c.drop(s, err)
}

// drop forgets s (if it is still the live session) and closes it.
func (c *mcpConn) drop(s *mcp.ClientSession, why error) {
	c.mu.Lock()
	live := c.session == s
	if live {
		c.session = nil
		c.lastErr = why
	}
	c.mu.Unlock()
	if live {
		c.log.Warn().Err(why).Msg("mcp server connection lost; the next call reconnects")
		_ = s.Close()
	}
}

// call runs one tool call. A connection that fails is dropped; a call the
// server never saw (its HTTP session had gone) is made once more on a new
// connection. A call that may have reached the server is not repeated.
func (c *mcpConn) call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		s, err := c.get(ctx)
		if err != nil {
			return nil, err
		}
		res, err := s.CallTool(ctx, p)
		if err == nil || isRPCError(err) || ctx.Err() != nil {
			return res, err
		}
		c.drop(s, err)
		if attempt > 0 || !errors.Is(err, mcp.ErrSessionMissing) {
			return nil, fmt.Errorf("%w; the next call reconnects", err)
		}
	}
}

func isRPCError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we)
}

// close ends the live session and refuses later calls.
func (c *mcpConn) close() error {
	c.mu.Lock()
	s := c.session
	c.session, c.closed = nil, true
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}
