package ollama

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ollama/ollama/api"
)

const gib = 1 << 30

// Weights on disk from a real /api/tags (testdata/show/SOURCES.md).
const (
	weightsLlama3_8B = 4661224578
	weightsGemma3_4B = 3338801804
	weightsGemma3_1B = 815319791
)

func loadShow(t *testing.T, file string) *api.ShowResponse {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "show", file))
	if err != nil {
		t.Fatal(err)
	}
	var show api.ShowResponse
	if err := json.Unmarshal(b, &show); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &show
}

// TestSizeWindowRealBodies checks SizeWindow against numbers worked by hand
// for three real /api/show bodies of different shapes. Two fifths of memory
// (integer bytes):
//
//	 8 GiB =  8589934592 → 2/5 =  3435973836
//	24 GiB = 25769803776 → 2/5 = 10307921510
//	32 GiB = 34359738368 → 2/5 = 13743895347
//
// The KV room is that minus the weights; tokens = room / KV bytes per token,
// rounded down to a multiple of 8192, at most 65536, at least the floor
// (16384 below 12 GiB, 32768 at or above), at most context_length.
func TestSizeWindowRealBodies(t *testing.T) {
	tests := map[string]struct {
		file    string
		weights uint64
		mem     uint64
		kvPer   uint64
		want    int
	}{
		// llama3 8B: no key/value lengths, so head = 4096/32 = 128 each.
		// KV/token = 32 blocks × 8 kv heads × (128+128) × 2 = 131072.
		// 8 GiB: 3435973836 < 4661224578 weights → room 0 → floor 16384,
		// then the model's own context_length 8192 wins → 8192.
		"llama3 8B at 8 GiB": {"llama3_8b.json", weightsLlama3_8B, 8 * gib, 131072, 8192},
		// 32 GiB: room 13743895347−4661224578 = 9082670769 → /131072 =
		// 69295 → 65536 (8 steps) → cap 65536 → context_length 8192 → 8192.
		"llama3 8B at 32 GiB": {"llama3_8b.json", weightsLlama3_8B, 32 * gib, 131072, 8192},

		// gemma3 4B: KV/token = 34 × 4 × (256+256) × 2 = 139264.
		// 8 GiB: room 3435973836−3338801804 = 97172032 → /139264 = 697 →
		// 0 steps → floor 16384.
		"gemma3 4B at 8 GiB": {"gemma3_4b.json", weightsGemma3_4B, 8 * gib, 139264, 16384},
		// 24 GiB: room 10307921510−3338801804 = 6969119706 → /139264 =
		// 50042 → 6 steps = 49152 (7 would be 57344) → above floor 32768.
		"gemma3 4B at 24 GiB": {"gemma3_4b.json", weightsGemma3_4B, 24 * gib, 139264, 49152},
		// 32 GiB: room 13743895347−3338801804 = 10405093543 → /139264 =
		// 74714 → 9 steps = 73728 → capped at 65536.
		"gemma3 4B at 32 GiB": {"gemma3_4b.json", weightsGemma3_4B, 32 * gib, 139264, 65536},

		// gemma3 1B: one KV head, KV/token = 26 × 1 × (256+256) × 2 = 26624.
		// 8 GiB: room 3435973836−815319791 = 2620654045 → /26624 = 98432 →
		// 12 steps = 98304 → cap 65536 → context_length 32768 → 32768.
		"gemma3 1B at 8 GiB": {"gemma3_1b.json", weightsGemma3_1B, 8 * gib, 26624, 32768},
		// 32 GiB: room 12928575556 → /26624 = 485598 → 65536 → 32768.
		"gemma3 1B at 32 GiB": {"gemma3_1b.json", weightsGemma3_1B, 32 * gib, 26624, 32768},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := ParseShowFacts(loadShow(t, tc.file))
			f.WeightsBytes = tc.weights
			if got := f.KVBytesPerToken(); got != tc.kvPer {
				t.Errorf("KVBytesPerToken = %d, want %d (facts %+v)", got, tc.kvPer, f)
			}
			if got := SizeWindow(f, tc.mem); got != tc.want {
				t.Errorf("SizeWindow = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestParseShowFacts(t *testing.T) {
	f := ParseShowFacts(loadShow(t, "gemma3_4b.json"))
	want := ShowFacts{Arch: "gemma3", ContextLength: 131072, BlockCount: 34, HeadCountKV: 4,
		KeyLength: 256, ValueLength: 256, EmbeddingLength: 2560, HeadCount: 8}
	if f != want {
		t.Errorf("ParseShowFacts = %+v, want %+v", f, want)
	}
}

// TestSizeWindowRules checks each rule on a made-up shape whose KV cost is
// one MiB per token (16 × 16 × (1024+1024) × 2 = 1048576), so the room in
// MiB is the token count.
func TestSizeWindowRules(t *testing.T) {
	mib := uint64(1 << 20)
	shape := ShowFacts{BlockCount: 16, HeadCountKV: 16, KeyLength: 1024, ValueLength: 1024}
	with := func(ctx int, weights uint64) ShowFacts {
		f := shape
		f.ContextLength, f.WeightsBytes = ctx, weights
		return f
	}
	tests := map[string]struct {
		facts ShowFacts
		mem   uint64
		want  int
	}{
		// 2/5 of 112500 MiB = 45000 MiB room → 45000 tokens → 5 steps =
		// 40960 (6 would be 49152), above the 32768 floor.
		"rounds down to a step": {with(0, 0), 112500 * mib, 40960},
		// 2/5 of 20000 MiB = 8000 MiB, less 5000 MiB weights = 3000 tokens
		// → 0 steps; 20000 MiB is above 12 GiB (12288 MiB) → floor 32768.
		"floor at or above 12 GiB": {with(0, 5000*mib), 20000 * mib, 32768},
		// 2/5 of 12288 MiB = 4915 MiB (4915.2) → 0 steps → 12 GiB exactly
		// is "at or above" → 32768.
		"12 GiB exactly takes the big floor":      {with(0, 0), 12 * gib, 32768},
		"just below 12 GiB takes the small floor": {with(0, 0), 12*gib - 1, 16384},
		// 2/5 of 1000000 MiB = 400000 tokens → capped at 65536.
		"never above 64K": {with(0, 0), 1000000 * mib, 65536},
		// The model's own limit beats the floor.
		"context length below the floor": {with(4096, 0), 64 * gib, 4096},
		// context_length that is not a step still caps: 40960 (qwen3-like).
		"context length caps an odd value": {with(40960, 0), 1000000 * mib, 40960},
		// Weights bigger than the budget leave no room: the floor.
		"weights over budget": {with(0, 64*gib), 32 * gib, 32768},
		// Unknown shape: the floor, still capped by context_length.
		"unknown shape":             {ShowFacts{ContextLength: 131072}, 8 * gib, 16384},
		"unknown shape small model": {ShowFacts{ContextLength: 2048}, 8 * gib, 2048},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SizeWindow(tc.facts, tc.mem); got != tc.want {
				t.Errorf("SizeWindow(%+v, %d) = %d, want %d", tc.facts, tc.mem, got, tc.want)
			}
		})
	}
}

func TestKVBytesPerTokenFallbacks(t *testing.T) {
	tests := map[string]struct {
		f    ShowFacts
		want uint64
	}{
		// head = 2048/16 = 128 for both K and V: 24 × 4 × 256 × 2.
		"head size from embedding": {ShowFacts{BlockCount: 24, HeadCountKV: 4, EmbeddingLength: 2048, HeadCount: 16}, 24 * 4 * 256 * 2},
		// No head_count_kv: every head keeps K and V (no GQA): 24 × 16 × 256 × 2.
		"no GQA": {ShowFacts{BlockCount: 24, EmbeddingLength: 2048, HeadCount: 16}, 24 * 16 * 256 * 2},
		// Explicit lengths win over the embedding fallback: 2 × 2 × (64+32) × 2.
		"explicit lengths": {ShowFacts{BlockCount: 2, HeadCountKV: 2, KeyLength: 64, ValueLength: 32, EmbeddingLength: 4096, HeadCount: 8}, 2 * 2 * 96 * 2},
		"no blocks":        {ShowFacts{HeadCountKV: 8, KeyLength: 128, ValueLength: 128}, 0},
		"nothing":          {ShowFacts{}, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.f.KVBytesPerToken(); got != tc.want {
				t.Errorf("KVBytesPerToken = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestIntFieldPerLayerArray(t *testing.T) {
	info := map[string]any{"x.attention.head_count_kv": []any{float64(2), float64(8), float64(4)}}
	if got := intField(info, "x.attention.head_count_kv"); got != 8 {
		t.Errorf("intField(per-layer) = %d, want the largest, 8", got)
	}
}
