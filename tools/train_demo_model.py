#!/usr/bin/python3
"""Trains the demo model (models/kjv-moe.gguf) from scratch and writes it as an f32 GGUF file.

The corpus is the King James Bible as Debian's bible-kjv-text ships it (read through the `bible`
program of bible-kjv). Every 20th chapter is held out and never trained on. The script trains a
byte-level BPE vocabulary on the training chapters, then a small qwen3moe model (4 layers,
embedding 256, 8 experts of which 2 run per token), prints the loss curve and the held-out
perplexity (scored as `tandem perplexity` scores it: windows of --ctx tokens side by side, the
second half of each window), and writes:

  OUT.gguf          the model in f32 with its tokenizer and chat template (tools/make_demo_model.sh
                    quantizes it with `tandem quantize`)
  HELDOUT.txt       the held-out chapters as plain text

Needs Debian's python3-torch (and nothing from PyPI); runs on one CPU thread. Fixed seeds: the
same arguments give the same model on the same machine (floating-point reductions may differ
between CPUs, so the perplexity may move in its last digits).
"""
import argparse
import collections
import json
import math
import os
import re
import struct
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread, like torch.set_num_threads(1)
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Corpus


def read_kjv(bible_cmd):
    """Returns the chapters in order, each a list of verse texts. `bible -f` prints one verse a
    line, preceded by its reference (e.g. 'Ge1:1 In the beginning ...')."""
    out = subprocess.run([bible_cmd, "-f", "gen1:1-rev22:21"], check=True, capture_output=True).stdout
    text = out.decode("ascii")
    chapters, current_key = [], None
    ref = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = ref.match(line)
        if not m:
            sys.exit(f"train_demo_model: bible output line {n}: no verse reference in {line[:40]!r}")
        key = (m.group(1), m.group(2))
        if key != current_key:
            chapters.append([])
            current_key = key
        chapters[-1].append(m.group(4).strip())
    return chapters


def chapter_text(verses):
    return "\n".join(verses) + "\n"


# ---------------------------------------------------------------------------------------------
# Byte-level BPE


def byte_to_unicode():
    """GPT-2's map from bytes to printable characters: printable Latin-1 bytes map to themselves,
    the others to code points from 256 up, in byte order."""
    printable = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


# The "qwen2" pre-tokenizer of llama.cpp and Tandem (src/text/pre_tokenizer_table.cpp) written for
# ASCII text, where \p{L} is [A-Za-z] and \p{N} is [0-9] (the corpus is checked to be ASCII):
# contractions, letters with one leading non-letter, single digits, punctuation runs with their
# newlines, newline runs, spaces.
PRE_TOKENIZER = re.compile(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    r"|[^\r\nA-Za-z0-9]?[A-Za-z]+"
    r"|[0-9]"
    r"| ?[^\sA-Za-z0-9]+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)


def pre_tokenize(text):
    if not text.isascii():
        sys.exit("train_demo_model: the corpus has non-ASCII text; the pre-tokenizer here is ASCII only")
    return PRE_TOKENIZER.findall(text)


def train_bpe(chunk_counts, n_merges, b2u):
    """Learns `n_merges` merges from {chunk: count}: each step merges the most frequent adjacent
    pair (ties: the greater pair as strings, so the result is deterministic). Pair counts are
    updated only in the words the merge touches."""
    words = [[b2u[b] for b in chunk.encode("ascii")] for chunk in chunk_counts]
    freqs = list(chunk_counts.values())
    pair_count = collections.Counter()
    pair_where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += freqs[i]
            pair_where[(a, b)].add(i)
    merges = []
    for _ in range(n_merges):
        if not pair_count:
            break
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        merged = best[0] + best[1]
        for i in list(pair_where[best]):
            w, f = words[i], freqs[i]
            for a, b in zip(w, w[1:]):
                pair_count[(a, b)] -= f
                if pair_count[(a, b)] <= 0:
                    del pair_count[(a, b)]
                pair_where[(a, b)].discard(i)
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == best[0] and w[j + 1] == best[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] += f
                pair_where[(a, b)].add(i)
        pair_where.pop(best, None)
    return merges


class BpeEncoder:
    """Encodes text as llama.cpp's and Tandem's byte-level BPE do: pre-tokenize, map bytes, then
    in each chunk merge the lowest-ranked adjacent pair (leftmost first) until none is left."""

    def __init__(self, tokens, merges, b2u):
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.rank = {m: r for r, m in enumerate(merges)}
        self.b2u = b2u
        self.cache = {}

    def encode_chunk(self, chunk):
        hit = self.cache.get(chunk)
        if hit is not None:
            return hit
        sym = [self.b2u[b] for b in chunk.encode("ascii")]
        while len(sym) > 1:
            ranks = [self.rank.get((a, b), math.inf) for a, b in zip(sym, sym[1:])]
            r = min(ranks)
            if r == math.inf:
                break
            j = ranks.index(r)
            sym[j : j + 2] = [sym[j] + sym[j + 1]]
        ids = [self.ids[s] for s in sym]
        self.cache[chunk] = ids
        return ids

    def encode(self, text):
        out = []
        for chunk in pre_tokenize(text):
            out.extend(self.encode_chunk(chunk))
        return out


# ---------------------------------------------------------------------------------------------
# The model: qwen3moe as llama.cpp computes it (RMS norms, QK-norm, NEOX rope, grouped-query
# attention, a softmax router whose top-k weights are renormalised, SiLU-GLU experts).


class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_tables(n_ctx, head_dim, base):
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(n_ctx, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope_neox(x, cos, sin):
    # x: [B, H, T, D]; NEOX pairs element i with element i + D/2.
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Qwen3Moe(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        E, H, K, D, X, Fx, V = c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_expert, c.n_ff_exp, c.n_vocab
        P = torch.nn.Parameter
        self.token_embd = P(torch.randn(V, E) * 0.02)
        self.layers = torch.nn.ModuleList()
        for _ in range(c.n_layer):
            layer = torch.nn.Module()
            layer.attn_norm = P(torch.ones(E))
            layer.attn_q = P(torch.randn(H * D, E) * 0.02)
            layer.attn_k = P(torch.randn(K * D, E) * 0.02)
            layer.attn_v = P(torch.randn(K * D, E) * 0.02)
            layer.attn_output = P(torch.randn(E, H * D) * 0.02 / math.sqrt(2 * c.n_layer))
            layer.attn_q_norm = P(torch.ones(D))
            layer.attn_k_norm = P(torch.ones(D))
            layer.ffn_norm = P(torch.ones(E))
            layer.ffn_gate_inp = P(torch.randn(X, E) * 0.02)
            layer.ffn_gate_exps = P(torch.randn(X, Fx, E) * 0.02)
            layer.ffn_up_exps = P(torch.randn(X, Fx, E) * 0.02)
            layer.ffn_down_exps = P(torch.randn(X, E, Fx) * 0.02 / math.sqrt(2 * c.n_layer))
            self.layers.append(layer)
        self.output_norm = P(torch.ones(E))
        self.output = P(torch.randn(V, E) * 0.02)
        cos, sin = rope_tables(c.n_ctx, D, c.rope_base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def moe(self, layer, h):
        # h: [N, E]. Returns the experts' weighted sum and the load-balancing loss.
        c = self.c
        probs = torch.softmax(h @ layer.ffn_gate_inp.t(), dim=-1)  # [N, X]
        w, idx = probs.topk(c.n_expert_used, dim=-1)  # [N, k]
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(h)
        for e in range(c.n_expert):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            x = h[rows]
            y = F.silu(x @ layer.ffn_gate_exps[e].t()) * (x @ layer.ffn_up_exps[e].t())
            y = y @ layer.ffn_down_exps[e].t()
            out.index_add_(0, rows, y * w[rows, slot].unsqueeze(-1))
        # Switch-transformer balance loss: n_expert · Σ_e (share of routes to e) · (mean prob of e).
        share = torch.zeros(c.n_expert).index_add_(0, idx.reshape(-1), torch.ones(idx.numel())) / idx.numel()
        balance = c.n_expert * (share * probs.mean(0)).sum()
        return out, balance

    def forward(self, tokens):
        c = self.c
        B, T = tokens.shape
        H, K, D = c.n_head, c.n_head_kv, c.head_dim
        x = self.token_embd[tokens]  # [B, T, E]
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.full((T, T), float("-inf")).triu(1)
        balance = 0.0
        for layer in self.layers:
            h = rms_norm(x, layer.attn_norm, c.rms_eps)
            q = (h @ layer.attn_q.t()).view(B, T, H, D)
            k = (h @ layer.attn_k.t()).view(B, T, K, D)
            v = (h @ layer.attn_v.t()).view(B, T, K, D)
            q = rope_neox(rms_norm(q, layer.attn_q_norm, c.rms_eps).transpose(1, 2), cos, sin)
            k = rope_neox(rms_norm(k, layer.attn_k_norm, c.rms_eps).transpose(1, 2), cos, sin)
            v = v.transpose(1, 2)
            k = k.repeat_interleave(H // K, dim=1)  # query head j reads KV head j / (H / K)
            v = v.repeat_interleave(H // K, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, dim=-1)
            a = (att @ v).transpose(1, 2).reshape(B, T, H * D)
            x = x + a @ layer.attn_output.t()
            h = rms_norm(x, layer.ffn_norm, c.rms_eps).reshape(B * T, -1)
            y, bal = self.moe(layer, h)
            x = x + y.view(B, T, -1)
            balance = balance + bal
        x = rms_norm(x, self.output_norm, c.rms_eps)
        return x @ self.output.t(), balance / c.n_layer


# ---------------------------------------------------------------------------------------------
# GGUF (version 3) writer for the f32 export


GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9
ALIGN = 32


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, value):
    if kind == GGUF_U32:
        return struct.pack("<I", value)
    if kind == GGUF_F32:
        return struct.pack("<f", value)
    if kind == GGUF_BOOL:
        return struct.pack("<B", 1 if value else 0)
    if kind == GGUF_STRING:
        return gguf_string(value)
    raise ValueError(kind)


def write_gguf(path, kvs, tensors):
    """kvs: [(key, kind, value)] where an array is (key, GGUF_ARRAY, (elem_kind, values));
    tensors: [(name, float32 tensor)] written as F32 with ne = the tensor's shape reversed."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, kind, value in kvs:
        out += gguf_string(key) + struct.pack("<I", kind)
        if kind == GGUF_ARRAY:
            elem, values = value
            out += struct.pack("<IQ", elem, len(values))
            if elem == GGUF_I32:
                out += struct.pack(f"<{len(values)}i", *values)
            else:
                for v in values:
                    out += gguf_value(elem, v)
        else:
            out += gguf_value(kind, value)
    blobs, offset = [], 0
    for name, t in tensors:
        data = t.detach().contiguous().float().numpy().tobytes()
        ne = list(reversed(t.shape))
        out += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", 0, offset)  # type 0 = F32
        blobs.append(data)
        offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
    out += b"\0" * (-len(out) % ALIGN)
    for data in blobs:
        out += data + b"\0" * (-len(data) % ALIGN)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, path)


# A plain-text chat template: the messages' texts one after another, each ending a line, so the
# model (which knows only scripture) continues from the user's words. System prompts are left out.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] != 'system' -%}{{ message['content'] + '\\n' }}{%- endif -%}"
    "{%- endfor -%}"
)


def export(path, model, c, tokens, merges):
    a = "qwen3moe"
    kvs = [
        ("general.architecture", GGUF_STRING, a),
        ("general.name", GGUF_STRING, "kjv-moe"),
        ("general.license", GGUF_STRING, "public-domain"),
        ("general.description", GGUF_STRING,
         "A small qwen3moe trained from scratch by tools/train_demo_model.py on the King James Bible"),
        (f"{a}.context_length", GGUF_U32, c.n_ctx),
        (f"{a}.embedding_length", GGUF_U32, c.n_embd),
        (f"{a}.block_count", GGUF_U32, c.n_layer),
        (f"{a}.feed_forward_length", GGUF_U32, c.n_ff_exp * c.n_expert_used),
        (f"{a}.expert_feed_forward_length", GGUF_U32, c.n_ff_exp),
        (f"{a}.expert_count", GGUF_U32, c.n_expert),
        (f"{a}.expert_used_count", GGUF_U32, c.n_expert_used),
        (f"{a}.attention.head_count", GGUF_U32, c.n_head),
        (f"{a}.attention.head_count_kv", GGUF_U32, c.n_head_kv),
        (f"{a}.attention.key_length", GGUF_U32, c.head_dim),
        (f"{a}.attention.value_length", GGUF_U32, c.head_dim),
        (f"{a}.attention.layer_norm_rms_epsilon", GGUF_F32, c.rms_eps),
        (f"{a}.rope.freq_base", GGUF_F32, c.rope_base),
        (f"{a}.vocab_size", GGUF_U32, c.n_vocab),
        ("general.file_type", GGUF_U32, 0),  # all F32
        ("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
        ("tokenizer.ggml.pre", GGUF_STRING, "qwen2"),
        ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
        ("tokenizer.ggml.token_type", GGUF_ARRAY,
         (GGUF_I32, [3 if t.startswith("<|") and t.endswith("|>") else 1 for t in tokens])),
        ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, [f"{x} {y}" for x, y in merges])),
        ("tokenizer.ggml.bos_token_id", GGUF_U32, c.eos_id),
        ("tokenizer.ggml.eos_token_id", GGUF_U32, c.eos_id),
        ("tokenizer.ggml.eot_token_id", GGUF_U32, c.eos_id),
        ("tokenizer.ggml.padding_token_id", GGUF_U32, c.eos_id),
        ("tokenizer.ggml.add_bos_token", GGUF_BOOL, False),
        ("tokenizer.chat_template", GGUF_STRING, CHAT_TEMPLATE),
    ]
    tensors = [("token_embd.weight", model.token_embd)]
    for i, layer in enumerate(model.layers):
        for name in ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
                     "attn_k_norm", "ffn_norm", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps",
                     "ffn_down_exps"]:
            tensors.append((f"blk.{i}.{name}.weight", getattr(layer, name)))
    tensors += [("output_norm.weight", model.output_norm), ("output.weight", model.output)]
    write_gguf(path, kvs, tensors)


# ---------------------------------------------------------------------------------------------
# Training and evaluation


@torch.no_grad()
def heldout_perplexity(model, ids, n_ctx, max_windows=0):
    """As `tandem perplexity --ctx n_ctx`: windows side by side; in each, the predictions of
    tokens n_ctx/2+1 .. n_ctx-1 are scored."""
    model.eval()
    first = n_ctx // 2 + 1
    n_windows = len(ids) // n_ctx
    if max_windows:
        n_windows = min(n_windows, max_windows)
    nll_sum, n = 0.0, 0
    for k in range(n_windows):
        w = torch.tensor(ids[k * n_ctx : (k + 1) * n_ctx]).unsqueeze(0)
        logits, _ = model(w)
        logp = torch.log_softmax(logits[0, first - 1 : n_ctx - 1].double(), dim=-1)
        nll_sum -= logp.gather(1, w[0, first:].unsqueeze(1)).sum().item()
        n += n_ctx - first
    model.train()
    return math.exp(nll_sum / n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the f32 GGUF to write")
    ap.add_argument("--heldout", required=True, help="where to write the held-out chapters")
    ap.add_argument("--bible", default="bible", help="the bible-kjv program")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--summary", help="write the figures as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t_start = time.time()

    chapters = read_kjv(args.bible)
    train_ch = [ch for i, ch in enumerate(chapters) if i % 20 != 19]
    held_ch = [ch for i, ch in enumerate(chapters) if i % 20 == 19]
    held_text = "\n".join(chapter_text(ch) for ch in held_ch)
    with open(args.heldout, "w", encoding="ascii") as f:
        f.write(held_text)
    print(f"corpus: {len(chapters)} chapters, {sum(map(len, chapters))} verses; "
          f"{len(held_ch)} chapters ({len(held_text)} bytes) held out")

    b2u = byte_to_unicode()
    counts = collections.Counter()
    for ch in train_ch:
        counts.update(pre_tokenize(chapter_text(ch)))
    specials = ["<|endoftext|>"]
    merges = train_bpe(counts, args.vocab - 256 - len(specials), b2u)
    tokens = [b2u[b] for b in range(256)] + [a + b for a, b in merges] + specials
    if len(set(tokens)) != len(tokens):
        sys.exit("train_demo_model: duplicate tokens in the vocabulary")
    enc = BpeEncoder(tokens, merges, b2u)
    eos = tokens.index("<|endoftext|>")
    train_ids = []
    for ch in train_ch:
        train_ids += enc.encode(chapter_text(ch)) + [eos]
    held_ids = enc.encode(held_text)
    print(f"tokenizer: {len(tokens)} tokens ({len(merges)} merges) in {time.time() - t_start:.0f} s; "
          f"{len(train_ids)} training tokens, {len(held_ids)} held-out tokens")

    c = Config(n_vocab=len(tokens), n_embd=256, n_layer=4, n_head=4, n_head_kv=2, head_dim=64,
               n_expert=8, n_expert_used=2, n_ff_exp=256, n_ctx=args.ctx, rms_eps=1e-6,
               rope_base=10000.0, eos_id=eos)
    model = Qwen3Moe(c)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: qwen3moe, {n_params / 1e6:.2f} M parameters")
    random_ppl = heldout_perplexity(model, held_ids, args.ctx, max_windows=8)
    print(f"untrained: held-out perplexity {random_ppl:.1f} (first 8 windows)")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 20)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        t = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    data = torch.tensor(train_ids)
    gen = torch.Generator().manual_seed(args.seed)
    curve = []
    t_train = time.time()
    running = None
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - args.ctx - 1, (args.batch,), generator=gen)
        batch = torch.stack([data[s : s + args.ctx + 1] for s in starts.tolist()])
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        logits, balance = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, c.n_vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        (loss + 0.01 * balance).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = loss.item() if running is None else 0.9 * running + 0.1 * loss.item()
        if (step + 1) % args.log_every == 0 or step == 0:
            el = time.time() - t_train
            tok_s = (step + 1) * args.batch * args.ctx / el
            print(f"step {step + 1:5d}  loss {running:.3f}  lr {lr_at(step):.2e}  balance {balance.item():.3f}  "
                  f"{tok_s:.0f} tok/s  {el / 60:.1f} min", flush=True)
            curve.append((step + 1, round(running, 4)))
    train_s = time.time() - t_train

    ppl = heldout_perplexity(model, held_ids, args.ctx)
    print(f"trained {args.steps} steps ({args.steps * args.batch * args.ctx} tokens) in {train_s / 60:.1f} min")
    print(f"held-out perplexity (ctx {args.ctx}, {len(held_ids) // args.ctx} windows): {ppl:.3f}")
    export(args.out, model, c, tokens, merges)
    print(f"wrote {args.out}")
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump({"params": n_params, "steps": args.steps, "batch": args.batch, "ctx": args.ctx,
                       "train_tokens": len(train_ids), "heldout_tokens": len(held_ids),
                       "train_minutes": round(train_s / 60, 1), "heldout_ppl": round(ppl, 3),
                       "untrained_ppl_8_windows": round(random_ppl, 1), "loss_curve": curve}, f, indent=1)


if __name__ == "__main__":
    main()
