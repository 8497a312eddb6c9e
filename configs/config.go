// Package configs is agentd's one typed configuration: defaults, then the
// yaml file, then AGENTD_* environment, then flags (applied by the caller),
// then Validate. agentd.yaml beside this file is the documented example.
package configs

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/invopop/jsonschema"
	"go.yaml.in/yaml/v3"
)

// Config is everything agentd reads at start.
type Config struct {
	// Listen is the HTTP address. Optional. Defaults to 127.0.0.1:8420.
	Listen string `yaml:"listen" json:"listen"`
	// DataDir holds Badger and attachments. Optional. Defaults to ./data.
	DataDir string `yaml:"data_dir" json:"data_dir"`
	// Store chooses where chats are kept: Badger in DataDir, or Postgres.
	Store Store `yaml:"store" json:"store"`
	// DefaultModel is "provider/model" for new chats. Optional. Defaults to
	// the first model of the first provider.
	DefaultModel string `yaml:"default_model" json:"default_model"`
	// Providers are the model APIs. Optional. Defaults to Ollama at
	// http://127.0.0.1:11434 when empty.
	Providers []Provider `yaml:"providers" json:"providers"`
	// Auth lists bearer tokens. Optional. Without tokens agentd serves
	// loopback only.
	Auth Auth `yaml:"auth" json:"auth"`
	// Limits bound what one request, tenant or chat may use.
	Limits Limits `yaml:"limits" json:"limits"`
	// HTTP guards and bounds the server's connections (docs/security.md).
	HTTP HTTP `yaml:"http" json:"http"`
	// Metrics says where /metrics is served.
	Metrics Metrics `yaml:"metrics" json:"metrics"`
	// Tracing exports OpenTelemetry traces. Optional. Defaults to off.
	Tracing Tracing `yaml:"tracing" json:"tracing"`
	// IdleAfter passivates a chat's actor after this long without use.
	// Optional. Defaults to 5m.
	IdleAfter Duration `yaml:"idle_after" json:"idle_after"`
	// MCPServers are Model Context Protocol servers whose tools agentd offers.
	MCPServers []MCPServer `yaml:"mcp_servers" json:"mcp_servers"`
	// Attachments: where files live and which local paths may be attached.
	Attachments Attachments `yaml:"attachments" json:"attachments"`
	// Learner: how memories are learned.
	Learner Learner `yaml:"learner" json:"learner"`
	// LogLevel is debug, info, warn or error. Optional. Defaults to info.
	LogLevel string `yaml:"log_level" json:"log_level"`
	// Tenants sets defaults of each tenant's chats, by tenant. Optional.
	Tenants map[string]Tenant `yaml:"tenants" json:"tenants,omitempty"`
	// Toolsets: how the toolsets applications register over HTTP run.
	Toolsets Toolsets `yaml:"toolsets" json:"toolsets"`
	// Cluster joins this node to other agentd nodes (docs/cluster.md).
	// Optional. Defaults to off: one process serves every chat.
	Cluster Cluster `yaml:"cluster" json:"cluster"`
}

// Cluster places each chat on one node of a protoactor-go cluster
// (docs/cluster.md, "Cluster mode"). It needs store.kind postgres: every
// node reads and writes the same store.
type Cluster struct {
	// Enabled turns cluster mode on. Optional. Defaults to false.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Name: nodes with the same name form one cluster (the etcd key
	// prefix). Optional. Defaults to agentd.
	Name string `yaml:"name" json:"name"`
	// Provider is the membership: etcd or kubernetes. Optional. Defaults
	// to etcd.
	Provider string `yaml:"provider" json:"provider"`
	// EtcdEndpoints are the etcd client URLs (provider etcd). Also
	// AGENTD_CLUSTER_ETCD_ENDPOINTS, comma-separated.
	EtcdEndpoints []string `yaml:"etcd_endpoints" json:"etcd_endpoints,omitempty"`
	// Bind is host:port of this node's cluster (gRPC) listener, which the
	// other nodes dial: a concrete address, not 0.0.0.0; port 0 takes a
	// free one. Optional. Defaults to 127.0.0.1:0.
	Bind string `yaml:"bind" json:"bind"`
	// AdvertiseHTTP is the URL other nodes forward this node's chats to.
	// Optional. Defaults to http://<listen> (required when listen's host
	// is unspecified, such as 0.0.0.0).
	AdvertiseHTTP string `yaml:"advertise_http" json:"advertise_http,omitempty"`
}

// Cluster providers.
const (
	ClusterEtcd       = "etcd"
	ClusterKubernetes = "kubernetes"
)

// Tenant holds one tenant's defaults and grants.
type Tenant struct {
	// Instructions are the system prompt of the tenant's chats that set
	// none of their own. Optional. Defaults to none.
	Instructions string `yaml:"instructions" json:"instructions,omitempty"`
	// AllowedEnv lists the environment variables this tenant's toolsets,
	// and no other tenant's, may name for a webhook's secret or an MCP
	// server's headers (besides toolsets.allowed_env, which every tenant
	// may name). Optional. Defaults to none.
	AllowedEnv []string `yaml:"allowed_env" json:"allowed_env,omitempty"`
}

// Toolsets configures applications' toolsets.
type Toolsets struct {
	// ResultsWait is how long a turn paused on client-executed calls waits
	// for their results before it ends with a problem. Optional. Defaults to 10m.
	ResultsWait Duration `yaml:"results_wait" json:"results_wait"`
	// WebhooksAllowPrivate lets webhook and MCP toolsets reach loopback and
	// private addresses (an application on the same host or network).
	// Optional. Defaults to false: the address rules of fetch_url.
	WebhooksAllowPrivate bool `yaml:"webhooks_allow_private" json:"webhooks_allow_private"`
	// AllowedEnv lists the environment variables the toolsets of every
	// tenant may name for a webhook's secret or an MCP server's headers.
	// Shared: any tenant can send such a variable's value to a server of its
	// choosing, so list here only what every tenant may read (one tenant,
	// or tenants that trust each other); a tenant's own secrets go in its
	// tenants.<name>.allowed_env. No other variable of the daemon's is ever
	// read. Optional. Defaults to none.
	AllowedEnv []string `yaml:"allowed_env" json:"allowed_env,omitempty"`
	// MaxPerTenant is the most toolsets one tenant may have: a PUT of a
	// new name past it is refused (replacing one is not), so no tenant
	// grows the shared tool index without bound. Optional. Defaults to 100.
	MaxPerTenant int `yaml:"max_per_tenant" json:"max_per_tenant"`
	// MaxToolsPerTenant is the most tools one tenant's toolsets hold
	// together (an MCP toolset's as its server lists them); a PUT past it
	// is refused. Optional. Defaults to 20000 (one toolset holds at most
	// 10000).
	MaxToolsPerTenant int `yaml:"max_tools_per_tenant" json:"max_tools_per_tenant"`
}

// Provider is one model API.
type Provider struct {
	// Name is how models are addressed: "<name>/<model>".
	Name string `yaml:"name" json:"name"`
	// Kind is the protocol: openai, anthropic or ollama.
	Kind string `yaml:"kind" json:"kind"`
	// Company picks the row of the OpenAI-style table (groq, openrouter,
	// lmstudio, …). Optional. Defaults to a guess from base_url.
	Company string `yaml:"company" json:"company,omitempty"`
	// BaseURL of the API. Optional for the known companies.
	BaseURL string `yaml:"base_url" json:"base_url"`
	// APIKeyEnv names the environment variable that holds the key.
	APIKeyEnv string `yaml:"api_key_env" json:"api_key_env,omitempty"`
	// Models lists model ids, each optionally with its window.
	Models []Model `yaml:"models" json:"models"`
	// Cheapest and Small override the company table for the summariser.
	Cheapest string `yaml:"cheapest" json:"cheapest,omitempty"`
	Small    string `yaml:"small" json:"small,omitempty"`
	// PromptCacheKey sends each chat's stable prompt_cache_key (OpenAI-style
	// APIs that take it route a chat's requests to the machine holding its
	// cached prefix). Unset: on for api.openai.com, off elsewhere, since a
	// strict server may refuse a field it does not know.
	PromptCacheKey *bool `yaml:"prompt_cache_key" json:"prompt_cache_key,omitempty"`
}

// Model is one configured model: a bare id or {id, window, vision, tools}.
type Model struct {
	ID     string `yaml:"id" json:"id"`
	Window int    `yaml:"window" json:"window,omitempty"`
	Vision bool   `yaml:"vision" json:"vision,omitempty"`
	// Tools is how the model calls tools: "native" (the API's tool calls,
	// the default) or "words" (it writes them in its text).
	Tools string `yaml:"tools" json:"tools,omitempty"`
}

// UnmarshalYAML accepts a bare string as a model id.
func (m *Model) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		m.ID = n.Value
		return nil
	}
	type plain Model
	return n.Decode((*plain)(m))
}

// Auth configures bearer tokens.
type Auth struct {
	Tokens []Token `yaml:"tokens" json:"tokens"`
}

// Token is a tenant and the environment variable holding its token.
type Token struct {
	Tenant   string `yaml:"tenant" json:"tenant"`
	TokenEnv string `yaml:"token_env" json:"token_env"`
}

// Limits bound each request, tenant and chat. Zero means the default.
type Limits struct {
	// MaxBodyBytes per HTTP request, and the most an MCP toolset's tools
	// take as its server lists them (what a client toolset's PUT could
	// bring). Defaults to 1 MiB (uploads: MaxUploadBytes).
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// MaxHistoryBytes per Chat Completions request, whose client sends the
	// whole history every time. Defaults to 32 MiB.
	MaxHistoryBytes int64 `yaml:"max_history_bytes" json:"max_history_bytes"`
	// MaxHistoryMessages per Chat Completions request, system messages
	// included: a history of many tiny messages costs per message (parsing,
	// digests, a stored entry each) far more than its bytes say, and is
	// refused before any chat is made for it; so are its messages' tool
	// calls, content parts and its tools, each in all, counted before the
	// body is decoded. It bounds a chat import's
	// messages too, and each other kind of list it holds (tool calls,
	// images, attachments, tools, toolsets) in all, counted as they are
	// read. Defaults to 20000.
	MaxHistoryMessages int `yaml:"max_history_messages" json:"max_history_messages"`
	// MaxUploadBytes per multipart upload. Defaults to 1 GiB.
	MaxUploadBytes int64 `yaml:"max_upload_bytes" json:"max_upload_bytes"`
	// MaxImportBytes per chat import (POST /v1/chats/import), which lands
	// in one transaction. Defaults to 4 MiB.
	MaxImportBytes int64 `yaml:"max_import_bytes" json:"max_import_bytes"`
	// MaxMessageBytes per message content. Defaults to 256 KiB.
	MaxMessageBytes int `yaml:"max_message_bytes" json:"max_message_bytes"`
	// ChatsPerTenant. Defaults to 10000.
	ChatsPerTenant int `yaml:"chats_per_tenant" json:"chats_per_tenant"`
	// TurnsPerChat waiting or running at once. Defaults to 4.
	TurnsPerChat int `yaml:"turns_per_chat" json:"turns_per_chat"`
	// TurnsPerTenant waiting or running at once. Defaults to 2000.
	TurnsPerTenant int `yaml:"turns_per_tenant" json:"turns_per_tenant"`
	// MemoriesPerTenant is the most memories one tenant keeps, active or
	// waiting for an OK: every new memory and each day's memory map read
	// them all. Past it nothing more is stored (the remember tool tells
	// the model, the learner logs it) until the person deletes some. -1:
	// no limit. Defaults to 10000.
	MemoriesPerTenant int `yaml:"memories_per_tenant" json:"memories_per_tenant"`
	// RequestsPerSecond per tenant (burst twice that). Defaults to 200.
	RequestsPerSecond float64 `yaml:"requests_per_second" json:"requests_per_second"`
	// IngestBytesPerSecond is how many bytes of messages a tenant may add
	// to its chats a second (their text, tool results, imports; burst 8
	// seconds of it): a turn's CPU grows with its message, on cores every
	// tenant shares. Past it, 429 with Retry-After. -1: no limit. Defaults
	// to 1 MiB.
	IngestBytesPerSecond int64 `yaml:"ingest_bytes_per_second" json:"ingest_bytes_per_second"`
	// ToolTimeout per tool call. Defaults to 60s.
	ToolTimeout Duration `yaml:"tool_timeout" json:"tool_timeout"`
	// ToolResultBytes sent to the model per result (stored whole). Defaults to 32 KiB.
	ToolResultBytes int `yaml:"tool_result_bytes" json:"tool_result_bytes"`
	// MaxToolResultBytes is the most a tool call may return at all, stored
	// (a longer text keeps its head and tail; an MCP server's larger answer
	// is refused, and the server stays usable). Defaults to 8 MiB.
	MaxToolResultBytes int `yaml:"max_tool_result_bytes" json:"max_tool_result_bytes"`
	// ToolArgumentBytes is the most of a tool call's arguments a tool reads;
	// longer ones are refused unread (and kept in the log) and the model is
	// sent only their head again. Defaults to 256 KiB.
	ToolArgumentBytes int `yaml:"tool_argument_bytes" json:"tool_argument_bytes"`
	// TurnTimeout bounds a whole turn, retries included. Defaults to 10m.
	TurnTimeout Duration `yaml:"turn_timeout" json:"turn_timeout"`
	// ModelIdleTimeout ends a model call that sends nothing for this long. Defaults to 120s.
	ModelIdleTimeout Duration `yaml:"model_idle_timeout" json:"model_idle_timeout"`
	// FoldWait is the longest a turn waits for a summary; past it the fold
	// applies with a digest and the summary follows. Defaults to 20s.
	FoldWait Duration `yaml:"fold_wait" json:"fold_wait"`
	// CompactThreshold is the compact_threshold of every chat that sets
	// none: its requests stay within this many tokens on a bigger window
	// (it folds sooner, and is lean at 16K or less), because every kept
	// token is sent again, and paid for, on every turn; on a window whose
	// 60% is less, such a chat is held to that (window.WorkingSize). -1
	// lets such chats fill their model's window.
	// Defaults to 12000 (BENCHMARKS.md, issue 20).
	CompactThreshold int `yaml:"compact_threshold" json:"compact_threshold"`
	// FoldAsLines sends the summariser the folded turns as plain lines
	// only. Unset, a fold asks the chat's own model right after the chat's
	// own request prefix, which the provider serves from its prompt cache
	// (the lines stay the fallback). Defaults to false.
	FoldAsLines bool `yaml:"fold_as_lines" json:"fold_as_lines"`
	// MaxAnswerBytes is the most of one model answer (text, thinking and
	// tool-call arguments) kept and stored; past it the turn ends with the
	// problem answer-too-large and the part before the cap kept. Defaults
	// to 4 MiB.
	MaxAnswerBytes int `yaml:"max_answer_bytes" json:"max_answer_bytes"`
	// MaxTitleRunes is the longest chat title, in characters. Defaults to 200.
	MaxTitleRunes int `yaml:"max_title_runes" json:"max_title_runes"`
}

// HTTP guards and bounds the server's connections. Zero means the default.
type HTTP struct {
	// AllowedHosts are Host names served besides the loopback ones
	// (localhost, 127.0.0.0/8, ::1). The Host check applies when no
	// auth.tokens are configured, or whenever this list is set. Optional.
	// Defaults to none.
	AllowedHosts []string `yaml:"allowed_hosts" json:"allowed_hosts"`
	// ReadHeaderTimeout bounds reading a request's headers. Defaults to 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout" json:"read_header_timeout"`
	// ReadTimeout bounds reading a request's body, on every route. Defaults to 60s.
	ReadTimeout Duration `yaml:"read_timeout" json:"read_timeout"`
	// UploadTimeout bounds reading an upload's body. Defaults to 15m.
	UploadTimeout Duration `yaml:"upload_timeout" json:"upload_timeout"`
	// WriteTimeout bounds each write of an answer to its client (an event
	// of a stream, a piece of a transcript or an export, 64 KiB of any
	// other answer): a client that takes nothing for this long is cut.
	// Defaults to 30s.
	WriteTimeout Duration `yaml:"write_timeout" json:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long. Defaults to 2m.
	IdleTimeout Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// Keepalive is how often a stream with nothing to say (a message
	// waiting behind its chat's running turn, a turn between events) sends
	// an SSE comment, so that clients' and proxies' read timeouts do not
	// take it for dead. Defaults to 15s.
	Keepalive Duration `yaml:"keepalive" json:"keepalive"`
	// MaxUnauthenticated is how many connections may be open at once on
	// which no request has yet authenticated; a new one beyond it closes the
	// oldest such once that one has had a second to send a request (at
	// once past twice the number). Defaults to 256.
	MaxUnauthenticated int `yaml:"max_unauthenticated" json:"max_unauthenticated"`
	// ConnsPerTenant is the most connections one tenant holds at once; a
	// request on one more is answered 429 and its connection closed.
	// Defaults to 256.
	ConnsPerTenant int `yaml:"conns_per_tenant" json:"conns_per_tenant"`
}

// Metrics says where /metrics is served.
type Metrics struct {
	// Listen, when set, serves /metrics on this address alone, without a
	// token, and not on the API's address; a bare ":port" binds loopback.
	// Optional. Defaults to none: /metrics is on the API's address behind
	// the API's auth.
	Listen string `yaml:"listen" json:"listen"`
}

// Tracing says where OpenTelemetry traces go (docs/tracing.md).
type Tracing struct {
	// Endpoint is the OTLP/HTTP collector's URL, such as
	// http://127.0.0.1:4318 (traces go to its /v1/traces). Optional.
	// Defaults to none: traces are off unless OTEL_EXPORTER_OTLP_ENDPOINT
	// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, which the exporter then
	// reads with the other standard OTEL_* variables (OTEL_TRACES_SAMPLER
	// among them).
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
}

// MCPServer is one MCP server: stdio when Command is set, streamable HTTP
// when URL is set.
type MCPServer struct {
	Name    string            `yaml:"name" json:"name"`
	Command []string          `yaml:"command" json:"command,omitempty"`
	Env     map[string]string `yaml:"env" json:"env,omitempty"`
	URL     string            `yaml:"url" json:"url,omitempty"`
	// Headers go with every HTTP request; ${VAR} in a value is taken from
	// agentd's environment when connecting.
	Headers map[string]string `yaml:"headers" json:"-"`
	// BareNames registers the server's tools under their own names, without
	// the "<name>__" prefix: a small local model calls tools by the names it
	// was trained on. A name another tool already has is skipped. Optional.
	// Defaults to false.
	BareNames bool `yaml:"bare_names" json:"bare_names,omitempty"`
}

// Store chooses the store's backend (docs/cluster.md).
type Store struct {
	// Kind is badger (embedded, in data_dir) or postgres. Optional.
	// Defaults to badger.
	Kind string `yaml:"kind" json:"kind"`
	// DSNEnv names the environment variable that holds the Postgres DSN,
	// kept out of the file since it carries a password. Optional (kind
	// postgres). Defaults to AGENTD_PG_DSN.
	DSNEnv string `yaml:"dsn_env" json:"dsn_env"`
	// FailingAfter is how long Postgres may not answer the node's pings
	// before /healthz says failing (503) rather than degraded (200), so a
	// liveness probe restarts the node: past what a restart or failover of
	// the server takes (docs/cluster.md, "When something fails").
	// Optional (kind postgres). Defaults to 2m.
	FailingAfter Duration `yaml:"failing_after" json:"failing_after"`
	// CloseWait is how long the store may take, once the sessions have
	// stopped, to commit the writes they queued before the daemon stops:
	// past it, a Postgres that does not answer has its connections cut and
	// the writes not committed fail (docs/cluster.md, "When something
	// fails"). Optional (kind postgres). Defaults to 10s.
	CloseWait Duration `yaml:"close_wait" json:"close_wait"`
}

// DefaultCloseWait is store.close_wait's default.
const DefaultCloseWait = 10 * time.Second

// CloseWaitOrDefault is CloseWait, or its default when unset (a Config
// built in code, without ApplyDefaults).
func (s Store) CloseWaitOrDefault() time.Duration {
	if s.CloseWait.Duration > 0 {
		return s.CloseWait.Duration
	}
	return DefaultCloseWait
}

// DefaultFailingAfter is store.failing_after's default.
const DefaultFailingAfter = 2 * time.Minute

// FailingAfterOrDefault is FailingAfter, or its default when unset (a
// Config built in code, without ApplyDefaults).
func (s Store) FailingAfterOrDefault() time.Duration {
	if s.FailingAfter.Duration > 0 {
		return s.FailingAfter.Duration
	}
	return DefaultFailingAfter
}

// Store kinds.
const (
	StoreBadger   = "badger"
	StorePostgres = "postgres"
)

// Attachments configures file storage.
type Attachments struct {
	// AllowedDirs may be attached by path. Optional. Defaults to none.
	AllowedDirs []string `yaml:"allowed_dirs" json:"allowed_dirs"`
	// MaxBytes is the storage limit for all attachments: what every tenant
	// holds, each file at its full size even where tenants share its
	// bytes, and never less than the bytes on disk (a file no tenant holds
	// any more stays there). Optional. 0: none.
	MaxBytes int64 `yaml:"max_bytes" json:"max_bytes"`
	// MaxBytesPerTenant is the most one tenant's attachments may hold (each
	// file it holds at its full size, even one another tenant stored too),
	// so no tenant fills max_bytes for the others. Optional. 0: none.
	MaxBytesPerTenant int64 `yaml:"max_bytes_per_tenant" json:"max_bytes_per_tenant"`
	// UnsentTTL is how long a tenant keeps an upload it sends to no chat,
	// from its last upload of the file: past it the hourly sweep drops the
	// hold, and the file goes once no tenant holds it. An upload sent to a
	// chat is kept as long as such a chat is. Optional. Defaults to 168h.
	UnsentTTL Duration `yaml:"unsent_ttl" json:"unsent_ttl"`
}

// Learner configures learning.
type Learner struct {
	// SweepEvery runs the periodic sweep. Optional. Defaults to 24h.
	SweepEvery Duration `yaml:"sweep_every" json:"sweep_every"`
}

// Duration reads "90s" style durations from yaml.
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string. Its error is a type error,
// so that Load names the key (nameKeys).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration like 90s or 5m: %v", n.Line, n.Value, err)}}
	}
	d.Duration = v
	return nil
}

// JSONSchema describes a Duration as the string it is written as.
func (Duration) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Pattern: `^([0-9.]+(ns|us|µs|ms|s|m|h))+$`, Examples: []any{"90s", "5m", "24h"}}
}

// MarshalText prints the duration in Go form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// DefaultCompactThreshold is limits.compact_threshold when none is set.
const DefaultCompactThreshold = 12000

// DefaultIngestBytesPerSecond is limits.ingest_bytes_per_second when none
// is set: four of the largest messages (limits.max_message_bytes) a second,
// 32 at once, far past what a person pastes or a model reads, and a cap on
// the cores one tenant's pasting takes (BENCHMARKS.md, "A tenant's share
// of the cores").
const DefaultIngestBytesPerSecond = 1 << 20

// minCompactThreshold is the least limits.compact_threshold (a chat's own
// least, chat.MinCompactThreshold: OpenAI's minimum).
const minCompactThreshold = 1000

// DefaultOllamaURL is tried when no provider is configured.
const DefaultOllamaURL = "http://127.0.0.1:11434"

// Load reads the yaml file at path (none when empty), then the environment,
// and applies defaults. The caller applies flags and then calls Validate.
func Load(path string) (Config, error) {
	var c Config
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("read config: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return c, fmt.Errorf("parse config %s: %w", path, nameKeys(b, err))
		}
	}
	if err := c.applyEnv(os.Getenv); err != nil {
		return c, err
	}
	c.ApplyDefaults()
	return c, nil
}

// nameKeys adds to each "line N: …" of a yaml type error the key whose
// value is on that line ("line 3: limits.turns_per_chat: cannot unmarshal
// !!str `abc` into int"): the line alone sent the operator counting lines.
// Other errors are returned as they are.
func nameKeys(src []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil {
		return err
	}
	// One line may start several values (a list item's map and its first
	// key's value): the failing one is the innermost of the kind the
	// error names (!!seq, !!map, else a scalar) that starts on its line.
	innermost := map[yaml.Kind]map[int]string{yaml.ScalarNode: {}, yaml.SequenceNode: {}, yaml.MappingNode: {}}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if path != "" && innermost[n.Kind] != nil {
			innermost[n.Kind][n.Line] = path
		}
		for i := 0; i < len(n.Content); i++ {
			switch n.Kind {
			case yaml.DocumentNode:
				walk(n.Content[i], path)
			case yaml.SequenceNode:
				walk(n.Content[i], fmt.Sprintf("%s[%d]", path, i))
			case yaml.MappingNode:
				if i++; i < len(n.Content) {
					k := n.Content[i-1].Value
					if path != "" {
						k = path + "." + k
					}
					walk(n.Content[i], k)
				}
			}
		}
	}
	walk(&root, "")
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = m
		var line int
		if _, serr := fmt.Sscanf(m, "line %d:", &line); serr != nil {
			continue
		}
		kind := yaml.ScalarNode
		if strings.Contains(m, "!!seq") {
			kind = yaml.SequenceNode
		} else if strings.Contains(m, "!!map") {
			kind = yaml.MappingNode
		}
		if key := innermost[kind][line]; key != "" {
			msgs[i] = strings.Replace(m, ":", ": "+key+":", 1)
		}
	}
	return &yaml.TypeError{Errors: msgs}
}

// applyEnv applies the AGENTD_* variables that are set. A value that does
// not parse is an error naming the variable, never ignored: a setting the
// operator believes in and agentd does not is worse than no start.
func (c *Config) applyEnv(get func(string) string) error {
	str := func(key string, dst *string) {
		if v := get(key); v != "" {
			*dst = v
		}
	}
	str("AGENTD_LISTEN", &c.Listen)
	str("AGENTD_DATA_DIR", &c.DataDir)
	str("AGENTD_STORE", &c.Store.Kind)
	str("AGENTD_DEFAULT_MODEL", &c.DefaultModel)
	str("AGENTD_LOG_LEVEL", &c.LogLevel)
	str("AGENTD_CLUSTER_NAME", &c.Cluster.Name)
	str("AGENTD_CLUSTER_PROVIDER", &c.Cluster.Provider)
	str("AGENTD_CLUSTER_BIND", &c.Cluster.Bind)
	str("AGENTD_CLUSTER_ADVERTISE_HTTP", &c.Cluster.AdvertiseHTTP)
	if v := get("AGENTD_CLUSTER_ETCD_ENDPOINTS"); v != "" {
		c.Cluster.EtcdEndpoints = nil
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				c.Cluster.EtcdEndpoints = append(c.Cluster.EtcdEndpoints, e)
			}
		}
	}
	var errs []error
	if v := get("AGENTD_CLUSTER_ENABLED"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("AGENTD_CLUSTER_ENABLED=%q: want true or false", v))
		}
		c.Cluster.Enabled = b
	}
	if v := get("AGENTD_IDLE_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("AGENTD_IDLE_AFTER=%q: want a positive duration such as 90s, 5m or 1h", v))
		}
		c.IdleAfter.Duration = d
	}
	if v := get("AGENTD_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("AGENTD_MAX_BODY_BYTES=%q: want a positive whole number of bytes, such as 1048576", v))
		}
		c.Limits.MaxBodyBytes = n
	}
	// AGENTD_TOKEN gives the "default" tenant a token without a yaml file.
	if get("AGENTD_TOKEN") != "" && len(c.Auth.Tokens) == 0 {
		c.Auth.Tokens = []Token{{Tenant: "default", TokenEnv: "AGENTD_TOKEN"}}
	}
	return errors.Join(errs...)
}

// ApplyDefaults fills every unset field.
func (c *Config) ApplyDefaults() {
	def := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	def(&c.Listen, "127.0.0.1:8420")
	def(&c.DataDir, "./data")
	def(&c.Store.Kind, StoreBadger)
	if c.Store.Kind == StorePostgres {
		def(&c.Store.DSNEnv, "AGENTD_PG_DSN")
		setDur(&c.Store.FailingAfter, DefaultFailingAfter)
		setDur(&c.Store.CloseWait, DefaultCloseWait)
	}
	def(&c.LogLevel, "info")
	if c.IdleAfter.Duration == 0 {
		c.IdleAfter.Duration = 5 * time.Minute
	}
	l := &c.Limits
	setInt64(&l.MaxBodyBytes, 1<<20)
	setInt64(&l.MaxHistoryBytes, 32<<20)
	setInt(&l.MaxHistoryMessages, 20000)
	setInt64(&l.MaxUploadBytes, 1<<30)
	setInt64(&l.MaxImportBytes, 4<<20)
	setInt(&l.MaxMessageBytes, 256<<10)
	setInt(&l.ChatsPerTenant, 10000)
	setInt(&l.TurnsPerChat, 4)
	setInt(&l.TurnsPerTenant, 2000)
	setInt(&l.MemoriesPerTenant, 10000)
	if l.RequestsPerSecond == 0 {
		l.RequestsPerSecond = 200
	}
	setInt64(&l.IngestBytesPerSecond, DefaultIngestBytesPerSecond)
	setDur(&l.ToolTimeout, time.Minute)
	setInt(&l.ToolResultBytes, 32<<10)
	setInt(&l.MaxToolResultBytes, 8<<20)
	setInt(&l.ToolArgumentBytes, 256<<10)
	setDur(&l.TurnTimeout, 10*time.Minute)
	setDur(&l.ModelIdleTimeout, 2*time.Minute)
	setDur(&l.FoldWait, 20*time.Second)
	setInt(&l.CompactThreshold, DefaultCompactThreshold)
	setInt(&l.MaxAnswerBytes, 4<<20)
	setInt(&l.MaxTitleRunes, 200)
	h := &c.HTTP
	setDur(&h.ReadHeaderTimeout, 10*time.Second)
	setDur(&h.ReadTimeout, time.Minute)
	setDur(&h.UploadTimeout, 15*time.Minute)
	setDur(&h.WriteTimeout, 30*time.Second)
	setDur(&h.IdleTimeout, 2*time.Minute)
	setDur(&h.Keepalive, 15*time.Second)
	setInt(&h.MaxUnauthenticated, 256)
	setInt(&h.ConnsPerTenant, 256)
	if host, port, err := net.SplitHostPort(c.Metrics.Listen); err == nil && host == "" {
		c.Metrics.Listen = net.JoinHostPort("127.0.0.1", port)
	}
	setDur(&c.Learner.SweepEvery, 24*time.Hour)
	setDur(&c.Attachments.UnsentTTL, 7*24*time.Hour)
	setDur(&c.Toolsets.ResultsWait, 10*time.Minute)
	setInt(&c.Toolsets.MaxPerTenant, 100)
	setInt(&c.Toolsets.MaxToolsPerTenant, 20000)
	if c.Cluster.Enabled {
		def(&c.Cluster.Name, "agentd")
		def(&c.Cluster.Provider, ClusterEtcd)
		def(&c.Cluster.Bind, "127.0.0.1:0")
	}
	if len(c.Providers) == 0 {
		c.Providers = []Provider{{Name: "ollama", Kind: "ollama", BaseURL: DefaultOllamaURL}}
	}
	for i := range c.Providers {
		def(&c.Providers[i].Name, c.Providers[i].Kind)
	}
	if c.DefaultModel == "" {
		for _, p := range c.Providers {
			if len(p.Models) > 0 {
				c.DefaultModel = p.Name + "/" + p.Models[0].ID
				break
			}
		}
	}
}

func setInt(dst *int, v int) {
	if *dst == 0 {
		*dst = v
	}
}

func setInt64(dst *int64, v int64) {
	if *dst == 0 {
		*dst = v
	}
}

func setDur(dst *Duration, v time.Duration) {
	if dst.Duration == 0 {
		dst.Duration = v
	}
}

// Validate reports the first thing wrong with the configuration.
func (c *Config) Validate() error {
	names := map[string]bool{}
	for i, p := range c.Providers {
		switch p.Kind {
		case "openai", "anthropic", "ollama":
		default:
			return fmt.Errorf("providers[%d] %q: kind must be openai, anthropic or ollama, not %q", i, p.Name, p.Kind)
		}
		if names[p.Name] {
			return fmt.Errorf("providers[%d]: name %q is used twice", i, p.Name)
		}
		names[p.Name] = true
		if strings.Contains(p.Name, "/") {
			return fmt.Errorf("providers[%d]: name %q must not contain '/'", i, p.Name)
		}
		if p.BaseURL != "" {
			// Checked here for every kind: a URL no request can use would
			// start a daemon whose provider never answers.
			if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("providers[%d] %q: base_url %q: want an http:// or https:// URL, such as http://127.0.0.1:8080/v1", i, p.Name, p.BaseURL)
			}
			if err := rootOnly(p); err != nil {
				return fmt.Errorf("providers[%d] %q: %w", i, p.Name, err)
			}
		}
		for j, m := range p.Models {
			if strings.TrimSpace(m.ID) == "" {
				return fmt.Errorf("providers[%d] %q: models[%d] has no id: write the model's name, such as models: [qwen3:4b] or models: [{id: qwen3:4b, window: 32768}]", i, p.Name, j)
			}
			if m.Window < 0 {
				return fmt.Errorf("providers[%d] model %q: window %d: want a number of tokens, or leave it out to read it from the server", i, m.ID, m.Window)
			}
			if m.Tools != "" && m.Tools != "native" && m.Tools != "words" {
				return fmt.Errorf("providers[%d] model %q: tools must be native or words, not %q", i, m.ID, m.Tools)
			}
		}
	}
	if err := notNegative(c); err != nil {
		return err
	}
	if t := c.Limits.CompactThreshold; t != -1 && t < minCompactThreshold {
		return fmt.Errorf("limits.compact_threshold %d: use at least %d tokens, or -1 for the whole window", t, minCompactThreshold)
	}
	switch c.Store.Kind {
	case StoreBadger, StorePostgres:
	default:
		return fmt.Errorf("store.kind must be badger or postgres, not %q", c.Store.Kind)
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log_level %q: use debug, info, warn or error (log_level, AGENTD_LOG_LEVEL or --log-level)", c.LogLevel)
	}
	if c.DefaultModel != "" && !strings.Contains(c.DefaultModel, "/") {
		return fmt.Errorf("default_model %q must be \"provider/model\"", c.DefaultModel)
	}
	for i, t := range c.Auth.Tokens {
		if t.Tenant == "" || t.TokenEnv == "" {
			return fmt.Errorf("auth.tokens[%d]: tenant and token_env are both required", i)
		}
		// The store keys a tenant's records "<tenant>/<id>": a tenant
		// named "a/b" would share keys with tenant "a"'s ids "b/…".
		if strings.ContainsFunc(t.Tenant, func(r rune) bool { return r == '/' || unicode.IsControl(r) }) {
			return fmt.Errorf("auth.tokens[%d]: tenant %q must not contain '/' or control characters", i, t.Tenant)
		}
	}
	if e := c.Tracing.Endpoint; e != "" && !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
		return fmt.Errorf("tracing.endpoint %q: want the collector's http:// or https:// URL (OTLP/HTTP)", e)
	}
	// Before the loopback rule, which would call "8420" an address that is
	// not loopback and ask for tokens.
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen %q: want host:port, such as 127.0.0.1:8420: %w", c.Listen, err)
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			return fmt.Errorf("metrics.listen %q: want host:port: %w", c.Metrics.Listen, err)
		}
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if len(c.Auth.Tokens) == 0 && !IsLoopback(c.Listen) {
		return fmt.Errorf("listen %q is not a loopback address and no auth.tokens are configured: refusing to serve without authentication (set auth.tokens or AGENTD_TOKEN, or listen on 127.0.0.1)", c.Listen)
	}
	return nil
}

// rootOnly refuses the OpenAI-style /v1 (or Ollama's /api) on the base_url
// of a kind whose adapter adds its own: every request would go to
// /v1/v1/messages or /v1/api/chat and be answered 404, and the 404 of the
// model list reads to the Anthropic adapter as a server without one.
func rootOnly(p Provider) error {
	path := strings.TrimRight(p.BaseURL, "/")
	var suffix, adds string
	switch p.Kind {
	case "anthropic":
		suffix, adds = "/v1", "/v1/messages"
	case "ollama":
		adds = "/api/chat"
		for _, s := range []string{"/v1", "/api"} {
			if strings.HasSuffix(path, s) {
				suffix = s
			}
		}
	}
	if suffix == "" || !strings.HasSuffix(path, suffix) {
		return nil
	}
	return fmt.Errorf("base_url %q: kind %s takes the server's root without %s (agentd adds %s): use %s", p.BaseURL, p.Kind, suffix, adds, strings.TrimSuffix(path, suffix))
}

// notNegative refuses a negative limit, timeout or interval: zero takes
// the default, but a negative one would be used as it is (a turn_timeout of
// -1s times out every turn), so the daemon would start and fail each request.
// minusOneAllowed are the numbers whose -1 means none: the whole window,
// no limit.
var minusOneAllowed = map[string]bool{"limits.compact_threshold": true, "limits.ingest_bytes_per_second": true, "limits.memories_per_tenant": true}

func notNegative(c *Config) error {
	check := func(section string, v any) error {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if !rv.Type().Field(i).IsExported() {
				continue // no yaml key, and Interface would panic
			}
			f, key := rv.Field(i), section+"."+strings.Split(rv.Type().Field(i).Tag.Get("yaml"), ",")[0]
			var neg bool
			switch x := f.Interface().(type) {
			case int:
				neg = x < 0 && !(x == -1 && minusOneAllowed[key])
			case int64:
				neg = x < 0 && !(x == -1 && minusOneAllowed[key])
			case float64:
				neg = x < 0
			case Duration:
				neg = x.Duration < 0
			}
			if neg {
				return fmt.Errorf("%s %v: must not be negative (leave it out for the default)", key, f.Interface())
			}
		}
		return nil
	}
	for _, s := range []struct {
		name string
		v    any
	}{{"limits", c.Limits}, {"http", c.HTTP}, {"attachments", c.Attachments}, {"learner", c.Learner}, {"toolsets", c.Toolsets}, {"store", c.Store}} {
		if err := check(s.name, s.v); err != nil {
			return err
		}
	}
	if c.IdleAfter.Duration < 0 {
		return fmt.Errorf("idle_after %v: must not be negative (leave it out for the default 5m)", c.IdleAfter)
	}
	return nil
}

// validateCluster checks the cluster section when it is enabled.
func (c *Config) validateCluster() error {
	cl := c.Cluster
	if !cl.Enabled {
		return nil
	}
	if c.Store.Kind != StorePostgres {
		return fmt.Errorf("cluster.enabled needs store.kind postgres (every node reads and writes one store), not %q", c.Store.Kind)
	}
	if cl.Name == "" || strings.ContainsAny(cl.Name, "/ ") {
		return fmt.Errorf("cluster.name %q: want a non-empty name without '/' or spaces", cl.Name)
	}
	switch cl.Provider {
	case ClusterEtcd:
		if len(cl.EtcdEndpoints) == 0 {
			return errors.New("cluster.etcd_endpoints: provider etcd needs at least one endpoint (or AGENTD_CLUSTER_ETCD_ENDPOINTS)")
		}
		for i, e := range cl.EtcdEndpoints {
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("cluster.etcd_endpoints[%d] %q: want an http:// or https:// URL such as http://127.0.0.1:2379", i, e)
			}
		}
	case ClusterKubernetes:
	default:
		return fmt.Errorf("cluster.provider must be etcd or kubernetes, not %q", cl.Provider)
	}
	host, port, err := net.SplitHostPort(cl.Bind)
	if err != nil {
		return fmt.Errorf("cluster.bind %q: want host:port: %w", cl.Bind, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("cluster.bind %q: port %q is not a port number", cl.Bind, port)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("cluster.bind %q: the other nodes dial this address; name this node's own address, not %q", cl.Bind, host)
	}
	if cl.AdvertiseHTTP == "" {
		if h, _, err := net.SplitHostPort(c.Listen); err != nil || h == "" || net.ParseIP(h).IsUnspecified() {
			return fmt.Errorf("cluster.advertise_http: required when listen %q names no host the other nodes can reach", c.Listen)
		}
		return nil
	}
	if u, err := url.Parse(cl.AdvertiseHTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("cluster.advertise_http %q: want this node's base URL, such as http://10.0.0.5:8420", cl.AdvertiseHTTP)
	}
	return nil
}

// Warnings are what is allowed but probably not meant, for the log at
// start: an api_key_env naming a variable that is not set (requests go
// without a key and the provider refuses them), and a default model its
// provider's models: list does not name (or a provider that does not
// exist). get reads the environment.
func (c *Config) Warnings(get func(string) string) []string {
	var out []string
	for _, p := range c.Providers {
		if p.APIKeyEnv != "" && get(p.APIKeyEnv) == "" {
			out = append(out, fmt.Sprintf("provider %s: api_key_env names %s, which is not set: its requests go without a key", p.Name, p.APIKeyEnv))
		}
	}
	out = append(out, c.tenantsNamedByNoToken()...)
	if c.DefaultModel == "" {
		return out
	}
	pname, model, _ := strings.Cut(c.DefaultModel, "/")
	for _, p := range c.Providers {
		if p.Name != pname {
			continue
		}
		if len(p.Models) == 0 {
			return out // the provider's own list says; nothing to check here
		}
		var ids []string
		for _, m := range p.Models {
			if m.ID == model {
				return out
			}
			ids = append(ids, pname+"/"+m.ID)
		}
		return append(out, fmt.Sprintf("default_model %s is not in provider %s's models: (%s); new chats fail if %s does not serve it", c.DefaultModel, pname, strings.Join(ids, ", "), pname))
	}
	return append(out, fmt.Sprintf("default_model %s names no configured provider %q; new chats that name no model will fail", c.DefaultModel, pname))
}

// DefaultTenant owns every chat when no auth token is configured.
const DefaultTenant = "default"

// tenantsNamedByNoToken warns of each tenants entry that no request can
// be of (a misspelt name): no auth.tokens entry names it, or, with no
// tokens, it is not DefaultTenant. Its instructions and allowed_env would
// apply to no one.
func (c *Config) tenantsNamedByNoToken() []string {
	named := map[string]bool{}
	for _, t := range c.Auth.Tokens {
		named[t.Tenant] = true
	}
	if len(c.Auth.Tokens) == 0 {
		named[DefaultTenant] = true
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		if !named[name] {
			out = append(out, fmt.Sprintf("tenants.%s: no auth.tokens entry is of tenant %q, so its settings apply to no one (a misspelt name?)", name, name))
		}
	}
	return out
}

// IsLoopback reports whether addr (host:port) only listens on loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Tokens resolves auth.tokens from the environment: token → tenant. A
// token_env that is unset is an error, so a typo never opens the door; so is
// one value given to two entries, which would let one tenant in as another.
func (c *Config) Tokens(get func(string) string) (map[string]string, error) {
	out := map[string]string{}
	from := map[string]Token{}
	for _, t := range c.Auth.Tokens {
		v := get(t.TokenEnv)
		if v == "" {
			return nil, fmt.Errorf("auth token for tenant %q: environment variable %s is empty", t.Tenant, t.TokenEnv)
		}
		if first, dup := from[v]; dup {
			return nil, fmt.Errorf("auth tokens: tenant %q (%s) and tenant %q (%s) have the same token; give each entry its own", first.Tenant, first.TokenEnv, t.Tenant, t.TokenEnv)
		}
		from[v] = t
		out[v] = t.Tenant
	}
	return out, nil
}
