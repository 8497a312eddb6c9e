package ollama

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ollama/ollama/api"
)

// Sizing constants (seed 0086 §1, issue 3 point 3).
const (
	windowStep    = 8192     // num_ctx grows in steps of 8K
	windowCeiling = 65536    // never ask for more than 64K
	floorSmall    = 16384    // the least we ask for below bigMemory
	floorBig      = 32768    // the least we ask for at or above bigMemory
	bigMemory     = 12 << 30 // 12 GiB: where the floor moves from 16K to 32K
	kvBytesF16    = 2        // Ollama's default KV cache type is f16
)

// ShowFacts is what sizing needs from /api/show model_info (and the weights'
// size from /api/tags). Zero means "not reported".
type ShowFacts struct {
	Arch            string
	ContextLength   int // <arch>.context_length: the most the model reads
	BlockCount      int // <arch>.block_count
	HeadCountKV     int // <arch>.attention.head_count_kv
	KeyLength       int // <arch>.attention.key_length
	ValueLength     int // <arch>.attention.value_length
	EmbeddingLength int // <arch>.embedding_length, for the head size fallback
	HeadCount       int // <arch>.attention.head_count, for the head size fallback
	WeightsBytes    uint64
}

// KVBytesPerToken is the f16 KV cache one token of context costs:
// block_count × head_count_kv × (key_length + value_length) × 2 bytes. When a
// model does not state its key and value lengths, both are the head size,
// embedding_length / head_count (how llama.cpp derives them). When it does not
// state head_count_kv, the model has no grouped-query attention and every head
// keeps its own K and V. It is 0 when the shape is unknown.
func (f ShowFacts) KVBytesPerToken() uint64 {
	kv := f.HeadCountKV
	if kv == 0 {
		kv = f.HeadCount
	}
	k, v := f.KeyLength, f.ValueLength
	if (k == 0 || v == 0) && f.HeadCount > 0 && f.EmbeddingLength > 0 {
		head := f.EmbeddingLength / f.HeadCount
		if k == 0 {
			k = head
		}
		if v == 0 {
			v = head
		}
	}
	if f.BlockCount <= 0 || kv <= 0 || k <= 0 || v <= 0 {
		return 0
	}
	return uint64(f.BlockCount) * uint64(kv) * uint64(k+v) * kvBytesF16
}

// SizeWindow is the num_ctx agentd asks Ollama for: as many tokens as fit in
// two fifths of memBytes once the weights are loaded (weights plus KV cache
// within 2/5 of memory, so the machine keeps room for everything else), in
// steps of 8K, at most 64K; never less than 16K below 12 GiB of memory or 32K
// at or above it; and never more than the model's own context_length, which
// wins over the floor. A model whose shape is unknown gets the floor.
func SizeWindow(f ShowFacts, memBytes uint64) int {
	floor := floorSmall
	if memBytes >= bigMemory {
		floor = floorBig
	}
	n := floor
	if per := f.KVBytesPerToken(); per > 0 {
		// floor(2m/5) without overflow: m = 5q + r, so 2m/5 = 2q + 2r/5.
		budget := memBytes/5*2 + memBytes%5*2/5
		var room uint64
		if budget > f.WeightsBytes {
			room = budget - f.WeightsBytes
		}
		fit := room / per / windowStep * windowStep
		if fit > windowCeiling {
			fit = windowCeiling
		}
		if int(fit) > n {
			n = int(fit)
		}
	}
	if f.ContextLength > 0 && n > f.ContextLength {
		n = f.ContextLength
	}
	return n
}

// ParseShowFacts reads the sizing facts from an /api/show answer. The weights'
// size is not in it; the caller adds it from /api/tags.
func ParseShowFacts(show *api.ShowResponse) ShowFacts {
	info := show.ModelInfo
	arch, _ := info["general.architecture"].(string)
	if arch == "" {
		arch = show.Details.Family
	}
	get := func(key string) int { return intField(info, arch+"."+key) }
	return ShowFacts{
		Arch:            arch,
		ContextLength:   get("context_length"),
		BlockCount:      get("block_count"),
		HeadCountKV:     get("attention.head_count_kv"),
		KeyLength:       get("attention.key_length"),
		ValueLength:     get("attention.value_length"),
		EmbeddingLength: get("embedding_length"),
		HeadCount:       get("attention.head_count"),
	}
}

// intField reads a model_info number. JSON numbers arrive as float64; some
// architectures give a per-layer array (head_count_kv for gemma3n, hybrid
// models), for which the largest entry is the safe (bigger cache) reading.
func intField(info map[string]any, key string) int {
	switch v := info[key].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	case string:
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(v), &n); err == nil {
			return n
		}
	case []any:
		most := 0
		for _, e := range v {
			if f, ok := e.(float64); ok && int(f) > most {
				most = int(f)
			}
		}
		return most
	}
	return 0
}
