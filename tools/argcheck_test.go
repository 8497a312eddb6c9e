package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
)

// appTool is an application's client tool checking its calls against
// params.
func appTool(t *testing.T, params string) Tool {
	t.Helper()
	tool, err := CheckingArgs(Tool{Name: "crm_find", Parameters: json.RawMessage(params), Client: true})
	if err != nil {
		t.Fatalf("CheckingArgs(%s): %v", params, err)
	}
	return tool
}

const (
	findSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":40},"unit":{"enum":["c","f"]},
		"lines":{"type":"array","items":{"type":"object","properties":{"qty":{"type":"integer","minimum":1}},"required":["qty"]}}},"required":["name"]}`
	// OpenAI's strict function schema: every field required, none other,
	// optional ones nullable.
	strictSchema = `{"type":"object","properties":{"name":{"type":"string"},"note":{"type":["string","null"]}},
		"required":["name","note"],"additionalProperties":false}`
	// As Pydantic (the OpenAI Python SDK's pydantic_function_tool) writes
	// a nested model.
	defsSchema = `{"type":"object","$defs":{"Addr":{"type":"object","properties":{"zip":{"type":"number"}},"required":["zip"]}},
		"properties":{"home":{"$ref":"#/$defs/Addr"}},"required":["home"]}`
	// As zod-to-json-schema writes one, draft-07.
	draft7Schema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"Id":{"type":"string"}},
		"properties":{"id":{"$ref":"#/definitions/Id"}},"required":["id"],"additionalProperties":false}`
	// A dialect jsonschema-go does not validate by: read as 2020-12.
	draft4Schema = `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer"}}}`
	// A tree: the schema refers to itself for what the value holds.
	treeSchema = `{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["label"]}`
)

func TestAnApplicationToolsCallIsCheckedAgainstItsSchema(t *testing.T) {
	tests := []struct {
		name, schema, args string
		want               string // the whole problem; "" the call goes on
	}{
		{"a valid call", findSchema, `{"name":"Ada","lines":[{"qty":2}]}`, ""},
		{"no arguments where none are required", `{"type":"object","properties":{"q":{"type":"string"}}}`, ``, ""},
		{"not JSON", findSchema, `{"name":"Ada"`, "The arguments for crm_find are not valid JSON. Send one JSON object that matches the tool's parameter schema."},
		{"not an object", findSchema, `["Ada"]`, "The arguments for crm_find must be a JSON object, not an array."},
		{"a missing field", findSchema, `{"nom":"Ada"}`, `"name" is required`},
		{"a wrong type", findSchema, `{"name":5}`, `"name" must be a string, not an integer`},
		{"a nested wrong type", findSchema, `{"name":"Ada","lines":[{"qty":1},{"qty":"2"}]}`, `"lines[].qty" must be an integer, not a string`},
		{"a nested missing field", findSchema, `{"name":"Ada","lines":[{}]}`, `"lines[].qty" is required`},
		{"below a minimum", findSchema, `{"name":"Ada","lines":[{"qty":0}]}`, `"lines[].qty" must be at least 1`},
		{"too long", findSchema, `{"name":"` + strings.Repeat("a", 41) + `"}`, `"name" must be at most 40 characters`},
		{"not in an enum", findSchema, `{"name":"Ada","unit":"k"}`, `"unit": enum: k does not equal any of: [c f]`},
		{"strict: a valid call with a null", strictSchema, `{"name":"Ada","note":null}`, ""},
		{"strict: a field it does not name", strictSchema, `{"name":"Ada","note":null,"x":1}`, `the arguments object has no field "x"`},
		{"strict: a union", strictSchema, `{"name":"Ada","note":3}`, `"note" must be a string or null, not an integer`},
		{"$defs: valid", defsSchema, `{"home":{"zip":1}}`, ""},
		{"$defs: through the reference", defsSchema, `{"home":{"zip":"x"}}`, `"home.zip" must be a number, not a string`},
		{"draft-07: valid", draft7Schema, `{"id":"a"}`, ""},
		{"draft-07: through the reference", draft7Schema, `{"id":1}`, `"id" must be a string, not an integer`},
		{"draft-04: read as 2020-12", draft4Schema, `{"n":1}`, ""},
		{"draft-04: a wrong type", draft4Schema, `{"n":"1"}`, `"n" must be an integer, not a string`},
		{"a tree: valid", treeSchema, `{"label":"a","children":[{"label":"b","children":[{"label":"c"}]}]}`, ""},
		{"a tree: deep down", treeSchema, `{"label":"a","children":[{"label":"b","children":[{}]}]}`, `"children[].children[].label" is required`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool := appTool(t, tc.schema)
			res, refused := tool.Refusal(chat.ToolCall{Name: tool.Name, Arguments: tc.args}, Limits{})
			switch {
			case tc.want == "" && refused:
				t.Fatalf("refused: %q", res.Text)
			case tc.want == "":
				return
			case !refused || !res.IsError:
				t.Fatalf("not refused: %+v", res)
			}
			want := tc.want
			if !strings.HasPrefix(want, "The arguments") {
				want = fmt.Sprintf("Invalid arguments for crm_find: %s. Fix the call to match the tool's parameter schema.", tc.want)
			}
			if res.Text != want {
				t.Fatalf("the model is told\n%q\nwant\n%q", res.Text, want)
			}
		})
	}
}

// The model reads one form of refusal whichever kind of tool it called: an
// application's tool with a typed tool's schema refuses as the typed tool.
func TestAnApplicationToolRefusesAsATypedToolDoes(t *testing.T) {
	r := newTestRegistry(t)
	params, err := SchemaFor[sampleArgs]()
	if err != nil {
		t.Fatal(err)
	}
	app, err := CheckingArgs(Tool{Name: "search", Parameters: params, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"query":42,"home":{"city":"Oslo"}}`, `{"query":"a"}`, `{"query":"a","home":{}}`, `{"query":"a","home":{"city":"Oslo"},"colour":"red"}`, `[1]`, `{"query"`} {
		typed := r.Run(context.Background(), chat.ToolCall{Name: "search", Arguments: args}, Limits{})
		res, refused := app.Refusal(chat.ToolCall{Name: "search", Arguments: args}, Limits{})
		// The typed tool lists the fields it knows; the rest is the same.
		if known, _, _ := strings.Cut(typed.Text, " (known fields"); !refused || !strings.HasPrefix(res.Text, strings.TrimSuffix(known, ".")) {
			t.Errorf("%s: the application's tool says\n%q\nthe typed tool\n%q", args, res.Text, typed.Text)
		}
	}
}

// What the model is told stays short, whatever it sent.
func TestARefusalIsBounded(t *testing.T) {
	tool := appTool(t, `{"type":"object","properties":{"q":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":3}]}}}`)
	res, refused := tool.Refusal(chat.ToolCall{Name: tool.Name, Arguments: `{"q":"` + strings.Repeat("x", 100_000) + `"}`}, Limits{})
	if !refused || len(res.Text) > maxProblemBytes+200 || !strings.Contains(res.Text, `"q": anyOf`) || strings.Contains(res.Text, "\n") {
		t.Fatalf("%d bytes: %.300q", len(res.Text), res.Text)
	}
	// Arguments over the limit are refused unread, as every call's.
	res, refused = tool.Refusal(chat.ToolCall{Name: tool.Name, Arguments: `{"q":"` + strings.Repeat("x", 2000) + `"}`}, Limits{MaxArgBytes: 1000})
	if !refused || !strings.Contains(res.Text, "over the limit of 1000 bytes") {
		t.Fatalf("over the limit: %v %q", refused, res.Text)
	}
}

func TestASchemaThatCannotBeCheckedInBoundsIsRefused(t *testing.T) {
	// Two references to the next definition, 24 times: 2^24 subschemas on
	// one value.
	var fan strings.Builder
	fan.WriteString(`{"type":"object","properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{`)
	for i := range 24 {
		fmt.Fprintf(&fan, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fan.WriteString(`"d24":{"type":"string"}}}`)
	for _, tc := range []struct{ name, schema, want string }{
		{"itself", `{"type":"object","$ref":"#"}`, "refers back to itself for the same value"},
		{"through allOf", `{"type":"object","allOf":[{"$ref":"#/$defs/a"}],"$defs":{"a":{"not":{"$ref":"#"}}}}`, "refers back to itself for the same value"},
		{"a property's", `{"type":"object","properties":{"p":{"$ref":"#/properties/p"}}}`, "refers back to itself for the same value"},
		{"fanned out", fan.String(), "more than 100000 subschemas"},
		{"not a schema", `{"type":"object","properties":{"a":{"pattern":"(?<=x)"}}}`, "not a valid JSON Schema"},
		{"not an object's", `{"type":"array"}`, `"type": "object"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckingArgs(Tool{Name: "x", Parameters: json.RawMessage(tc.schema), Client: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if err := NewRegistry().CheckScope(Scope{Inline: []chat.ToolSpec{{Name: "x", Parameters: json.RawMessage(tc.schema)}}}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("a chat's own tool: %v", err)
			}
		})
	}
	// A reference it cannot follow leaves the calls unchecked, the schema
	// accepted as before.
	anchored, err := CheckingArgs(Tool{Name: "x", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#n"}},"$defs":{"n":{"$anchor":"n","type":"string"}}}`), Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if res, refused := anchored.Refusal(chat.ToolCall{Name: "x", Arguments: `{"a":1}`}, Limits{}); refused {
		t.Fatalf("an anchored schema's call was refused: %q", res.Text)
	}
}

// A chat's own tools are checked as a toolset's, their schemas compiled
// when the chat declares them.
func TestAChatsOwnToolIsChecked(t *testing.T) {
	r := NewRegistry()
	sc := Scope{Inline: []chat.ToolSpec{{Name: "crm_find", Parameters: json.RawMessage(findSchema)}}}
	if err := r.CheckScope(sc); err != nil {
		t.Fatal(err)
	}
	tool, ok := r.In(sc).Get("crm_find")
	if !ok || !tool.Client {
		t.Fatalf("get: %v %+v", ok, tool)
	}
	if res, refused := tool.Refusal(chat.ToolCall{Name: "crm_find", Arguments: `{"name":5}`}, Limits{}); !refused || !strings.Contains(res.Text, `"name" must be a string`) {
		t.Fatalf("%v %q", refused, res.Text)
	}
	// The refused call, run as agentd runs its own, is answered so too.
	res, err := r.In(sc).Call(context.Background(), chat.ToolCall{Name: "crm_find", Arguments: `{"name":5}`}, Limits{})
	if err != nil || !res.IsError || !strings.Contains(res.Text, `"name" must be a string`) {
		t.Fatalf("call: %v %+v", err, res)
	}
}

// A schema that applies itself twice to each nested value is accepted (it
// means something), but a call's work on it is counted before it is
// validated: nested 40 deep, the validator would apply 2^40 subschemas.
func TestACallsWorkIsBoundedBeforeItIsValidated(t *testing.T) {
	tool := appTool(t, `{"type":"object","allOf":[{"properties":{"a":{"$ref":"#"}}},{"properties":{"a":{"$ref":"#"}}}]}`)
	deep := strings.Repeat(`{"a":`, 40) + `{}` + strings.Repeat(`}`, 40)
	res, refused := tool.Refusal(chat.ToolCall{Name: tool.Name, Arguments: deep}, Limits{})
	if !refused || !strings.Contains(res.Text, "too big or nested too deep to be checked") {
		t.Fatalf("%v %q", refused, res.Text)
	}
	if res, refused := tool.Refusal(chat.ToolCall{Name: tool.Name, Arguments: strings.Repeat(`{"a":`, 8) + `{}` + strings.Repeat(`}`, 8)}, Limits{}); refused {
		t.Fatalf("a shallow call was refused: %q", res.Text)
	}
	// Ordinary arguments, however many, are far from the bound.
	lines := strings.TrimSuffix(strings.Repeat(`{"qty":1},`, 20_000), ",")
	if res, refused := appTool(t, findSchema).Refusal(chat.ToolCall{Name: "crm_find", Arguments: `{"name":"Ada","lines":[` + lines + `]}`}, Limits{}); refused {
		t.Fatalf("20,000 lines were refused: %q", res.Text)
	}
	tree := strings.Repeat(`{"label":"x","children":[`, 300) + `{"label":"leaf"}` + strings.Repeat(`]}`, 300)
	if res, refused := appTool(t, treeSchema).Refusal(chat.ToolCall{Name: "crm_find", Arguments: tree}, Limits{}); refused {
		t.Fatalf("a tree 300 deep was refused: %q", res.Text)
	}
}

// A schema with an $id names its root by it; the field's path is told all
// the same.
func TestARefusalNamesTheFieldUnderARootID(t *testing.T) {
	tool := appTool(t, `{"$id":"https://example.com/find.json","type":"object","properties":{"home":{"type":"object","properties":{"zip":{"type":"number"}}}}}`)
	res, refused := tool.Refusal(chat.ToolCall{Name: tool.Name, Arguments: `{"home":{"zip":"x"}}`}, Limits{})
	if !refused || !strings.Contains(res.Text, `"home.zip" must be a number, not a string`) {
		t.Fatalf("%v %q", refused, res.Text)
	}
}
