// Random-weight GGUF models that llama.cpp can load (`tandem synth`).
#include "model/synthetic_model.h"

#include <algorithm>
#include <atomic>
#include <cstring>
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
    std::vector<float> fixed = {};  // when not empty: these values (f32)
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

// Layer il of the spec: sliding (gemma4, gpt-oss) and its head size and KV heads.
bool is_sliding(const SynthSpec& s, int il) {
    if (s.arch != "gemma4" && s.arch != "gpt-oss") return false;
    return s.swa_period == 0 || il % s.swa_period < s.swa_period - 1;
}
int head_dim_of(const SynthSpec& s, int il) {
    return is_sliding(s, il) && s.head_dim_swa > 0 ? s.head_dim_swa : s.head_dim;
}
int kv_heads_of(const SynthSpec& s, int il) {
    return is_sliding(s, il) && s.n_head_kv_swa > 0 ? s.n_head_kv_swa : s.n_head_kv;
}

// DeepSeek-V2/V3 layers as llama.cpp's converter writes them (MLA split into attn_k_b/attn_v_b).
template <typename Weight, typename Norm, typename Bias>
void plan_deepseek2_layers(const SynthSpec& s, std::vector<TensorPlan>& plan, Weight weight, Norm norm, Bias bias) {
    (void)plan;
    const int64_t E = s.n_embd, H = s.n_head, R = s.head_dim, N = s.qk_nope, Lkv = s.kv_lora_rank;
    const int64_t Lq = s.q_lora_rank, Dv = s.v_head_mla, F = s.n_ff_exp, X = s.n_expert;
    for (int il = 0; il < s.n_layer; ++il) {
        auto layer = [il](std::string_view base, std::string_view kind = "weight") { return tn::layer(il, base, kind); };
        norm(layer(tn::kAttnNorm), E);
        if (Lq > 0) {
            weight(layer(tn::kAttnQA), {E, Lq}, s.attn_type, 1.0 / std::sqrt(E));
            norm(layer(tn::kAttnQANorm), Lq);
            weight(layer(tn::kAttnQB), {Lq, H * (N + R)}, s.attn_type, 1.0 / std::sqrt(Lq));
        } else {
            weight(layer(tn::kAttnQ), {E, H * (N + R)}, s.attn_type, 1.0 / std::sqrt(E));
        }
        weight(layer(tn::kAttnKvAMqa), {E, Lkv + R}, s.attn_type, 1.0 / std::sqrt(E));
        norm(layer(tn::kAttnKvANorm), Lkv);
        weight(layer(tn::kAttnKB), {N, Lkv, H}, s.attn_type, 1.0 / std::sqrt(N));
        weight(layer(tn::kAttnVB), {Lkv, Dv, H}, s.attn_type, 1.0 / std::sqrt(Lkv));
        weight(layer(tn::kAttnOutput), {H * Dv, E}, s.attn_type, 1.0 / std::sqrt(H * Dv));
        norm(layer(tn::kFfnNorm), E);
        if (il < s.n_dense_lead) {
            weight(layer(tn::kFfnGate), {E, s.n_ff}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnUp), {E, s.n_ff}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnDown), {s.n_ff, E}, s.ffn_type, 1.0 / std::sqrt(s.n_ff));
            continue;
        }
        GgmlType gate = s.exp_gate_type, up = s.exp_up_type, down = s.exp_down_type;
        if (!s.layer_exp_types.empty()) gate = up = down = s.layer_exp_types[il % s.layer_exp_types.size()];
        weight(layer(tn::kFfnRouter), {E, X}, s.router_type, 2.0 / std::sqrt(E));
        if (s.expert_bias) bias(layer(tn::kFfnExpProbsB, "bias"), {X}, 0.5);
        weight(layer(tn::kFfnGateExps), {E, F, X}, gate, 1.0 / std::sqrt(E));
        weight(layer(tn::kFfnUpExps), {E, F, X}, up, 1.0 / std::sqrt(E));
        weight(layer(tn::kFfnDownExps), {F, E, X}, down, 1.0 / std::sqrt(F));
        if (s.n_expert_shared > 0) {
            const int64_t S = F * s.n_expert_shared;
            weight(layer(tn::kFfnGateShexp), {E, S}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnUpShexp), {E, S}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnDownShexp), {S, E}, s.ffn_type, 1.0 / std::sqrt(S));
        }
    }
}

// Qwen3.5 layers: gated delta-net and gated full attention, dense or MoE with a gated shared expert.
template <typename Weight, typename Norm, typename Bias, typename Fixed>
void plan_qwen35_layers(const SynthSpec& s, Weight weight, Norm norm, Bias bias, Fixed fixed) {
    const bool moe = s.arch == "qwen35moe";
    const int64_t E = s.n_embd, H = s.n_head, D = s.head_dim, S = s.ssm_state;
    const int64_t Kw = S * s.ssm_k_heads, Vw = S * s.ssm_v_heads, C = 2 * Kw + Vw, Hv = s.ssm_v_heads;
    for (int il = 0; il < s.n_layer; ++il) {
        auto layer = [il](std::string_view base, std::string_view kind = "weight") { return tn::layer(il, base, kind); };
        norm(layer(tn::kAttnNorm), E);
        norm(layer(tn::kAttnPostNorm), E);
        if ((il + 1) % s.full_attn_interval == 0) {
            weight(layer(tn::kAttnQ), {E, 2 * H * D}, s.attn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kAttnK), {E, s.n_head_kv * D}, s.attn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kAttnV), {E, s.n_head_kv * D}, s.attn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kAttnOutput), {H * D, E}, s.attn_type, 1.0 / std::sqrt(H * D));
            norm(layer(tn::kAttnQNorm), D);
            norm(layer(tn::kAttnKNorm), D);
        } else {
            weight(layer(tn::kAttnQkv), {E, C}, s.attn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kAttnGate), {E, Vw}, s.attn_type, 1.0 / std::sqrt(E));
            bias(layer(tn::kSsmConv1d), {s.conv_kernel, C}, 0.5);
            bias(layer(tn::kSsmDt, "bias"), {Hv}, 0.5);
            // A = -exp(A_log): negative decay rates of a few sizes.
            std::vector<float> a(Hv);
            for (int64_t h = 0; h < Hv; ++h) a[h] = -0.2f * static_cast<float>(1 + h % 5);
            fixed("blk." + std::to_string(il) + "." + std::string(tn::kSsmA), a);
            weight(layer(tn::kSsmBeta), {E, Hv}, s.attn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kSsmAlpha), {E, Hv}, s.attn_type, 1.0 / std::sqrt(E));
            norm(layer(tn::kSsmNorm), S);
            weight(layer(tn::kSsmOut), {Vw, E}, s.attn_type, 1.0 / std::sqrt(Vw));
        }
        if (!moe) {
            weight(layer(tn::kFfnGate), {E, s.n_ff}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnUp), {E, s.n_ff}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnDown), {s.n_ff, E}, s.ffn_type, 1.0 / std::sqrt(s.n_ff));
            continue;
        }
        const int64_t F = s.n_ff_exp, X = s.n_expert, SF = s.n_ff_shexp;
        GgmlType gate = s.exp_gate_type, up = s.exp_up_type, down = s.exp_down_type;
        if (!s.layer_exp_types.empty()) gate = up = down = s.layer_exp_types[il % s.layer_exp_types.size()];
        weight(layer(tn::kFfnRouter), {E, X}, s.router_type, 2.0 / std::sqrt(E));
        weight(layer(tn::kFfnGateExps), {E, F, X}, gate, 1.0 / std::sqrt(E));
        weight(layer(tn::kFfnUpExps), {E, F, X}, up, 1.0 / std::sqrt(E));
        weight(layer(tn::kFfnDownExps), {F, E, X}, down, 1.0 / std::sqrt(F));
        weight(layer(tn::kFfnGateInpShexp), {E}, s.router_type, 2.0 / std::sqrt(E));
        weight(layer(tn::kFfnGateShexp), {E, SF}, s.ffn_type, 1.0 / std::sqrt(E));
        weight(layer(tn::kFfnUpShexp), {E, SF}, s.ffn_type, 1.0 / std::sqrt(E));
        weight(layer(tn::kFfnDownShexp), {SF, E}, s.ffn_type, 1.0 / std::sqrt(SF));
    }
}

std::vector<TensorPlan> plan_tensors(const SynthSpec& s, int n_vocab) {
    const int64_t E = s.n_embd;
    const bool gemma = s.arch == "gemma4", oss = s.arch == "gpt-oss";
    const bool moe = is_moe_arch(s.arch) || (gemma && s.n_expert > 0);
    const bool qk_norm = s.arch == "qwen3moe" || s.arch == "qwen3" || gemma;
    std::vector<TensorPlan> plan;
    auto weight = [&](std::string name, std::vector<int64_t> ne, GgmlType type, double std) {
        plan.push_back({std::move(name), std::move(ne), type, static_cast<float>(std), false});
    };
    auto norm = [&](std::string name, int64_t n) {
        plan.push_back({std::move(name), {n}, GgmlType::kF32, 0.1f, true});
    };
    auto bias = [&](std::string name, std::vector<int64_t> ne, double std) {
        plan.push_back({std::move(name), std::move(ne), GgmlType::kF32, static_cast<float>(std), false});
    };
    weight(tn::global(tn::kTokenEmbd), {E, n_vocab}, s.embd_type, 1.0);
    const int64_t P = gemma ? s.n_embd_per_layer : 0, L = s.n_layer;
    if (P > 0) {
        weight(tn::global(tn::kPerLayerTokenEmbd), {P * L, n_vocab}, s.embd_type, 1.0);
        weight(tn::global(tn::kPerLayerModelProj), {E, P * L}, s.attn_type, 1.0 / std::sqrt(E));
        norm(tn::global(tn::kPerLayerProjNorm), P);
    }
    bool any_full = false;
    for (int il = 0; il < s.n_layer; ++il) any_full = any_full || !is_sliding(s, il);
    if (gemma && any_full) {
        // Proportional rope of the full layers (llama.cpp requires the tensor): the first pairs
        // rotate, the others not (1e30).
        const int pairs = s.head_dim / 2, rotated = static_cast<int>(pairs * s.rope_partial);
        std::vector<float> f(pairs, 1e30f);
        std::fill(f.begin(), f.begin() + rotated, 1.0f);
        plan.push_back({tn::global(tn::kRopeFreqs), {pairs}, GgmlType::kF32, 0.0f, false, f});
    }
    const int kv_from = s.n_layer - (gemma ? s.shared_kv_layers : 0);
    if (s.arch == "qwen35" || s.arch == "qwen35moe") {
        auto fixed = [&](std::string name, std::vector<float> values) {
            plan.push_back({std::move(name), {static_cast<int64_t>(values.size())}, GgmlType::kF32, 0.0f, false, values});
        };
        plan_qwen35_layers(s, weight, norm, bias, fixed);
        norm(tn::global(tn::kOutputNorm), E);
        if (!s.tied_output) weight(tn::global(tn::kOutput), {E, n_vocab}, s.out_type, 4.0 / std::sqrt(E));
        for (const TensorPlan& t : plan) check_row(t);
        return plan;
    }
    if (s.arch == "deepseek2") {
        plan_deepseek2_layers(s, plan, weight, norm, bias);
        norm(tn::global(tn::kOutputNorm), E);
        if (!s.tied_output) weight(tn::global(tn::kOutput), {E, n_vocab}, s.out_type, 4.0 / std::sqrt(E));
        for (const TensorPlan& t : plan) check_row(t);
        return plan;
    }
    for (int il = 0; il < s.n_layer; ++il) {
        const int64_t D = head_dim_of(s, il), Q = int64_t{s.n_head} * D, KV = int64_t{kv_heads_of(s, il)} * D;
        const bool own_kv = il < kv_from;
        auto layer = [il](std::string_view base, std::string_view kind = "weight") { return tn::layer(il, base, kind); };
        norm(layer(tn::kAttnNorm), E);
        weight(layer(tn::kAttnQ), {E, Q}, s.attn_type, 1.0 / std::sqrt(E));
        if (own_kv) weight(layer(tn::kAttnK), {E, KV}, s.attn_type, 1.0 / std::sqrt(E));
        if (own_kv && !(gemma && s.values_are_keys && !is_sliding(s, il))) {
            weight(layer(tn::kAttnV), {E, KV}, s.attn_type, 1.0 / std::sqrt(E));
        }
        weight(layer(tn::kAttnOutput), {Q, E}, s.attn_type, 1.0 / std::sqrt(Q));
        if (oss) {
            bias(layer(tn::kAttnQ, "bias"), {Q}, 0.1);
            bias(layer(tn::kAttnK, "bias"), {KV}, 0.1);
            bias(layer(tn::kAttnV, "bias"), {KV}, 0.1);
            bias(layer(tn::kAttnOutput, "bias"), {E}, 0.1);
            bias(layer(tn::kAttnSinks), {s.n_head}, 1.0);
        }
        if (qk_norm) {
            norm(layer(tn::kAttnQNorm), D);
            if (own_kv) norm(layer(tn::kAttnKNorm), D);
        }
        if (gemma) norm(layer(tn::kAttnPostNorm), E);
        norm(layer(oss ? tn::kAttnPostNorm : tn::kFfnNorm), E);
        if (gemma) norm(layer(tn::kFfnPostNorm), E);
        if (!moe || gemma) {
            const int64_t F = s.n_ff;
            weight(layer(tn::kFfnGate), {E, F}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnUp), {E, F}, s.ffn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kFfnDown), {F, E}, s.ffn_type, 1.0 / std::sqrt(F));
        }
        if (moe) {
            const int64_t F = s.n_ff_exp, X = s.n_expert;
            GgmlType gate = s.exp_gate_type, up = s.exp_up_type, down = s.exp_down_type;
            if (!s.layer_exp_types.empty()) {
                gate = up = down = s.layer_exp_types[il % s.layer_exp_types.size()];
            }
            weight(layer(tn::kFfnRouter), {E, X}, s.router_type, gemma ? 8.0 / std::sqrt(E) : 2.0 / std::sqrt(E));
            if (oss) bias(layer(tn::kFfnRouter, "bias"), {X}, 0.5);
            if (gemma) {
                norm(layer(tn::kFfnRouter, "scale"), E);
                norm(layer(tn::kFfnPreNorm2), E);
                norm(layer(tn::kFfnPostNorm1), E);
                norm(layer(tn::kFfnPostNorm2), E);
            }
            if (s.gate_up_fused) {
                weight(layer(tn::kFfnGateUpExps), {E, 2 * F, X}, gate, 1.0 / std::sqrt(E));
            } else {
                weight(layer(tn::kFfnGateExps), {E, F, X}, gate, 1.0 / std::sqrt(E));
                weight(layer(tn::kFfnUpExps), {E, F, X}, up, 1.0 / std::sqrt(E));
            }
            weight(layer(tn::kFfnDownExps), {F, E, X}, down, 1.0 / std::sqrt(F));
            if (oss) {
                bias(layer(tn::kFfnGateExps, "bias"), {F, X}, 0.1);
                bias(layer(tn::kFfnUpExps, "bias"), {F, X}, 0.1);
                bias(layer(tn::kFfnDownExps, "bias"), {E, X}, 0.1);
            }
            if (gemma && s.expert_scale) norm(layer(tn::kFfnDownExps, "scale"), X);
        }
        if (P > 0) {
            weight(layer(tn::kPerLayerInpGate), {E, P}, s.attn_type, 1.0 / std::sqrt(E));
            weight(layer(tn::kPerLayerProj), {P, E}, s.attn_type, 1.0 / std::sqrt(P));
            norm(layer(tn::kPerLayerPostNorm), E);
        }
        if (gemma && s.layer_out_scale) norm(layer(tn::kLayerOutScale), 1);
    }
    norm(tn::global(tn::kOutputNorm), E);
    if (!s.tied_output) weight(tn::global(tn::kOutput), {E, n_vocab}, s.out_type, 4.0 / std::sqrt(E));
    for (const TensorPlan& t : plan) check_row(t);
    return plan;
}

void validate(const SynthSpec& s) {
    if (s.arch != "qwen3moe" && s.arch != "qwen3" && s.arch != "llama" && s.arch != "gemma4" && s.arch != "gpt-oss" &&
        s.arch != "deepseek2" && s.arch != "qwen35" && s.arch != "qwen35moe") {
        fail("synth: unknown architecture '{}' (qwen3moe, qwen3, llama, gemma4, gpt-oss, deepseek2, qwen35 or qwen35moe)",
             s.arch);
    }
    if (s.arch == "qwen35" || s.arch == "qwen35moe") {
        if (s.ssm_state <= 0 || s.ssm_k_heads <= 0 || s.ssm_v_heads <= 0 || s.ssm_v_heads % s.ssm_k_heads != 0 ||
            s.conv_kernel <= 0 || s.full_attn_interval <= 0) {
            fail("synth: --ssm-state, --ssm-k-heads, --ssm-v-heads (a multiple of the k heads), --conv-kernel and "
                 "--full-attn-interval must be positive");
        }
        if (s.rope_sections.size() != 4) fail("synth: --rope-sections needs 4 values");
        const int rope = s.rope_dims > 0 ? s.rope_dims : s.head_dim / 4;
        if (rope % 2 != 0 || rope > s.head_dim) fail("synth: --rope-dims {} must be even and at most --head-dim", rope);
    }
    if (s.arch == "deepseek2") {
        if (s.kv_lora_rank <= 0 || s.qk_nope <= 0 || s.v_head_mla <= 0 || s.q_lora_rank < 0) {
            fail("synth: --kv-lora-rank, --qk-nope and --v-head-mla must be positive, --q-lora-rank not negative");
        }
        if (s.q_lora_rank == 0 && s.n_layer != 26 && s.n_layer != 27) {
            fail("synth: deepseek2 without --q-lora-rank is a lite model, which llama.cpp knows by 26 or 27 layers");
        }
        if (s.n_dense_lead < 0 || s.n_dense_lead >= s.n_layer) {
            fail("synth: --dense-lead {} must leave at least one MoE layer of {}", s.n_dense_lead, s.n_layer);
        }
        if (s.n_expert_groups > 1 && (s.n_expert % s.n_expert_groups != 0 || s.n_group_used <= 0 ||
                                      s.n_group_used >= s.n_expert_groups)) {
            fail("synth: --expert-groups {} / --groups-used {} do not divide {} experts", s.n_expert_groups,
                 s.n_group_used, s.n_expert);
        }
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
    if (is_moe_arch(s.arch) || (s.arch == "gemma4" && s.n_expert > 0)) {
        positive(s.n_expert, "--experts");
        positive(s.n_ff_exp, "--expert-ffn");
        if (s.n_expert_used <= 0 || s.n_expert_used > s.n_expert) {
            fail("synth: --experts-used {} must be in 1..{}", s.n_expert_used, s.n_expert);
        }
    } else {
        positive(s.n_ff, "--ffn");
    }
    if (s.arch == "gpt-oss" && s.tied_output) fail("synth: gpt-oss needs output.weight (no --tied)");
    if (s.arch == "gemma4" || s.arch == "gpt-oss") {
        if (s.sliding_window <= 0) fail("synth: --sliding-window must be positive, got {}", s.sliding_window);
        if (s.swa_period < 0) fail("synth: --swa-period must not be negative, got {}", s.swa_period);
    }
    if (s.arch == "gemma4") {
        if (s.head_dim_swa < 0 || s.n_head_kv_swa < 0 || s.n_embd_per_layer < 0) {
            fail("synth: --head-dim-swa, --kv-heads-swa and --per-layer-embd must not be negative");
        }
        if (s.head_dim_swa % 2 != 0) fail("synth: --head-dim-swa {} must be even", s.head_dim_swa);
        if (s.n_head_kv_swa > 0 && s.n_head % s.n_head_kv_swa != 0) {
            fail("synth: --heads {} is not a multiple of --kv-heads-swa {}", s.n_head, s.n_head_kv_swa);
        }
        if (!(s.rope_partial > 0.0f && s.rope_partial <= 1.0f)) fail("synth: --rope-partial must be in (0, 1]");
        if (s.shared_kv_layers < 0 || (s.shared_kv_layers > 0 && s.n_layer - s.shared_kv_layers < 2)) {
            fail("synth: --shared-kv-layers {} must leave at least 2 layers with a KV cache", s.shared_kv_layers);
        }
        // llama.cpp (layer_reuse_cb) has the shared layers read the caches of layers kv_from - 2
        // (sliding) and kv_from - 1 (full), and needs both kinds of layer.
        const int kv_from = s.n_layer - s.shared_kv_layers;
        if (s.shared_kv_layers > 0 && (!is_sliding(s, kv_from - 2) || is_sliding(s, kv_from - 1))) {
            fail("synth: --shared-kv-layers {}: layer {} must slide and layer {} be full", s.shared_kv_layers,
                 kv_from - 2, kv_from - 1);
        }
        bool sliding = false, full = false;
        for (int il = 0; il < s.n_layer; ++il) (is_sliding(s, il) ? sliding : full) = true;
        if (!sliding || !full) fail("synth: gemma4 needs sliding and full layers (llama.cpp asserts both)");
        positive(s.n_ff, "--ffn");
    }
}

// Fills one tensor's bytes: rows are generated in chunks with their own random stream, so the
// result does not depend on the number of threads.
void fill_tensor(const TensorPlan& t, const SynthSpec& spec, ThreadPool& pool, uint8_t* dst) {
    const FormatTraits& f = format_of(t.type);
    if (!t.fixed.empty()) {
        std::memcpy(dst, t.fixed.data(), t.fixed.size() * sizeof(float));
        return;
    }
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

bool is_moe_arch(const std::string& arch) {
    return arch == "qwen3moe" || arch == "gpt-oss" || arch == "deepseek2" || arch == "qwen35moe";
}

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
    if (a == "deepseek2") {
        u32("attention.head_count_kv", 1);
    } else if (a == "gemma4" && spec.n_head_kv_swa > 0 && spec.n_head_kv_swa != spec.n_head_kv) {
        std::vector<int32_t> kv(spec.n_layer);
        for (int il = 0; il < spec.n_layer; ++il) kv[il] = kv_heads_of(spec, il);
        w.set_array<int32_t>(a + ".attention.head_count_kv", kv);
    } else {
        u32("attention.head_count_kv", spec.n_head_kv);
    }
    if (a == "deepseek2") {
        u32("attention.key_length", spec.kv_lora_rank + spec.head_dim);
        u32("attention.value_length", spec.kv_lora_rank);
        u32("attention.key_length_mla", spec.qk_nope + spec.head_dim);
        u32("attention.value_length_mla", spec.v_head_mla);
        u32("rope.dimension_count", spec.head_dim);
        if (spec.q_lora_rank > 0) u32("attention.q_lora_rank", spec.q_lora_rank);
        u32("attention.kv_lora_rank", spec.kv_lora_rank);
        u32("leading_dense_block_count", spec.n_dense_lead);
        u32("expert_shared_count", spec.n_expert_shared);
        u32("expert_gating_func", spec.sigmoid_gating ? 2 : 1);
        w.set<bool>(a + ".expert_weights_norm", spec.expert_weights_norm);
        w.set<float>(a + ".expert_weights_scale", spec.expert_weights_scale);
        if (spec.n_expert_groups > 1) {
            u32("expert_group_count", spec.n_expert_groups);
            u32("expert_group_used_count", spec.n_group_used);
        }
        if (spec.yarn_log_mul > 0.0f) w.set<float>(a + ".rope.scaling.yarn_log_multiplier", spec.yarn_log_mul);
    } else {
        u32("attention.key_length", spec.head_dim);
        u32("attention.value_length", spec.head_dim);
    }
    u32("vocab_size", n_vocab);
    if (a == "gemma4") {
        u32("feed_forward_length", spec.n_ff);
        if (spec.n_expert > 0) {
            u32("expert_feed_forward_length", spec.n_ff_exp);
            u32("expert_count", spec.n_expert);
            u32("expert_used_count", spec.n_expert_used);
        }
    } else if (a == "qwen35moe") {
        u32("feed_forward_length", spec.n_ff);
        u32("expert_feed_forward_length", spec.n_ff_exp);
        u32("expert_shared_feed_forward_length", spec.n_ff_shexp);
        u32("expert_count", spec.n_expert);
        u32("expert_used_count", spec.n_expert_used);
    } else if (a == "deepseek2") {
        u32("feed_forward_length", spec.n_ff);
        u32("expert_feed_forward_length", spec.n_ff_exp);
        u32("expert_count", spec.n_expert);
        u32("expert_used_count", spec.n_expert_used);
    } else if (is_moe_arch(a)) {
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
    if (a == "gemma4" || a == "gpt-oss") u32("attention.sliding_window", spec.sliding_window);
    if (a == "qwen35" || a == "qwen35moe") {
        u32("rope.dimension_count", spec.rope_dims > 0 ? spec.rope_dims : spec.head_dim / 4);
        w.set_array<int32_t>(a + ".rope.dimension_sections",
                             std::vector<int32_t>(spec.rope_sections.begin(), spec.rope_sections.end()));
        u32("ssm.conv_kernel", spec.conv_kernel);
        u32("ssm.inner_size", int64_t{spec.ssm_state} * spec.ssm_v_heads);
        u32("ssm.state_size", spec.ssm_state);
        u32("ssm.time_step_rank", spec.ssm_v_heads);
        u32("ssm.group_count", spec.ssm_k_heads);
        u32("full_attention_interval", spec.full_attn_interval);
    }
    if (a == "gpt-oss" && spec.swa_period != 2) u32("attention.sliding_window_pattern", spec.swa_period);
    if (a == "gemma4") {
        std::vector<bool> pattern(spec.n_layer);
        for (int il = 0; il < spec.n_layer; ++il) pattern[il] = is_sliding(spec, il);
        w.set_array(a + ".attention.sliding_window_pattern", pattern);
        const int dh_swa = spec.head_dim_swa > 0 ? spec.head_dim_swa : spec.head_dim;
        u32("attention.key_length_swa", dh_swa);
        u32("attention.value_length_swa", dh_swa);
        u32("rope.dimension_count", spec.head_dim);
        u32("rope.dimension_count_swa", dh_swa);
        w.set<float>(a + ".rope.freq_base_swa", spec.rope_base_swa);
        u32("attention.shared_kv_layers", spec.shared_kv_layers);
        u32("embedding_length_per_layer_input", spec.n_embd_per_layer);
        if (spec.final_softcap > 0.0f) w.set<float>(a + ".final_logit_softcapping", spec.final_softcap);
    }
    if (spec.yarn_factor > 0.0f) {
        w.set_string(a + ".rope.scaling.type", "yarn");
        w.set<float>(a + ".rope.scaling.factor", spec.yarn_factor);
        u32("rope.scaling.original_context_length", spec.yarn_orig_ctx > 0 ? spec.yarn_orig_ctx : spec.n_ctx);
    }

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
