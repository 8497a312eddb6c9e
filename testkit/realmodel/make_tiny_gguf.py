#!/usr/bin/env python3
# Origin: written for agentd in the team's shared/realmodel/ folder (2026-12-01), copied here
# unchanged so a fresh clone builds its test model without ../shared. agentd's MIT licence.
"""Make a tiny, deterministic, hand-wired llama-architecture GGUF for protocol tests.

It carries a REAL tokenizer (Qwen2.5's: the Qwen2 BPE vocab from llama.cpp's own
models/ggml-vocab-qwen2.gguf, with Qwen2.5's added tokens such as <tool_call> written
into their real slots) and a REAL chat template with tool support
(models/templates/Qwen-Qwen2.5-7B-Instruct.jinja). No training, no download.

What the "model" does (a bigram table plus two attention heads, no training):
  * plain chat: random multilingual words, then <|im_end|> after ~5-40 tokens
    (finish_reason "stop"); tokens that are not whole UTF-8 and control tokens are
    never produced (llama-server answers 500 on output it cannot parse as UTF-8);
  * when the prompt holds tool definitions (the template writes "<tools>") and no
    tool result yet, it answers with exactly one call, spelled token by token:
        <tool_call>{"name":"get_weather","arguments":{}}</tool_call><|im_end|>
    (the template is Qwen2.5's with the newlines inside <tool_call>...</tool_call> removed).
    With llama-server (grammar-constrained) the grammar
    overrides wherever the request's tools differ: any tool name and schema come out
    valid, JSON strings close at once. Without a grammar (Ollama) the fixed text above
    is what it writes, so Ollama tests must offer a tool named get_weather;
  * once the conversation holds a tool result ("<tool_response>"): plain text again.
  Head 0 looks for the token "tools", head 1 for "_response" (q/k on the slowest RoPE
  pair, so position hardly matters), writing flags into the residual stream.

Usage: PYTHONPATH=<llama.cpp>/gguf-py python3 make_tiny_gguf.py <llama.cpp dir> <out.gguf>
Needs numpy (Debian: python3-numpy). Same inputs -> byte-identical output.
"""
import re
import sys
import numpy as np
from gguf import GGUFReader, GGUFWriter

src, out = sys.argv[1], sys.argv[2]

vocab = GGUFReader(f"{src}/models/ggml-vocab-qwen2.gguf")
f = vocab.fields
tokens = list(f["tokenizer.ggml.tokens"].contents())
ttypes = list(f["tokenizer.ggml.token_type"].contents())
merges = f["tokenizer.ggml.merges"].contents()
template = open(f"{src}/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja").read()
# One change to the real template: no newlines inside <tool_call>...</tool_call>, so that the call
# starts right after the tag (a bigram model cannot tell the reply's first "\n" from a later one).
for old, new in (('<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>',
                  '<tool_call>{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}</tool_call>'),
                 ("'\\n<tool_call>\\n{\"name\": \"'", "'\\n<tool_call>{\"name\": \"'"),
                 ("'}\\n</tool_call>'", "'}</tool_call>'")):
    assert template.count(old) == 1, old
    template = template.replace(old, new)

# Qwen2.5 added tokens (tokenizer.json of Qwen2.5-*-Instruct); the Qwen2 vocab has [PADn] there
ADDED = ["<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
         "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
         "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
         "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
         "<|repo_name|>", "<|file_sep|>"]
for i, t in enumerate(ADDED):
    tokens[151646 + i] = t
    ttypes[151646 + i] = 4 if t in ("<tool_call>", "</tool_call>") else 3  # USER_DEFINED / CONTROL

ENDOFTEXT, IM_END = 151643, 151645
TOOL_CALL, TOOL_CALL_END = 151657, 151658
T_TOOLS, T_RESPONSE, T_NL, T_QUOTE = 15918, 9655, 198, 1
# the spelled call: <tool_call>{"name":"get_weather","arguments":{}}</tool_call>
CHAIN = [TOOL_CALL, 4913, 606, 3252, 455, 69364, 2198, 16370, 788, 6257, 92, TOOL_CALL_END]
PIECES = {T_TOOLS: "tools", T_RESPONSE: "_response", T_NL: "Ċ", T_QUOTE: '"', 4913: '{"', 606: "name",
          3252: '":"', 455: "get", 69364: "_weather", 2198: '","', 16370: "arguments", 788: '":',
          6257: "{}", 92: "}"}
for tid, piece in PIECES.items():
    assert tokens[tid] == piece, (tid, tokens[tid])

# GPT-2 byte-level decoding, to find tokens that are not whole UTF-8 on their own
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
byte_of = {chr(c): b for b, c in zip(bs, cs)}
def raw(i):
    return bytes(byte_of[ch] for ch in tokens[i])

def bad_text(i):
    if ttypes[i] != 1:
        return True
    try:
        s = raw(i).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return True
    return any(ord(ch) < 32 and ch not in "\n\t" for ch in s) or "\ufffd" in s

n_vocab = len(tokens)
n_embd, n_head, n_layer, n_ff = 96, 4, 1, 64
hd = n_embd // n_head          # 24; RoPE pair (22, 23) turns < 0.1 rad over 32k positions
ctx_train = 32768
suppress = np.array([bad_text(i) for i in range(n_vocab)])
suppress[[TOOL_CALL, TOOL_CALL_END]] = True   # only via the rules below

# residual dims: flags, then one "current token is CHAIN[k]" dim per chain step, then noise
D_ONE, D_MK_TOOLS, D_MK_RESP, D_HAS_TOOLS, D_HAS_RESP, D_NL = 0, 1, 2, 3, 4, 5
D_CUR = {tok: 6 + k for k, tok in enumerate(CHAIN)}          # dims 6..17
D_NOISE = 24
rng = np.random.default_rng(20260101)
SIG = 0.13

emb = np.zeros((n_vocab, n_embd), np.float32)
emb[:, D_NOISE:] = rng.standard_normal((n_vocab, n_embd - D_NOISE)) * SIG
emb[:, D_ONE] = 1.0
emb[T_TOOLS, D_MK_TOOLS] = 1.0
emb[T_RESPONSE, D_MK_RESP] = 1.0
emb[T_NL, D_NL] = 1.0
for tok, d in D_CUR.items():
    emb[tok, d] = 1.0

A = 2.0
wq = np.zeros((n_embd, n_embd), np.float32)   # rows: output (head*hd + j), cols: input dim
wk = np.zeros((n_embd, n_embd), np.float32)
wv = np.zeros((n_embd, n_embd), np.float32)
wo = np.zeros((n_embd, n_embd), np.float32)
for h, (mk, flag) in enumerate(((D_MK_TOOLS, D_HAS_TOOLS), (D_MK_RESP, D_HAS_RESP))):
    wq[h * hd + hd - 2, D_ONE] = A
    wk[h * hd + hd - 2, mk] = A
    wv[h * hd + 0, mk] = 1.0
    wo[flag, h * hd + 0] = 0.25

def rmsnorm(x):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)

def forward(ids):
    """numpy reference of llama.cpp's forward pass for this model (the slow RoPE pair ~ fixed)."""
    x = emb[ids].astype(np.float64)
    h = rmsnorm(x)
    q, k, v = h @ wq.T, h @ wk.T, h @ wv.T
    att = np.zeros_like(x)
    T = len(ids)
    for hh in range(n_head):
        sl = slice(hh * hd, (hh + 1) * hd)
        s = q[:, sl] @ k[:, sl].T / np.sqrt(hd)
        s[np.triu_indices(T, 1)] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
        att[:, sl] = p @ v[:, sl]
    x = x + att @ wo.T
    return rmsnorm(x)[-1]

# final hidden state in each situation: (context kind, current token)
base = [int(t) for t in rng.integers(0, 150000, 40)]
T_OTHER = base[5]
def ctx(kind):
    if kind == "plain":
        return base
    if kind == "tools":
        return base[:10] + [T_TOOLS] + base[10:20] + [T_TOOLS] + base[20:]
    return base[:10] + [T_TOOLS] + base[10:20] + [T_TOOLS] + base[20:30] + [T_RESPONSE] + base[30:]
CURS = {"other": T_OTHER, "nl": T_NL, **{f"c{k}": tok for k, tok in enumerate(CHAIN)}}
S = {(kind, cur): forward(ctx(kind) + [tok]) for kind in ("plain", "tools", "resp") for cur, tok in CURS.items()}
ck = {tok: f"c{k}" for k, tok in enumerate(CHAIN)}

# Output rows: the logit of a special/chain token reads a few flag dims, with weights solved
# from a small exact linear system so that it hits these targets (normal tokens score
# ~N(0,1), max ~4.4; llama-server's default min_p 0.05 drops anything 2.4 below the best).
# An AND of "tools due" and "current token" needs a negative base: -35 + 37.5 + 37.5 = 40.
def chain_rule(tok, prev, extra=None, base_t=2.5, hit=40.0):
    dims = [D_ONE, D_HAS_TOOLS, D_HAS_RESP, D_CUR[prev] if prev in D_CUR else D_NL]
    tg = {("plain", "other"): -35.0, ("tools", "other"): base_t, ("resp", "other"): -35.0,
          ("tools", ck.get(prev, "nl")): hit}
    if extra:
        for (prev2, val) in extra:
            dims.append(D_CUR[prev2] if prev2 in D_CUR else D_NL)
            tg[("tools", ck.get(prev2, "nl"))] = val
    return dims, tg

RULES = {
    # <|im_end|>: ~4 in plain text (a few dozen tokens), 2.7 after a tool result, never while a
    # call is due, +40 right after </tool_call>
    IM_END:    ([D_ONE, D_HAS_TOOLS, D_HAS_RESP, D_CUR[TOOL_CALL_END]],
                {("plain", "other"): 4, ("tools", "other"): 10, ("resp", "other"): 2.7,
                 ("tools", f"c{len(CHAIN) - 1}"): 40}),
    # <tool_call>: first token of the reply when tools are due (current token "\n")
    TOOL_CALL: ([D_ONE, D_HAS_TOOLS, D_HAS_RESP, D_NL],
                {("tools", "nl"): 30, ("tools", "other"): -6, ("plain", "nl"): -6, ("resp", "nl"): -40}),
    # '"' strongly preferred while tools are due: JSON strings the grammar demands close at once
    T_QUOTE:   ([D_ONE, D_HAS_TOOLS, D_HAS_RESP], {("plain", "other"): 0, ("tools", "other"): 20, ("resp", "other"): 0}),
    # "\n": not while a call is due
    T_NL:      ([D_ONE, D_HAS_TOOLS, D_HAS_RESP], {("plain", "other"): 0, ("tools", "other"): -20, ("resp", "other"): 0}),
    # </tool_call>: +12 wherever the grammar allows it while a call is due, +40 after "}"
    TOOL_CALL_END: ([D_ONE, D_HAS_TOOLS, D_HAS_RESP, D_CUR[92]],
                    {("plain", "other"): -30, ("tools", "other"): 12, ("resp", "other"): -30, ("tools", ck[92]): 40}),
}
for k in range(1, len(CHAIN) - 1):   # {" name ":" get _weather "," arguments ": {} }
    RULES[CHAIN[k]] = chain_rule(CHAIN[k], CHAIN[k - 1])

WHITESPACE = [i for i in range(n_vocab) if not suppress[i] and i != T_NL and raw(i).strip() == b""]
ANGLE = [i for i in range(n_vocab) if not suppress[i] and ("<" in tokens[i] or ">" in tokens[i])]
MORE = [i for i in range(n_vocab) if not suppress[i] and re.search(rb"\}\s*,", raw(i))]   # "}," = 2nd call
PENALIZED = sorted((set(WHITESPACE) | set(ANGLE) | set(MORE)) - set(RULES))
RULES["penalized"] = ([D_ONE, D_HAS_TOOLS, D_HAS_RESP], {("plain", "other"): 0, ("tools", "other"): -20, ("resp", "other"): 0})

KEEP_RANDOM = {T_QUOTE, T_NL, "penalized"}   # these get a bias on top of their random part
outw = np.zeros((n_vocab, n_embd), np.float32)
h_ref = S[("plain", "other")]
noise_scale = np.sqrt((h_ref[D_NOISE:] ** 2).mean())
outw[:, D_NOISE:] = rng.standard_normal((n_vocab, n_embd - D_NOISE)) / noise_scale / np.sqrt(n_embd - D_NOISE)
outw[suppress, :] = 0.0
outw[suppress, D_ONE] = -30.0 / h_ref[D_ONE]
for tok, (dims, tg) in RULES.items():
    keys = list(tg)
    H = np.array([S[k][dims] for k in keys], np.float64)
    y = np.array([tg[k] for k in keys], np.float64)
    wf = np.linalg.lstsq(H, y, rcond=None)[0] if len(keys) > len(dims) else np.linalg.solve(H, y)
    rows = PENALIZED if tok == "penalized" else [tok]
    for r in rows:
        if tok not in KEEP_RANDOM:
            outw[r, :] = 0.0
        outw[r, dims] = wf

# check: greedy walk of the chain in tools mode, and the margins in plain/tools/resp text
def logits(kind, cur):
    return outw @ S[(kind, cur)]
walk, cur = [], "nl"
for _ in range(len(CHAIN) + 1):
    lg = logits("tools", cur)
    nxt = int(np.argmax(lg))
    walk.append(nxt)
    if nxt == IM_END or nxt not in ck:
        break
    cur = ck[nxt]
print("tools-mode greedy walk:", "".join(raw(t).decode("utf-8", "replace") if t < 151643 else tokens[t] for t in walk if t != IM_END) + ("<|im_end|>" if walk[-1] == IM_END else " (did not end)"))
assert walk == CHAIN + [IM_END], walk
for kind in ("plain", "tools", "resp"):
    for cur in ("other", "nl"):
        lg = logits(kind, cur)
        specials = sorted(RULES.keys() - {"penalized"}, key=lambda t: -lg[t])[:3]
        normal = np.max(np.where(suppress, -1e9, np.where(np.isin(np.arange(n_vocab), [t for t in RULES if isinstance(t, int)]), -1e9, lg)))
        print(f"{kind:5s} cur={cur:5s} im_end={lg[IM_END]:6.1f} tool_call={lg[TOOL_CALL]:6.1f} quote={lg[T_QUOTE]:5.1f} "
              f"top-special={[(tokens[t], round(float(lg[t]), 1)) for t in specials]} normal_max={normal:4.1f}")
print(f"penalized while a call is due: {len(PENALIZED)} tokens; suppressed always: {int(suppress.sum())}")

w = GGUFWriter(out, "llama")
w.add_name("agentd-tiny-wired-qwen25vocab")
w.add_description("hand-wired toy weights, real Qwen2.5 tokenizer + chat template; for protocol tests only")
w.add_context_length(ctx_train)
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head)
w.add_rope_dimension_count(hd)
w.add_rope_freq_base(1000000.0)
w.add_layer_norm_rms_eps(1e-6)
w.add_vocab_size(n_vocab)
w.add_file_type(1)  # mostly F16
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("qwen2")
w.add_token_list(tokens)
w.add_token_types(ttypes)
w.add_token_merges(merges)
w.add_bos_token_id(ENDOFTEXT)
w.add_eos_token_id(IM_END)
w.add_pad_token_id(ENDOFTEXT)
w.add_add_bos_token(False)
w.add_chat_template(template)

w.add_tensor("token_embd.weight", emb.astype(np.float16))
p = "blk.0."
w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
w.add_tensor(p + "attn_q.weight", wq)
w.add_tensor(p + "attn_k.weight", wk)
w.add_tensor(p + "attn_v.weight", wv)
w.add_tensor(p + "attn_output.weight", wo)
w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
w.add_tensor(p + "ffn_gate.weight", np.zeros((n_ff, n_embd), np.float32))
w.add_tensor(p + "ffn_up.weight", np.zeros((n_ff, n_embd), np.float32))
w.add_tensor(p + "ffn_down.weight", np.zeros((n_embd, n_ff), np.float32))
w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
w.add_tensor("output.weight", outw.astype(np.float16))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {out}: vocab={n_vocab} n_embd={n_embd} ctx_train={ctx_train}")
