// Random-weight GGUF models that llama.cpp can load (`tandem synth`).
#include "model/synthetic_model.h"

#include <atomic>
#include <cmath>
#include <map>
#include <set>

#include "base/error.h"
#include "base/thread_pool.h"
#include "formats/format_table.h"
#include "gguf/gguf_writer.h"
#include "model/tensor_names.h"

namespace tandem {
namespace {

namespace tn = tensor_names;

// llama.cpp token types (llama_token_type in GGUF's tokenizer.ggml.token_type).
constexpr int32_t kTokenNormal = 1;
constexpr int32_t kTokenControl = 3;

constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";

// SplitMix64: a tiny, good-enough generator whose streams are cheap to derive from a seed.
struct SplitMix {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform() { return static_cast<float>((next() >> 40) + 0.5) * (1.0f / 16777216.0f); }
    // Standard normal by Box-Muller; two per call would be faster, one keeps it simple.
    float normal() {
        float u1 = uniform(), u2 = uniform();
        return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    }
};

uint64_t hash_string(uint64_t seed, const std::string& s) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

// GPT-2's byte -> printable-unicode map used by byte-level BPE vocabularies.
std::vector<std::string> byte_to_unicode_table() {
    std::vector<std::string> table(256);
    auto utf8 = [](uint32_t cp) {
        std::string s;
        if (cp < 0x80) {
            s += static_cast<char>(cp);
        } else {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        return s;
    };
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        table[b] = utf8(printable ? b : 256 + extra++);
    }
    return table;
}

struct Vocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    uint32_t eos = 0, im_start = 0, im_end = 0;
};

// 256 byte tokens, merged tokens spelling common English words, then control tokens.
Vocab make_vocab(int n_vocab) {
    static const char* const kWords[] = {
        " the", " and", " of", " to", " in", " is", " that", " it", " for", " with", " as", " was",
        " on", " be", " at", " by", " this", " have", " from", " or", " one", " had", " not",
        " but", " what", " all", " were", " when", " we", " there", " can", " an", " your",
        " which", " their", " said", " if", " do", " will", " each", " about", " how", " up",
        " out", " them", " then", " she", " many", " some", " so", " these", " would", " other",
        " into", " has", " more", " her", " two", " like", " him", " see", " time", " could",
        " no", " make", " than", " first", " been", " its", " who", " now", " people", " my",
        " over", " down", " only", " way", " find", " use", " may", " water", " long", " little",
        " very", " after", " words", " called", " just", " where", " most", " know", "ing", "ed",
        "er", "es", "ly", "Hello", " world", " model", " token", " expert", " layer", " The",
        " I", " You", " It", " A", "\n\n", "  ", "    ", " 0", " 1", " 2", "00", "ation", "ment"};
    const std::vector<std::string> bytes = byte_to_unicode_table();
    Vocab v;
    v.tokens = bytes;
    v.types.assign(256, kTokenNormal);
    const int n_special = 3;
    if (n_vocab < 256 + n_special) fail("synth: n_vocab {} is below 259 (256 bytes + 3 control tokens)", n_vocab);
    std::set<std::string> known(bytes.begin(), bytes.end());
    const size_t max_regular = static_cast<size_t>(n_vocab - n_special);
    for (const char* word : kWords) {
        std::string w(word);
        std::string cur = bytes[static_cast<unsigned char>(w[0])];
        for (size_t i = 1; i < w.size() && v.tokens.size() < max_regular; ++i) {
            const std::string& next = bytes[static_cast<unsigned char>(w[i])];
            std::string merged = cur + next;
            if (known.insert(merged).second) {
                v.merges.push_back(cur + " " + next);
                v.tokens.push_back(merged);
                v.types.push_back(kTokenNormal);
            }
            cur = merged;
        }
    }
    // Pad with unused extra control tokens, then the three that chat and stop logic need.
    while (v.tokens.size() < max_regular) {
        v.tokens.push_back("<|extra_" + std::to_string(v.tokens.size()) + "|>");
        v.types.push_back(kTokenControl);
    }
    v.im_start = static_cast<uint32_t>(v.tokens.size());
    v.tokens.push_back("<|im_start|>");
    v.im_end = static_cast<uint32_t>(v.tokens.size());
    v.tokens.push_back("<|im_end|>");
    v.eos = static_cast<uint32_t>(v.tokens.size());
    v.tokens.push_back("<|endoftext|>");
    v.types.insert(v.types.end(), n_special, kTokenControl);
    return v;
}

struct TensorPlan {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
    float std;    // weights: N(0, std); norms: 1 + N(0, 0.1)
    bool is_norm;
};

void check_row(const TensorPlan& t) {
    const FormatTraits& f = format_of(t.type);
    if (f.kind != FormatKind::kFloat && f.kind != FormatKind::kQuantized) {
        fail("synth: tensor {}: type {} cannot hold weights", t.name, f.name);
    }
    if (t.ne[0] % f.block_size != 0) {
        fail("synth: tensor {}: row length {} is not a multiple of the {} block size {}", t.name,
             t.ne[0], f.name, f.block_size);
    }
}

std::vector<TensorPlan> plan_tensors(const SynthSpec& s, int n_vocab) {
    const int64_t E = s.n_embd, D = s.head_dim, Q = int64_t{s.n_head} * D, KV = int64_t{s.n_head_kv} * D;
    const bool moe = is_moe_arch(s.arch);
    const bool qk_norm = s.arch == "qwen3moe" || s.arch == "qwen3";
    std::vector<TensorPlan> plan;
    auto weight = [&](std::string name, std::vector<int64_t> ne, GgmlType type, double std) {
        plan.push_back({std::move(name), std::move(ne), type, static_cast<float>(std), false});
    };
    auto norm = [&](std::string name, int64_t n) {
        plan.push_back({std::move(name), {n}, GgmlType::kF32, 0.1f, true});
    };
    weight(tn::global(tn::kTokenEmbd), {E, n_vocab}, s.embd_type, 1.0);
    for (int il = 0; il < s.n_layer; ++il) {
        norm(tn::layer(il, tn::kAttnNorm), E);
        weight(tn::layer(il, tn::kAttnQ), {E, Q}, s.attn_type, 1.0 / std::sqrt(E));
        weight(tn::layer(il, tn::kAttnK), {E, KV}, s.attn_type, 1.0 / std::sqrt(E));
        weight(tn::layer(il, tn::kAttnV), {E, KV}, s.attn_type, 1.0 / std::sqrt(E));
        weight(tn::layer(il, tn::kAttnOutput), {Q, E}, s.attn_type, 1.0 / std::sqrt(Q));
        if (qk_norm) {
            norm(tn::layer(il, tn::kAttnQNorm), D);
            norm(tn::layer(il, tn::kAttnKNorm), D);
        }
        norm(tn::layer(il, tn::kFfnNorm), E);
        if (moe) {
            const int64_t F = s.n_ff_exp, X = s.n_expert;
            GgmlType gate = s.exp_gate_type, up = s.exp_up_type, down = s.exp_down_type;
            if (!s.layer_exp_types.empty()) {
                gate = up = down = s.layer_exp_types[il % s.layer_exp_types.size()];
            }
            weight(tn::layer(il, tn::kFfnRouter), {E, X}, s.router_type, 2.0 / std::sqrt(E));
            weight(tn::layer(il, tn::kFfnGateExps), {E, F, X}, gate, 1.0 / std::sqrt(E));
            weight(tn::layer(il, tn::kFfnUpExps), {E, F, X}, up, 1.0 / std::sqrt(E));
            weight(tn::layer(il, tn::kFfnDownExps), {F, E, X}, down, 1.0 / std::sqrt(F));
        } else {
            const int64_t F = s.n_ff;
            weight(tn::layer(il, tn::kFfnGate), {E, F}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(tn::layer(il, tn::kFfnUp), {E, F}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(tn::layer(il, tn::kFfnDown), {F, E}, s.ffn_type, 1.0 / std::sqrt(F));
        }
    }
    norm(tn::global(tn::kOutputNorm), E);
    if (!s.tied_output) weight(tn::global(tn::kOutput), {E, n_vocab}, s.out_type, 4.0 / std::sqrt(E));
    for (const TensorPlan& t : plan) check_row(t);
    return plan;
}

void validate(const SynthSpec& s) {
    if (s.arch != "qwen3moe" && s.arch != "qwen3" && s.arch != "llama") {
        fail("synth: unknown architecture '{}' (qwen3moe, qwen3 or llama)", s.arch);
    }
    auto positive = [](int v, const char* what) {
        if (v <= 0) fail("synth: {} must be positive, got {}", what, v);
    };
    positive(s.n_layer, "--layers");
    positive(s.n_embd, "--embd");
    positive(s.n_head, "--heads");
    positive(s.n_head_kv, "--kv-heads");
    positive(s.head_dim, "--head-dim");
    positive(s.n_ctx, "--ctx");
    if (s.head_dim % 2 != 0) fail("synth: --head-dim {} must be even (rope rotates pairs)", s.head_dim);
    if (s.n_head % s.n_head_kv != 0) {
        fail("synth: --heads {} is not a multiple of --kv-heads {}", s.n_head, s.n_head_kv);
    }
    if (is_moe_arch(s.arch)) {
        positive(s.n_expert, "--experts");
        positive(s.n_ff_exp, "--expert-ffn");
        if (s.n_expert_used <= 0 || s.n_expert_used > s.n_expert) {
            fail("synth: --experts-used {} must be in 1..{}", s.n_expert_used, s.n_expert);
        }
    } else {
        positive(s.n_ff, "--ffn");
    }
}

// Fills one tensor's bytes: rows are generated in chunks with their own random stream, so the
// result does not depend on the number of threads.
void fill_tensor(const TensorPlan& t, const SynthSpec& spec, ThreadPool& pool, uint8_t* dst) {
    const FormatTraits& f = format_of(t.type);
    const int64_t row_len = t.ne[0];
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    const size_t rb = row_bytes(f, row_len);
    const uint64_t tensor_seed = hash_string(spec.seed, t.name);
    const bool random_blocks = f.kind == FormatKind::kQuantized &&
                               (spec.fast_random || f.quantize_row == nullptr);
    const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 16) / row_len);
    const int64_t n_chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    pool.parallel_for(n_chunks, 1, [&](int64_t c0, int64_t c1, int) {
        std::vector<float> values;
        for (int64_t c = c0; c < c1; ++c) {
            SplitMix rng{tensor_seed ^ (static_cast<uint64_t>(c) * 0xD6E8FEB86659FD93ull)};
            int64_t r0 = c * rows_per_chunk, r1 = std::min(rows, r0 + rows_per_chunk);
            uint8_t* out = dst + static_cast<size_t>(r0) * rb;
            if (random_blocks) {
                f.random_blocks(out, (r1 - r0) * row_len / f.block_size, rng.next(), t.std);
                continue;
            }
            values.resize(static_cast<size_t>((r1 - r0) * row_len));
            for (float& v : values) v = t.is_norm ? 1.0f + t.std * rng.normal() : t.std * rng.normal();
            for (int64_t r = r0; r < r1; ++r) {
                f.quantize_row(values.data() + (r - r0) * row_len, out + (r - r0) * rb, row_len);
            }
        }
    });
}

}  // namespace

bool is_moe_arch(const std::string& arch) { return arch == "qwen3moe"; }

std::vector<std::string> write_synthetic_model(const SynthSpec& spec, const std::string& path,
                                               const GgufSplitLayout& split) {
    validate(spec);
    Vocab vocab = make_vocab(spec.n_vocab);
    const int n_vocab = static_cast<int>(vocab.tokens.size());
    std::vector<TensorPlan> plan = plan_tensors(spec, n_vocab);

    GgufWriter w;
    const std::string a = spec.arch;
    w.set_string("general.architecture", a);
    w.set_string("general.name", spec.name.empty() ? "tandem-synthetic-" + a : spec.name);
    auto u32 = [&](const std::string& key, int64_t v) { w.set<uint32_t>(a + "." + key, static_cast<uint32_t>(v)); };
    u32("context_length", spec.n_ctx);
    u32("embedding_length", spec.n_embd);
    u32("block_count", spec.n_layer);
    u32("attention.head_count", spec.n_head);
    u32("attention.head_count_kv", spec.n_head_kv);
    u32("attention.key_length", spec.head_dim);
    u32("attention.value_length", spec.head_dim);
    u32("vocab_size", n_vocab);
    if (is_moe_arch(a)) {
        u32("feed_forward_length", int64_t{spec.n_ff_exp} * spec.n_expert_used);
        u32("expert_feed_forward_length", spec.n_ff_exp);
        u32("expert_count", spec.n_expert);
        u32("expert_used_count", spec.n_expert_used);
    } else {
        u32("feed_forward_length", spec.n_ff);
    }
    if (a == "llama") u32("rope.dimension_count", spec.head_dim);
    w.set<float>(a + ".attention.layer_norm_rms_epsilon", spec.rms_eps);
    w.set<float>(a + ".rope.freq_base", spec.rope_base);

    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
    w.set_array<int32_t>("tokenizer.ggml.token_type", vocab.types);
    w.set_string_array("tokenizer.ggml.merges", vocab.merges);
    w.set<uint32_t>("tokenizer.ggml.bos_token_id", vocab.eos);
    w.set<uint32_t>("tokenizer.ggml.eos_token_id", vocab.eos);
    w.set<uint32_t>("tokenizer.ggml.eot_token_id", vocab.im_end);
    w.set<bool>("tokenizer.ggml.add_bos_token", false);
    w.set_string("tokenizer.chat_template", kChatMlTemplate);

    auto pool = std::make_shared<ThreadPool>(spec.threads);
    for (const TensorPlan& t : plan) {
        w.add_tensor(t.name, t.type, t.ne,
                     [t, &spec, pool](uint8_t* dst, size_t) { fill_tensor(t, spec, *pool, dst); });
    }
    return write_gguf_parts(w, path, split);
}

}  // namespace tandem
