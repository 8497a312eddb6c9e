package oai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestModelsList: the SDK lists agentd's models with the tenant's token,
// each carrying agentd's window; agentd's own client reads the same body;
// a wrong token is a 401 in OpenAI's shape, which both clients read.
func TestModelsList(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 8192})
	t.Cleanup(fake.Close)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 8192), map[string]string{"tok-a": "a"})
	ctx := context.Background()

	sdk := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-a"), option.WithMaxRetries(0))
	page, err := sdk.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "fake/m" || page.Data[0].OwnedBy != "fake" || page.Data[0].Object != "model" {
		t.Fatalf("SDK list: %+v", page.Data)
	}
	if w := page.Data[0].JSON.ExtraFields["window"].Raw(); w != "8192" {
		t.Fatalf("window alongside: %q, want 8192", w)
	}

	native := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	ms, err := native.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms.Models) != 1 || ms.Models[0].ID != "fake/m" || ms.Models[0].Window != 8192 {
		t.Fatalf("native list: %+v", ms)
	}

	bad := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err = bad.Models.List(ctx)
	var aerr *openai.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusUnauthorized || aerr.Code != "invalid_api_key" ||
		aerr.Type != "invalid_request_error" || aerr.Message == "" {
		t.Fatalf("wrong token: %v (%+v)", err, aerr)
	}
	_, err = (&api.Client{BaseURL: d.Server.URL, Token: "wrong"}).Models(ctx)
	var nerr *api.Error
	if !errors.As(err, &nerr) || nerr.Status != http.StatusUnauthorized || nerr.Kind != "invalid_api_key" || nerr.Message != aerr.Message {
		t.Fatalf("native client on a wrong token: %v", err)
	}
}

// TestModelsRetrieve: the SDK's models.retrieve reads one model of the
// list, its id's slash escaped or not; an id the list lacks is a 404 with
// code model_not_found; a route of OpenAI's that agentd does not offer is a
// 404 in OpenAI's shape, so the SDK reads its type and code.
func TestModelsRetrieve(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 8192})
	t.Cleanup(fake.Close)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 8192), map[string]string{"tok-a": "a"})
	ctx := context.Background()
	sdk := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-a"), option.WithMaxRetries(0))

	m, err := sdk.Models.Get(ctx, "fake/m")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "fake/m" || m.Object != "model" || m.OwnedBy != "fake" || m.JSON.ExtraFields["window"].Raw() != "8192" {
		t.Fatalf("retrieved %+v", m)
	}
	// Python's SDK sends the id unescaped.
	req, _ := http.NewRequest(http.MethodGet, d.Server.URL+"/v1/models/fake/m", nil)
	req.Header.Set("Authorization", "Bearer tok-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || raw["id"] != "fake/m" {
		t.Fatalf("the id unescaped: %v %v", err, raw)
	}

	_, err = sdk.Models.Get(ctx, "fake/none")
	var aerr *openai.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || aerr.Code != "model_not_found" || aerr.Type != "invalid_request_error" {
		t.Fatalf("an unknown model: %v", err)
	}
	_, err = sdk.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "fake/m", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || aerr.Code != "unknown_url" || aerr.Type != "invalid_request_error" {
		t.Fatalf("embeddings, which agentd does not offer: %v", err)
	}
}

// TestAnUnknownModelIsModelNotFound: a chat completion or a response that
// names a model no provider serves (no such provider, or no provider/
// prefix) is OpenAI's 404 model_not_found on
// param model, as the SDKs expect, and creates no chat.
func TestAnUnknownModelIsModelNotFound(t *testing.T) {
	d, _, sdk := start(t, 8192, nil)
	ctx := context.Background()
	for _, model := range []string{"nope/m", "gpt-4o"} {
		calls := map[string]func() error{
			"chat completion": func() error {
				_, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
				return err
			},
			"response": func() error {
				_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: model,
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
				return err
			},
		}
		for name, call := range calls {
			var aerr *openai.Error
			if err := call(); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || aerr.Code != "model_not_found" ||
				aerr.Param != "model" || !strings.Contains(aerr.Message, model) {
				t.Errorf("a %s naming %s: %v", name, model, err)
			}
		}
	}
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 0 {
		t.Errorf("refused requests left %d chats", len(cs))
	}
}
