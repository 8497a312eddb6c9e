package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd/agentd/api"
)

func init() {
	var addr, token, chatID, model string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat with a running daemon in the terminal (answers stream in)",
		Long: "Reads your messages line by line from standard input and streams each answer; /help lists the commands. " +
			"Ctrl-C stops the answer being streamed; a second Ctrl-C (or one at the prompt) quits.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &api.Client{BaseURL: addr, Token: token}
			intr := make(chan os.Signal, 1)
			signal.Notify(intr, os.Interrupt)
			defer signal.Stop(intr)
			out := cmd.OutOrStdout()
			err := runChat(cmd.Context(), c, chatID, model, cmd.InOrStdin(), out, intr, isTerminal(out))
			var aerr *api.Error
			if errors.As(err, &aerr) && aerr.Status == http.StatusUnauthorized {
				return fmt.Errorf("%w (pass the daemon's token with --token, or set AGENTD_TOKEN)", err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", envOr("AGENTD_ADDR", "http://127.0.0.1:8420"), "daemon address")
	f.StringVar(&token, "token", os.Getenv("AGENTD_TOKEN"), "bearer token (default $AGENTD_TOKEN)")
	f.StringVar(&chatID, "chat", "", "continue this chat id (default: a new chat)")
	f.StringVar(&model, "model", "", "model of a new chat, provider/model")
	rootCmd.AddCommand(cmd)
}

// isTerminal reports whether out is a terminal: only there does the
// spinner redraw its line (piped, its escape codes would be noise).
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// chatHelp is what /help prints.
const chatHelp = `Type a message and press Enter; the answer streams in.
  /compact [focus]  summarise the start of this chat now (keeping what focus names)
  /model NAME       switch this chat to provider/model from the next turn
  /new              start a new chat
  /chats            list your chats and pick one to continue
  /memories         list what agentd remembers about you
  /help             this help
  /quit             leave (so does Ctrl-D)
Ctrl-C stops the answer being streamed (the daemon keeps the turn); a second Ctrl-C quits.`

// resumeMessages is how many of a resumed chat's last messages are shown.
const resumeMessages = 6

// terminal is one `agentd chat` session: the chat it talks in, the lines
// typed, and the next step a too-long problem offered.
type terminal struct {
	c      *api.Client
	out    io.Writer
	lines  <-chan string
	intr   <-chan os.Signal
	chatID string
	model  string
	live   bool // out is a terminal: the spinner draws
	// next is the step the last turn's too-long problem offered; an empty
	// line takes it.
	next *api.NextStep
}

// errQuit ends the session without an error.
var errQuit = errors.New("quit")

// runChat talks to the daemon until the input ends, /quit, or a Ctrl-C at
// the prompt. intr carries Ctrl-C (nil: none); live says out is a
// terminal, where the spinner shows what a turn waits for.
func runChat(ctx context.Context, c *api.Client, chatID, model string, in io.Reader, out io.Writer, intr <-chan os.Signal, live bool) error {
	t := &terminal{c: c, out: out, intr: intr, model: model, live: live}
	stop := make(chan struct{})
	defer close(stop)
	lines, readErr := readLines(in, stop)
	t.lines = lines
	var err error
	if chatID == "" {
		err = t.newChat(ctx)
	} else {
		err = t.resume(ctx, chatID)
	}
	if err != nil {
		return err
	}
	for {
		fmt.Fprint(out, "> ")
		line, ok, quit := t.readLine()
		if quit {
			fmt.Fprintln(out)
			return nil
		}
		if !ok {
			fmt.Fprintln(out)
			return readErr()
		}
		if err := t.handle(ctx, line); errors.Is(err, errQuit) {
			return nil
		} else if err != nil {
			fmt.Fprintln(out, "error:", err)
		}
	}
}

// readLines reads in line by line on its own goroutine, so a Ctrl-C at the
// prompt is heard while a read blocks. The goroutine ends when in does
// (EOF or error) or, at its next line, once stop closes; err reports the
// read's error after the channel closes.
func readLines(in io.Reader, stop <-chan struct{}) (<-chan string, func() error) {
	ch := make(chan string)
	var mu sync.Mutex
	var readErr error
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			case <-stop:
				return
			}
		}
		mu.Lock()
		readErr = sc.Err()
		mu.Unlock()
	}()
	return ch, func() error { mu.Lock(); defer mu.Unlock(); return readErr }
}

// readLine waits for the next line; quit reports a Ctrl-C.
func (t *terminal) readLine() (line string, ok, quit bool) {
	select {
	case line, ok = <-t.lines:
		return strings.TrimSpace(line), ok, false
	case <-t.intr:
		return "", false, true
	}
}

// handle runs one typed line: a command, the offered next step (an empty
// line), or a message.
func (t *terminal) handle(ctx context.Context, line string) error {
	if line == "" {
		if t.next == nil {
			return nil
		}
		return t.takeNextStep(ctx)
	}
	t.next = nil
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch cmd {
	case "/help":
		fmt.Fprintln(t.out, chatHelp)
	case "/quit", "/exit":
		return errQuit
	case "/compact":
		return t.compact(ctx, arg)
	case "/model":
		return t.switchModel(ctx, arg)
	case "/new":
		return t.newChat(ctx)
	case "/chats":
		return t.pickChat(ctx)
	case "/memories":
		return t.memories(ctx)
	default:
		if strings.HasPrefix(cmd, "/") && !strings.Contains(cmd[1:], "/") {
			return fmt.Errorf("no command %s (/help lists them)", cmd)
		}
		return t.send(ctx, line)
	}
	return nil
}

func (t *terminal) newChat(ctx context.Context) error {
	ch, err := t.c.CreateChat(ctx, api.CreateChatRequest{Model: t.model})
	if err != nil {
		return fmt.Errorf("create chat: %w", err)
	}
	t.chatID, t.model = ch.ID, ch.Model
	fmt.Fprintf(t.out, "chat %s on %s — type a message, /help for commands, Ctrl-D to leave\n", ch.ID, ch.Model)
	return nil
}

// resume continues a chat, showing its last messages.
func (t *terminal) resume(ctx context.Context, id string) error {
	ch, err := t.c.Chat(ctx, id)
	if err != nil {
		return fmt.Errorf("chat %s: %w", id, err)
	}
	t.chatID, t.model = ch.ID, ch.Model
	fmt.Fprintf(t.out, "chat %s on %s%s — %d messages\n", ch.ID, ch.Model, titled(ch.Title), ch.Messages)
	msgs, err := t.c.TranscriptFrom(ctx, id, max(1, ch.Messages-resumeMessages+1))
	if err != nil {
		return fmt.Errorf("chat %s: %w", id, err)
	}
	for _, m := range msgs {
		switch m.Role {
		case api.RoleUser:
			fmt.Fprintf(t.out, "> %s\n", m.Content)
		case api.RoleAssistant:
			if m.Content != "" {
				fmt.Fprintln(t.out, m.Content)
			}
		}
	}
	return nil
}

func titled(title string) string {
	if title == "" {
		return ""
	}
	return ": " + title
}

func (t *terminal) compact(ctx context.Context, focus string) error {
	var res api.Compacted
	if err := t.c.Post(ctx, "/v1/chats/"+t.chatID+"/compact", api.CompactRequest{Focus: focus}, &res); err != nil {
		return err
	}
	fmt.Fprintf(t.out, "— earlier messages are summarised for %s (from seq %d on, word for word) —\n", res.Model, res.FirstKeptSeq)
	return nil
}

func (t *terminal) switchModel(ctx context.Context, model string) error {
	if model == "" {
		ms, err := t.c.Models(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(t.out, "this chat is on %s; /model NAME switches to one of:\n", t.model)
		for _, m := range ms.Models {
			fmt.Fprintf(t.out, "  %s (window %d)\n", m.ID, m.Window)
		}
		return nil
	}
	ch, err := t.c.PatchChat(ctx, t.chatID, api.PatchChatRequest{Model: &model})
	if err != nil {
		return err
	}
	t.model = ch.Model
	fmt.Fprintf(t.out, "— this chat is on %s from the next turn —\n", ch.Model)
	return nil
}

// pickChat lists the first page of chats and continues the one whose
// number is typed next (an empty line stays).
func (t *terminal) pickChat(ctx context.Context) error {
	list, err := t.c.Chats(ctx, "")
	if err != nil {
		return err
	}
	slices.SortStableFunc(list.Chats, func(a, b api.Chat) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for i, ch := range list.Chats {
		mark := " "
		if ch.ID == t.chatID {
			mark = "*"
		}
		title := ch.Title
		if title == "" {
			title = "(untitled)"
		}
		fmt.Fprintf(t.out, "%s%2d. %s — %s, %d messages, %s\n", mark, i+1, title, ch.Model, ch.Messages, ch.CreatedAt.Local().Format("2006-01-02 15:04"))
	}
	if list.Next != "" {
		fmt.Fprintln(t.out, "   (more chats: the console lists them all)")
	}
	fmt.Fprint(t.out, "pick a number (Enter stays here): ")
	line, ok, quit := t.readLine()
	if quit || !ok {
		return errQuit
	}
	if line == "" {
		return nil
	}
	n, err := strconv.Atoi(line)
	if err != nil || n < 1 || n > len(list.Chats) {
		return fmt.Errorf("%q is not a number from 1 to %d", line, len(list.Chats))
	}
	return t.resume(ctx, list.Chats[n-1].ID)
}

func (t *terminal) memories(ctx context.Context) error {
	ms, err := t.c.Memories(ctx, "")
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		fmt.Fprintln(t.out, "agentd remembers nothing about you yet")
	}
	for _, m := range ms {
		state := ""
		if m.State != api.MemoryActive {
			state = " [" + m.State + "]"
		}
		fmt.Fprintf(t.out, "  • %s%s\n", m.Text, state)
	}
	return nil
}

// takeNextStep does what the last too-long problem offered.
func (t *terminal) takeNextStep(ctx context.Context) error {
	step := t.next
	t.next = nil
	switch step.Action {
	case "switch-model":
		if err := t.switchModel(ctx, step.Model); err != nil {
			return err
		}
		fmt.Fprintln(t.out, "send your message again to have it answered there")
	case "new-chat":
		if err := t.newChat(ctx); err != nil {
			return err
		}
		if step.Message != "" {
			return t.send(ctx, step.Message)
		}
	default:
		return fmt.Errorf("the next step %q is not one this client knows", step.Action)
	}
	return nil
}

// offer prints a too-long problem's next step and keeps it for the next
// empty line.
func (t *terminal) offer(step *api.NextStep) {
	switch step.Action {
	case "switch-model":
		fmt.Fprintf(t.out, "press Enter to switch this chat to %s (window %d), or type a message\n", step.Model, step.Window)
	case "new-chat":
		fmt.Fprintln(t.out, "press Enter to start a new chat with this message, or type a message")
	default:
		return
	}
	t.next = step
}

// send runs one turn, streaming its answer. A Ctrl-C stops the stream (the
// daemon finishes the turn into the transcript); a second one quits.
func (t *terminal) send(ctx context.Context, text string) error {
	turnCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sp := newSpinner(t.out, t.live)
	defer sp.stop()
	type result struct {
		res api.TurnResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := t.c.Send(turnCtx, t.chatID, api.SendMessageRequest{Content: text}, func(ev api.Event) { t.show(sp, ev) })
		done <- result{res, err}
	}()
	cancelled := false
	for {
		select {
		case r := <-done:
			sp.stop()
			if cancelled {
				fmt.Fprintln(t.out, "\n— stopped; the daemon finishes this turn into the chat —")
				return nil
			}
			if r.err != nil {
				return r.err
			}
			if p := r.res.Problem; p != nil && p.NextStep != nil {
				t.offer(p.NextStep)
			}
			return nil
		case <-t.intr:
			if cancelled {
				<-done
				return errQuit
			}
			cancelled = true
			cancel()
		}
	}
}

// show prints one event of a turn: answer text as it streams, tools and
// cards on their own lines, and what the turn waits for on the spinner.
func (t *terminal) show(sp *spinner, ev api.Event) {
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Type {
	case api.EventTurnStarted:
		sp.set("waiting for " + t.model)
	case api.EventMessageDelta:
		sp.print(fmt.Sprint(d["text"]))
	case api.EventMessageReset:
		// A terminal cannot take back what it printed: the retry's answer
		// follows a marked break.
		sp.print("\n— that answer was taken back; asked again —\n")
	case api.EventThinkingDelta:
		sp.set(t.model + " is thinking")
	case api.EventToolCall:
		sp.print(fmt.Sprintf("\n[tool %v %v]\n", d["name"], d["arguments"]))
		sp.set(fmt.Sprintf("running %v", d["name"]))
	case api.EventToolResult:
		sp.set("waiting for " + t.model)
	case api.EventCompactionStarted:
		sp.set("compacting this turn's tool results")
	case api.EventFoldWaiting:
		what := fmt.Sprint(d["waiting_for"])
		if detail, ok := d["detail"].(string); ok && detail != "" {
			what = detail
		}
		ms, _ := d["elapsed_ms"].(float64)
		sp.setSince("waiting for "+what, time.Duration(ms)*time.Millisecond)
	case api.EventToolProgress:
		what := fmt.Sprintf("%v: %v", d["tool"], d["message"])
		if total, _ := d["total"].(float64); total > 0 {
			done, _ := d["done"].(float64)
			what += fmt.Sprintf(" (%d of %d)", int(done), int(total))
		}
		sp.set(what)
	case api.EventCompacted:
		sp.print(fmt.Sprintf("\n— earlier messages are summarised for %v —\n", d["model"]))
	case api.EventHealed:
		sp.print(fmt.Sprintf("\n— the request was too long for %v; earlier messages are summarised and it was sent again —\n", d["model"]))
	case api.EventTurnProblem:
		sp.print(fmt.Sprintf("\n[problem: %v]\n", d["message"]))
	case api.EventTurnCompleted:
		sp.print("\n")
	}
}

// spinner is the one line that says what a turn waits for, redrawn in
// place every spinEvery while nothing streams; text the turn prints clears
// it first. It is safe for concurrent use.
type spinner struct {
	mu     sync.Mutex
	out    io.Writer
	what   string // what is waited for; "" shows nothing
	since  time.Time
	frame  int
	shown  bool
	live   bool // false: nothing is drawn, text passes through
	ticker *time.Ticker
	done   chan struct{}
	once   sync.Once
}

const spinEvery = 120 * time.Millisecond

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func newSpinner(out io.Writer, live bool) *spinner {
	s := &spinner{out: out, live: live, ticker: time.NewTicker(spinEvery), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *spinner) run() {
	for {
		select {
		case <-s.ticker.C:
			s.mu.Lock()
			if s.what != "" {
				s.frame++
				s.draw()
			}
			s.mu.Unlock()
		case <-s.done:
			return
		}
	}
}

// set shows what the turn waits for now, at once.
func (s *spinner) set(what string) { s.setSince(what, 0) }

// setSince shows what the turn has waited for since elapsed ago.
func (s *spinner) setSince(what string, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.what, s.since = what, time.Now().Add(-elapsed)
	s.draw()
}

// print clears the spinner and writes text; the spinner stays hidden until
// the next set.
func (s *spinner) print(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	s.what = ""
	fmt.Fprint(s.out, text)
}

// stop ends the spinner's goroutine and clears its line.
func (s *spinner) stop() {
	s.once.Do(func() {
		s.ticker.Stop()
		close(s.done)
		s.mu.Lock()
		s.clear()
		s.what = ""
		s.mu.Unlock()
	})
}

func (s *spinner) draw() {
	if !s.live {
		return
	}
	s.clear()
	fmt.Fprintf(s.out, "%s %s… %ds", spinFrames[s.frame%len(spinFrames)], s.what, int(time.Since(s.since).Seconds()))
	s.shown = true
}

func (s *spinner) clear() {
	if s.shown {
		fmt.Fprint(s.out, "\r\033[K")
		s.shown = false
	}
}
