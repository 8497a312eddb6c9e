package oai_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
)

const (
	thought = "First I weigh it."
	said    = "The answer is four."
	// Over OpenAI's wire, a cut after the role chunk and two pieces of
	// reasoning of five runes: "First I we".
	cutThought = "First I we"
	retried    = "A second thought."
	saidOnce   = "Said once."
	lookUp     = "Look it up."
)

// reasoner answers every turn with reply; the summariser's and learner's
// requests as talker does.
func reasoner(replies ...testkit.Reply) testkit.Script {
	var n atomic.Int64
	return func(r testkit.Received) testkit.Reply {
		if !isTurn(r) {
			return talker(r)
		}
		return replies[min(int(n.Add(1))-1, len(replies)-1)]
	}
}

// toolThenAnswer reasons and calls agentd's own find_tools, then reasons
// again and answers: two answers in one turn.
func toolThenAnswer(r testkit.Received) testkit.Reply {
	if !isTurn(r) {
		return talker(r)
	}
	if r.Messages[len(r.Messages)-1].Role == chat.RoleTool {
		return testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5}
	}
	return testkit.Reply{Thinking: lookUp, ChunkRunes: 5, ToolCalls: []chat.ToolCall{{ID: "call_find", Name: "find_tools", Arguments: `{"query":"sums"}`}}}
}

// cutWhileReasoning is a first try cut after two pieces of its reasoning,
// before its first word, then a whole answer to the try again.
func cutWhileReasoning() testkit.Script {
	return reasoner(testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5, CutAfterChunks: 3},
		testkit.Reply{Thinking: retried, Text: saidOnce, ChunkRunes: 5})
}

// reasoningTrace streams a response through the SDK, feeding each event to
// its accumulator, and returns the events as lines (consecutive deltas of
// one part joined) with the final response.
func reasoningTrace(t *testing.T, sdk openai.Client, params responses.ResponseNewParams, opts ...option.RequestOption) ([]string, responses.Response) {
	t.Helper()
	s := sdk.Responses.NewStreaming(context.Background(), params, opts...)
	defer s.Close()
	var trace []string
	var final responses.Response
	var acc responses.ResponseAccumulator
	add := func(line string) {
		if n := len(trace); n > 0 {
			if head, _, ok := strings.Cut(line, "|"); ok && strings.HasPrefix(trace[n-1], head+"|") {
				trace[n-1] += line[len(head)+1:]
				return
			}
		}
		trace = append(trace, line)
	}
	for s.Next() {
		ev := s.Current()
		var same responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &same); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddEvent(same); err != nil {
			t.Fatalf("the accumulator refuses %s: %v", ev.Type, err)
		}
		at := fmt.Sprintf("%d/%d", ev.OutputIndex, ev.SummaryIndex)
		switch ev.Type {
		case "response.output_item.added", "response.output_item.done":
			add(fmt.Sprintf("%s %s@%d", strings.TrimPrefix(ev.Type, "response.output_item."), ev.Item.Type, ev.OutputIndex))
		case "response.reasoning_summary_part.added":
			add("part.added " + at + " " + ev.Part.Text)
		case "response.reasoning_summary_text.delta":
			add("think " + at + "|" + ev.Delta)
		case "response.reasoning_summary_text.done":
			add("think.done " + at + " " + ev.Text)
		case "response.reasoning_summary_part.done":
			add("part.done " + at + " " + ev.Part.Text)
		case "response.output_text.delta":
			add(fmt.Sprintf("say %d|%s", ev.OutputIndex, ev.Delta))
		case "response.output_text.done":
			add(fmt.Sprintf("say.done %d %s", ev.OutputIndex, ev.Text))
		case "response.completed", "response.incomplete", "response.failed":
			add(ev.Type)
			final = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if rebuilt, err := acc.ReconstructedResponse(); err != nil || len(rebuilt.Output) != len(final.Output) {
		t.Fatalf("the accumulator rebuilt %d items (%v), the stream ended with %d", len(rebuilt.Output), err, len(final.Output))
	}
	return trace, final
}

// summaries reads a response's output as "reasoning: part|part" and
// "message: text" lines.
func summaries(resp responses.Response) []string {
	var out []string
	for _, it := range resp.Output {
		switch it.Type {
		case "reasoning":
			var parts []string
			for _, s := range it.AsReasoning().Summary {
				parts = append(parts, s.Text)
			}
			out = append(out, "reasoning: "+strings.Join(parts, "|"))
		case "message":
			out = append(out, "message: "+it.AsMessage().Content[0].Text)
		default:
			out = append(out, it.Type)
		}
	}
	return out
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

func asked(summary bool) responses.ResponseNewParams {
	p := responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is two and two?")}}
	if summary {
		p.Reasoning = shared.ReasoningParam{Summary: shared.ReasoningSummaryAuto}
	}
	return p
}

// TestResponsesStreamTheModelsReasoningAsASummary: a request that asks for
// reasoning summaries (reasoning.summary) is streamed the model's reasoning
// as it comes, a reasoning item with one summary_text part before the
// message, with OpenAI's events in OpenAI's order; the final response, the
// whole one and the stored one hold the item. A request that does not ask,
// and a model that does not reason, get no reasoning event or item.
func TestResponsesStreamTheModelsReasoningAsASummary(t *testing.T) {
	for name, c := range map[string]struct {
		reply  testkit.Reply
		script testkit.Script // else reasoner(reply)
		asks   bool
		events []string
		output []string
	}{
		"asked": {reply: testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5}, asks: true,
			events: []string{"added reasoning@0", "part.added 0/0 ", "think 0/0|" + thought, "think.done 0/0 " + thought, "part.done 0/0 " + thought,
				"done reasoning@0", "added message@1", "say 1|" + said, "say.done 1 " + said, "done message@1", "response.completed"},
			output: []string{"reasoning: " + thought, "message: " + said}},
		"asked, two answers in a turn": {script: toolThenAnswer, asks: true,
			events: []string{"added reasoning@0", "part.added 0/0 ", "think 0/0|" + lookUp, "think.done 0/0 " + lookUp, "part.done 0/0 " + lookUp, "done reasoning@0",
				"added reasoning@1", "part.added 1/0 ", "think 1/0|" + thought, "think.done 1/0 " + thought, "part.done 1/0 " + thought, "done reasoning@1",
				"added message@2", "say 2|" + said, "say.done 2 " + said, "done message@2", "response.completed"},
			output: []string{"reasoning: " + lookUp, "reasoning: " + thought, "message: " + said}},
		"not asked": {reply: testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5},
			events: []string{"added message@0", "say 0|" + said, "say.done 0 " + said, "done message@0", "response.completed"},
			output: []string{"message: " + said}},
		"asked of a model that does not reason": {reply: testkit.Reply{Text: said, ChunkRunes: 5}, asks: true,
			events: []string{"added message@0", "say 0|" + said, "say.done 0 " + said, "done message@0", "response.completed"},
			output: []string{"message: " + said}},
	} {
		t.Run(name, func(t *testing.T) {
			if c.script == nil {
				c.script = reasoner(c.reply)
			}
			_, _, sdk := start(t, 32000, c.script)
			events, final := reasoningTrace(t, sdk, asked(c.asks))
			if !equal(events, c.events) {
				t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(c.events, "\n"))
			}
			if got := summaries(final); !equal(got, c.output) {
				t.Fatalf("response.completed's output %q, want %q", got, c.output)
			}
			stored, err := sdk.Responses.Get(context.Background(), final.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if got := summaries(*stored); !equal(got, c.output) {
				t.Fatalf("the stored response's output %q, want %q", got, c.output)
			}
			whole, err := sdk.Responses.New(context.Background(), asked(c.asks))
			if err != nil {
				t.Fatal(err)
			}
			if got := summaries(*whole); !equal(got, c.output) {
				t.Fatalf("a whole response's output %q, want %q", got, c.output)
			}
		})
	}
}

// TestResponsesSentAgainUnderItsKeyTellsItsReasoning: a streamed response
// of a chain sent again under its Idempotency-Key after it ended is told again whole
// from what was stored, its reasoning item's summary parts with it, as
// OpenAI's events that the SDK's accumulator takes.
func TestResponsesSentAgainUnderItsKeyTellsItsReasoning(t *testing.T) {
	// A key is a continued chain's: the chain's first answer, then the
	// keyed one cut while it reasons and asked again.
	_, _, sdk := start(t, 32000, reasoner(testkit.Reply{Thinking: thought, Text: said},
		testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5, CutAfterChunks: 3}, testkit.Reply{Thinking: retried, Text: saidOnce}))
	chain, err := sdk.Responses.New(context.Background(), asked(true))
	if err != nil {
		t.Fatal(err)
	}
	params := asked(true)
	params.PreviousResponseID = openai.String(chain.ID)
	_, first := reasoningTrace(t, sdk, params, withKey("k-reasoning"))
	events, again := reasoningTrace(t, sdk, params, withKey("k-reasoning"))
	want := []string{"added reasoning@0",
		"part.added 0/0 ", "think.done 0/0 " + cutThought, "part.done 0/0 " + cutThought,
		"part.added 0/1 ", "think.done 0/1 " + retried, "part.done 0/1 " + retried,
		"done reasoning@0", "added message@1", "say.done 1 " + saidOnce, "done message@1", "response.completed"}
	if !equal(events, want) {
		t.Fatalf("events told again:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
	if again.ID != first.ID || !equal(summaries(again), summaries(first)) {
		t.Fatalf("told again %s %q, first %s %q", again.ID, summaries(again), first.ID, summaries(first))
	}
}

// TestResponsesAReasoningCutAndAskedAgainIsANewSummaryPart: a stream cut
// while the model reasons is asked again (thinking.reset); the client was
// shown part of the cut reasoning, which no event takes back, so that part
// ends as it was shown and the retry's reasoning is the next summary part
// of the same item: nothing shown twice, nothing contradicted by the final
// response.
func TestResponsesAReasoningCutAndAskedAgainIsANewSummaryPart(t *testing.T) {
	_, _, sdk := start(t, 32000, cutWhileReasoning())
	events, final := reasoningTrace(t, sdk, asked(true))
	want := []string{"added reasoning@0",
		"part.added 0/0 ", "think 0/0|" + cutThought, "think.done 0/0 " + cutThought, "part.done 0/0 " + cutThought,
		"part.added 0/1 ", "think 0/1|" + retried, "think.done 0/1 " + retried, "part.done 0/1 " + retried,
		"done reasoning@0", "added message@1", "say 1|" + saidOnce, "say.done 1 " + saidOnce, "done message@1", "response.completed"}
	if !equal(events, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
	if got, want := summaries(final), []string{"reasoning: " + cutThought + "|" + retried, "message: " + saidOnce}; !equal(got, want) {
		t.Fatalf("output %q, want %q", got, want)
	}
}

// TestResponsesAnEchoedReasoningItemIsSkipped: a client that keeps its own
// context sends a response's output back (OpenAI asks it to send reasoning
// items with the function_call_outputs): on a continued chain the
// reasoning item is skipped, as an echoed function_call is; without one it
// is refused, naming its type.
func TestResponsesAnEchoedReasoningItemIsSkipped(t *testing.T) {
	_, _, sdk := start(t, 32000, reasoner(testkit.Reply{Thinking: thought, Text: said}))
	ctx := context.Background()
	first, err := sdk.Responses.New(ctx, asked(true))
	if err != nil {
		t.Fatal(err)
	}
	if first.Output[0].Type != "reasoning" {
		t.Fatalf("output %q: want a reasoning item first", summaries(*first))
	}
	echoed := first.Output[0].AsReasoning().ToParam()
	input := responses.ResponseInputParam{
		{OfReasoning: &echoed},
		responses.ResponseInputItemParamOfMessage("And three and three?", responses.EasyInputMessageRoleUser),
	}
	next, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil {
		t.Fatalf("an echoed reasoning item on a continued chain: %v", err)
	}
	if next.Status != "completed" {
		t.Fatalf("the next response is %s", next.Status)
	}
	_, err = sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Param != "input[0].type" || !strings.Contains(e.Message, "reasoning") {
		t.Fatalf("a reasoning item without a chain: %v, want a 400 on input[0].type naming it", err)
	}
}

// chunks posts a streamed Chat Completions request and returns its
// deltas (chatDeltas).
func chunks(t *testing.T, base string) (trace []string, named bool) {
	t.Helper()
	resp := postQuestion(t, base, true)
	defer resp.Body.Close()
	return chatDeltas(t, resp.Body)
}

// chatDeltas reads a streamed Chat Completions answer and returns its data
// lines' deltas as "r:" (reasoning_content) and "c:" (content) lines,
// consecutive ones of a kind joined, and whether any line named
// reasoning_content.
func chatDeltas(t *testing.T, body io.Reader) (trace []string, named bool) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	add := func(kind, text string) {
		if n := len(trace); n > 0 && strings.HasPrefix(trace[n-1], kind) {
			trace[n-1] += text
			return
		}
		trace = append(trace, kind+text)
	}
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		named = named || strings.Contains(data, "reasoning_content")
		var ev struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("data line %q: %v", data, err)
		}
		for _, c := range ev.Choices {
			if c.Delta.ReasoningContent != "" {
				add("r:", c.Delta.ReasoningContent)
			}
			if c.Delta.Content != "" {
				add("c:", c.Delta.Content)
			}
		}
	}
	return trace, named
}

// postQuestion asks a new chat a question on Chat Completions.
func postQuestion(t *testing.T, base string, stream bool) *http.Response {
	t.Helper()
	body := fmt.Sprintf(`{"model":"fake/m","stream":%v,"messages":[{"role":"user","content":"What is two and two?"}]}`, stream)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answered %s", resp.Status)
	}
	return resp
}

// wholeReasoning asks a question unstreamed and returns its message's
// reasoning_content, and whether it has one.
func wholeReasoning(t *testing.T, base string) (string, bool) {
	t.Helper()
	r, ok := answerOf(t, postQuestion(t, base, false))["reasoning_content"].(string)
	return r, ok
}

// TestChatCompletionsStreamTheModelsReasoningAsReasoningContent: the
// model's reasoning streams as delta.reasoning_content, as llama.cpp's
// server, vLLM and DeepSeek stream it, before the answer's content; a
// reasoning cut and asked again is followed by a marked break, then the
// retry's reasoning, never spliced onto the cut one, nor is a second
// answer's onto the first's; a model that does not reason streams no
// reasoning_content at all. An unstreamed answer carries the stored
// reasoning as message.reasoning_content.
func TestChatCompletionsStreamTheModelsReasoningAsReasoningContent(t *testing.T) {
	for name, c := range map[string]struct {
		script testkit.Script
		want   []string
		whole  string // the unstreamed answer's reasoning_content: none when ""
	}{
		"reasoning": {script: reasoner(testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5}), want: []string{"r:" + thought, "c:" + said}, whole: thought},
		"two answers in a turn": {script: toolThenAnswer, want: []string{"r:" + lookUp + "\n\n" + thought, "c:" + said},
			whole: lookUp + "\n\n" + thought},
		"cut and retried": {script: cutWhileReasoning(), want: []string{"r:" + cutThought + oai.ReasoningBreak + retried, "c:" + saidOnce},
			whole: retried},
		"no reasoning":      {script: reasoner(testkit.Reply{Text: said, ChunkRunes: 5}), want: []string{"c:" + said}},
		"no reasoning, cut": {script: reasoner(testkit.Reply{Text: said, ChunkRunes: 5, CutAfterChunks: 1}, testkit.Reply{Text: saidOnce}), want: []string{"c:" + saidOnce}},
	} {
		t.Run(name, func(t *testing.T) {
			d, _, _ := start(t, 32000, c.script)
			trace, named := chunks(t, d.Server.URL)
			if !equal(trace, c.want) {
				t.Fatalf("deltas:\n%s\nwant:\n%s", strings.Join(trace, "\n"), strings.Join(c.want, "\n"))
			}
			if reasons := strings.HasPrefix(c.want[0], "r:"); named != reasons {
				t.Fatalf("a data line names reasoning_content: %v, want %v", named, reasons)
			}
			if got, ok := wholeReasoning(t, d.Server.URL); got != c.whole || ok != (c.whole != "") {
				t.Fatalf("the unstreamed answer's reasoning_content %q (there: %v), want %q", got, ok, c.whole)
			}
		})
	}
}

// TestChatCompletionsReasoningContentReachesOpenAIGo: openai-go, which has
// no reasoning field, hands a client the streamed reasoning_content as an
// extra field of each delta (docs/openai-chat-completions.md).
func TestChatCompletionsReasoningContentReachesOpenAIGo(t *testing.T) {
	_, _, sdk := start(t, 32000, reasoner(testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5}))
	s := sdk.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "fake/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is two and two?")}})
	defer s.Close()
	var reasoned, content strings.Builder
	for s.Next() {
		for _, c := range s.Current().Choices {
			if f, ok := c.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var piece string
				if err := json.Unmarshal([]byte(f.Raw()), &piece); err != nil {
					t.Fatalf("reasoning_content %s: %v", f.Raw(), err)
				}
				if content.Len() > 0 {
					t.Fatalf("reasoning %q came after content %q", piece, content.String())
				}
				reasoned.WriteString(piece)
			}
			content.WriteString(c.Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoned.String() != thought || content.String() != said {
		t.Fatalf("openai-go read reasoning %q and content %q, want %q and %q", reasoned.String(), content.String(), thought, said)
	}
}

// effortsSeen answers every turn with said and records the
// reasoning_effort each turn request carried ("" for none).
func effortsSeen() (testkit.Script, func() []string) {
	return recordEfforts(func(testkit.Received) testkit.Reply { return testkit.Reply{Text: said} })
}

// recordEfforts answers every turn request as turn does, and records the
// reasoning_effort each carried ("" for none); other requests go to talker.
func recordEfforts(turn testkit.Script) (testkit.Script, func() []string) {
	var mu sync.Mutex
	var seen []string
	return func(r testkit.Received) testkit.Reply {
			if !isTurn(r) {
				return talker(r)
			}
			var body struct {
				ReasoningEffort string `json:"reasoning_effort"`
			}
			_ = json.Unmarshal(r.Raw, &body)
			mu.Lock()
			seen = append(seen, body.ReasoningEffort)
			mu.Unlock()
			return turn(r)
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(seen)
		}
}

// TestResponsesReasoningEffortIsTheTurns: a Responses request's
// reasoning.effort is its turn's reasoning effort, as Chat Completions'
// reasoning_effort is, and a request without one asks for none (OpenAI
// carries no setting over from a previous response). An effort the chat's
// protocol has no word for is a 400 on reasoning.effort naming it, and
// changes nothing: no chat, no message, no setting, no model call.
func TestResponsesReasoningEffortIsTheTurns(t *testing.T) {
	script, seen := effortsSeen()
	d, _, sdk := start(t, 32000, script)
	ctx := context.Background()
	ask := func(prev, effort string) (*responses.Response, error) {
		p := asked(false)
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(effort)}
		return sdk.Responses.New(ctx, p)
	}
	first, err := ask("", "low")
	if err != nil {
		t.Fatal(err)
	}
	second, err := ask(first.ID, "high")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ask(second.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := seen(), []string{"low", "high", ""}; !slices.Equal(got, want) {
		t.Fatalf("the turns' reasoning_effort %q, want %q", got, want)
	}
	stored, err := sdk.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Reasoning.Effort != "low" || stored.Reasoning.Effort != "low" || second.Reasoning.Effort != "high" {
		t.Fatalf("the responses echo reasoning.effort %q (stored %q) and %q, want low and high", first.Reasoning.Effort, stored.Reasoning.Effort, second.Reasoning.Effort)
	}
	third, err := ask(second.ID, "high")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := d.Hub.Chats(ctx, "a")
	if err != nil || len(cs) != 1 {
		t.Fatalf("tenant a has %d chats (%v), want the chain's one", len(cs), err)
	}
	before := cs[0]
	for name, prev := range map[string]string{"a continued chain": third.ID, "a new chain": ""} {
		_, err := ask(prev, "max")
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Param != "reasoning.effort" || !strings.Contains(e.Message, `"max"`) {
			t.Fatalf("%s asking effort max of an OpenAI-style model: %v, want a 400 on reasoning.effort naming it", name, err)
		}
	}
	after, err := d.Hub.Chat(ctx, "a", before.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Messages != before.Messages || after.Settings == nil || after.Settings.ReasoningEffort != "high" {
		t.Fatalf("after the refusals the chat holds %d messages, settings %+v; before, %d and %+v", after.Messages, after.Settings, before.Messages, before.Settings)
	}
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 1 {
		t.Fatalf("tenant a has %d chats, want the chain's one", len(cs))
	}
	if got := seen(); len(got) != 4 {
		t.Fatalf("the provider was asked %d turns, want 4: %q", len(got), got)
	}
}

// TestResponsesAnEchoedAssistantMessageIsSkipped: a client of the SDKs
// that appends response.output to its input (the reasoning and the
// assistant message items) and names previous_response_id has its echo of
// the previous response's message skipped, with its id or without one
// (same text): the chat stores only what is new. An assistant message
// agentd did not write (other text, or the id of an older response's
// message) is refused on input[i].role, as it is on a new chain, and
// stores nothing.
func TestResponsesAnEchoedAssistantMessageIsSkipped(t *testing.T) {
	d, _, sdk := start(t, 32000, reasoner(testkit.Reply{Thinking: thought, Text: said}))
	ctx := context.Background()
	first, err := sdk.Responses.New(ctx, asked(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Output) != 2 || first.Output[1].Type != "message" {
		t.Fatalf("output %q: want a reasoning item, then a message", summaries(*first))
	}
	reasoning, message := first.Output[0].AsReasoning().ToParam(), first.Output[1].AsMessage().ToParam()
	next := func(prev string, echoed ...responses.ResponseInputItemUnionParam) (*responses.Response, error) {
		input := append(echoed, responses.ResponseInputItemParamOfMessage("And three and three?", responses.EasyInputMessageRoleUser))
		return sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(prev),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	}
	chatMessages := func() int64 {
		cs, err := d.Hub.Chats(ctx, "a")
		if err != nil || len(cs) != 1 {
			t.Fatalf("tenant a has %d chats (%v), want the chain's one", len(cs), err)
		}
		c, err := d.Hub.Chat(ctx, "a", cs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return c.Messages
	}
	held := chatMessages()
	second, err := next(first.ID, responses.ResponseInputItemUnionParam{OfReasoning: &reasoning}, responses.ResponseInputItemUnionParam{OfOutputMessage: &message})
	if err != nil {
		t.Fatalf("the previous response's output echoed with its id: %v", err)
	}
	if got := chatMessages(); second.Status != "completed" || got != held+2 {
		t.Fatalf("the echoed response is %s and the chat holds %d messages, want completed and %d (the question and its answer)", second.Status, got, held+2)
	}
	held += 2
	third, err := next(second.ID, responses.ResponseInputItemParamOfMessage(second.OutputText(), responses.EasyInputMessageRoleAssistant))
	if err != nil {
		t.Fatalf("the previous response's answer echoed without an id: %v", err)
	}
	if got := chatMessages(); third.Status != "completed" || got != held+2 {
		t.Fatalf("the echoed response is %s and the chat holds %d messages, want completed and %d", third.Status, got, held+2)
	}
	held += 2
	for name, c := range map[string]struct {
		prev string
		echo responses.ResponseInputItemUnionParam
	}{
		"other text":                   {third.ID, responses.ResponseInputItemParamOfMessage("I said five.", responses.EasyInputMessageRoleAssistant)},
		"an older response's message":  {third.ID, responses.ResponseInputItemUnionParam{OfOutputMessage: &message}},
		"its own id with another text": {first.ID, responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{Text: "I said five."}}}, message.ID, responses.ResponseOutputMessageStatusCompleted)},
	} {
		_, err := next(c.prev, c.echo)
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Param != "input[0].role" || !strings.Contains(e.Message, "assistant messages") {
			t.Fatalf("%s: %v, want a 400 on input[0].role", name, err)
		}
	}
	_, err = sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		{OfOutputMessage: &message}, responses.ResponseInputItemParamOfMessage("And three and three?", responses.EasyInputMessageRoleUser)}}})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Param != "input[0].role" {
		t.Fatalf("an assistant message on a new chain: %v, want a 400 on input[0].role", err)
	}
	if got := chatMessages(); got != held {
		t.Fatalf("after the refusals the chat holds %d messages, want %d", got, held)
	}
}

// TestReasoningTokensAreReported: the reasoning tokens an OpenAI-style
// provider reports (usage.completion_tokens_details.reasoning_tokens) are
// in the native usage event and turn result, in a response's
// usage.output_tokens_details.reasoning_tokens, whole and streamed, and in
// a chat completion's usage.completion_tokens_details.reasoning_tokens,
// whole and in the stream's usage chunk.
func TestReasoningTokensAreReported(t *testing.T) {
	const reasoned = 12
	d, _, sdk := start(t, 32000, reasoner(testkit.Reply{Thinking: thought, Text: said,
		Usage: &chat.Usage{InputTokens: 40, OutputTokens: 30, ReasoningTokens: reasoned}}))
	ctx := context.Background()
	native := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	c, err := native.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var events []api.Usage
	res, err := native.Send(ctx, c.ID, api.SendMessageRequest{Content: "What is two and two?"}, func(ev api.Event) {
		if ev.Type == api.EventUsage {
			var u api.Usage
			if err := json.Unmarshal(ev.Data, &u); err != nil {
				t.Errorf("usage event %s: %v", ev.Data, err)
			}
			events = append(events, u)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].ReasoningTokens != reasoned || res.Usage.ReasoningTokens != reasoned {
		t.Fatalf("native usage events %+v, turn usage %+v: want reasoning_tokens %d", events, res.Usage, reasoned)
	}
	for _, stream := range []bool{false, true} {
		r := created(t, sdk, asked(false), stream)
		if got := r.Usage.OutputTokensDetails.ReasoningTokens; got != reasoned || r.Usage.OutputTokens != 30 {
			t.Fatalf("a response (streamed: %v) has usage %+v: want reasoning_tokens %d of 30", stream, r.Usage, reasoned)
		}
	}
	params := openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is two and two?")}}
	whole, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := whole.Usage.CompletionTokensDetails.ReasoningTokens; got != reasoned {
		t.Fatalf("a chat completion's reasoning_tokens %d, want %d", got, reasoned)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := sdk.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var last openai.CompletionUsage
	for s.Next() {
		if u := s.Current().Usage; u.TotalTokens > 0 {
			last = u
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if got := last.CompletionTokensDetails.ReasoningTokens; got != reasoned {
		t.Fatalf("the stream's usage chunk %+v: want reasoning_tokens %d", last, reasoned)
	}
}

// TestConversationItemsListTheReasoning: a conversation's items hold an
// answer's reasoning as its response that asked for summaries holds it: a
// reasoning item, its summary the stored reasoning, before the answer's
// message, named rs_<seq> for a get and for paging after it.
func TestConversationItemsListTheReasoning(t *testing.T) {
	_, _, sdk := start(t, 32000, reasoner(testkit.Reply{Thinking: thought, Text: said}))
	ctx := context.Background()
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	p := asked(true)
	p.Model = ""
	p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}
	resp, err := sdk.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want := summaries(*resp)
	if !equal(want, []string{"reasoning: " + thought, "message: " + said}) {
		t.Fatalf("the response's output %q", want)
	}
	page, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	var ids []string
	for _, it := range page.Data[1:] { // after the person's message
		ids = append(ids, it.ID)
		switch it.Type {
		case "reasoning":
			var parts []string
			for _, s := range it.AsReasoning().Summary {
				parts = append(parts, s.Text)
			}
			listed = append(listed, "reasoning: "+strings.Join(parts, "|"))
		case "message":
			listed = append(listed, "message: "+it.AsMessage().Content[0].AsOutputText().Text)
		default:
			listed = append(listed, it.Type)
		}
	}
	if !equal(listed, want) {
		t.Fatalf("the conversation's items after the person's message %q (%q), want the response's output %q", listed, ids, want)
	}
	one, err := sdk.Conversations.Items.Get(ctx, conv.ID, ids[0], conversations.ItemGetParams{})
	if err != nil || one.Type != "reasoning" || !strings.Contains(one.RawJSON(), thought) {
		t.Fatalf("get %s: %v %+v", ids[0], err, one)
	}
	rest, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, After: openai.String(ids[0])})
	if err != nil || len(rest.Data) != 1 || rest.Data[0].ID != ids[1] {
		t.Fatalf("items after %s: %v %+v", ids[0], err, rest.Data)
	}
}

// postCounted sends history to Chat Completions as the SDKs' attempt
// number try (X-Stainless-Retry-Count) and returns the answer once its
// headers came.
func postCounted(ctx context.Context, base string, history []any, try int, stream bool) (*http.Response, error) {
	b, _ := json.Marshal(map[string]any{"model": "fake/m", "stream": stream, "messages": history})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer tok-a")
	req.Header.Set(oai.RetryCountHeader, strconv.Itoa(try))
	return http.DefaultClient.Do(req)
}

// answerOf decodes a whole Chat Completions answer's message.
func answerOf(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var c struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("%s: a completion of %d choices: %v", resp.Status, len(c.Choices), err)
	}
	return c.Choices[0].Message
}

// TestChatCompletionsALateRequestIsToldTheReasoning: the SDK's retry of a
// question is told the turn's stored reasoning as an early client was,
// before its content: streamed, joining the turn while it runs (its first
// attempt given up), as one reasoning_content delta; not streamed, after
// the turn answered (its first answer lost), as message.reasoning_content.
// The provider is asked once.
func TestChatCompletionsALateRequestIsToldTheReasoning(t *testing.T) {
	const question = "What is two and two?"
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream %v", stream), func(t *testing.T) {
			var asked atomic.Int64
			heard, release := make(chan struct{}, 1), make(chan struct{})
			d, _, _ := start(t, 32000, func(r testkit.Received) testkit.Reply {
				if !isTurn(r) || r.Messages[len(r.Messages)-1].Content != question {
					return talker(r)
				}
				asked.Add(1)
				select {
				case heard <- struct{}{}:
				default:
				}
				<-release
				return testkit.Reply{Thinking: thought, Text: said, ChunkRunes: 5}
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// The chat's first exchange: a retry finds its chat by the
			// history's tip.
			history := []any{map[string]any{"role": "user", "content": "Hello."}}
			resp, err := postCounted(ctx, d.Server.URL, history, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			history = append(history, map[string]any{"role": "assistant", "content": answerOf(t, resp)["content"]},
				map[string]any{"role": "user", "content": question})

			first, gaveUp := context.WithCancel(ctx)
			defer gaveUp()
			firstDone := make(chan *http.Response, 1)
			go func() {
				resp, err := postCounted(first, d.Server.URL, history, 0, stream)
				if err != nil {
					resp = nil
				}
				firstDone <- resp
			}()
			select {
			case <-heard:
			case <-ctx.Done():
				t.Fatal("the provider was never asked")
			}
			if stream {
				// The client gives up while the turn runs; the retry's
				// stream starts once it joined the turn, which then goes on.
				gaveUp()
				<-firstDone
				resp, err := postCounted(ctx, d.Server.URL, history, 1, true)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				close(release)
				if trace, _ := chatDeltas(t, resp.Body); !equal(trace, []string{"r:" + thought, "c:" + said}) {
					t.Fatalf("the retry's deltas:\n%s\nwant the reasoning, then the answer", strings.Join(trace, "\n"))
				}
			} else {
				// The first answer comes and is lost; the retry is told
				// the turn as the chat stored it.
				close(release)
				if resp := <-firstDone; resp != nil {
					resp.Body.Close()
				}
				resp, err := postCounted(ctx, d.Server.URL, history, 1, false)
				if err != nil {
					t.Fatal(err)
				}
				m := answerOf(t, resp)
				if m["content"] != said {
					t.Fatalf("the retry's answer %+v", m)
				}
				if m["reasoning_content"] != thought {
					t.Fatalf("the retry's reasoning_content %v, want %q", m["reasoning_content"], thought)
				}
			}
			if n := asked.Load(); n != 1 {
				t.Fatalf("the provider was asked the question %d times, want once", n)
			}
		})
	}
}
