package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentd/agentd/api"
)

func init() {
	var addr, token, chatID, model string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat with a running daemon in the terminal (answers stream in)",
		Long:  "Reads your messages line by line from standard input and streams each answer. /compact [what to keep] folds the chat now.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &api.Client{BaseURL: addr, Token: token}
			return runChat(cmd.Context(), c, chatID, model, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", envOr("AGENTD_ADDR", "http://127.0.0.1:8420"), "daemon address")
	f.StringVar(&token, "token", os.Getenv("AGENTD_TOKEN"), "bearer token")
	f.StringVar(&chatID, "chat", "", "continue this chat id (default: a new chat)")
	f.StringVar(&model, "model", "", "model of a new chat, provider/model")
	rootCmd.AddCommand(cmd)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func runChat(ctx context.Context, c *api.Client, chatID, model string, in io.Reader, out io.Writer) error {
	if chatID == "" {
		ch, err := c.CreateChat(ctx, api.CreateChatRequest{Model: model})
		if err != nil {
			return fmt.Errorf("create chat: %w", err)
		}
		chatID = ch.ID
		fmt.Fprintf(out, "chat %s on %s — type a message, Ctrl-D to leave\n", ch.ID, ch.Model)
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for {
		fmt.Fprint(out, "> ")
		if !sc.Scan() {
			fmt.Fprintln(out)
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if focus, ok := strings.CutPrefix(line, "/compact"); ok {
			if err := compactChat(ctx, c, chatID, strings.TrimSpace(focus), out); err != nil {
				fmt.Fprintln(out, "error:", err)
			}
			continue
		}
		_, err := c.Send(ctx, chatID, api.SendMessageRequest{Content: line}, func(ev api.Event) { printEvent(out, ev) })
		if err != nil {
			fmt.Fprintln(out, "error:", err)
		}
	}
}

func compactChat(ctx context.Context, c *api.Client, chatID, focus string, out io.Writer) error {
	var res api.Compacted
	if err := c.Post(ctx, "/v1/chats/"+chatID+"/compact", api.CompactRequest{Focus: focus}, &res); err != nil {
		return err
	}
	fmt.Fprintf(out, "— earlier messages are summarised for %s (from seq %d on, word for word) —\n", res.Model, res.FirstKeptSeq)
	return nil
}

func printEvent(out io.Writer, ev api.Event) {
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Type {
	case api.EventMessageDelta:
		fmt.Fprint(out, d["text"])
	case api.EventToolCall:
		fmt.Fprintf(out, "\n[tool %v %v]\n", d["name"], d["arguments"])
	case api.EventCompacted:
		fmt.Fprintf(out, "\n— earlier messages are summarised for %v —\n", d["model"])
	case api.EventTurnProblem:
		fmt.Fprintf(out, "\n[problem: %v]\n", d["message"])
	case api.EventTurnCompleted:
		fmt.Fprintln(out)
	}
}
