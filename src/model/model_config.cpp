// Hyperparameters of a decoder model, read from GGUF keys as llama.cpp reads them
// (llama_model_base::load_hparams for the common keys, then the architecture's hook).
#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/arch_keys.h"
#include "model/architectures.h"

namespace tandem {
namespace {

constexpr int64_t kMaxDim = 1 << 20;

void read_rope(ArchKeys& k, const ArchitectureTraits& traits, ModelConfig& c) {
    const std::string& path = k.file().path();
    RopeParams& r = c.rope;
    r.type = traits.rope_type;
    r.n_dims = static_cast<int>(k.find_int("rope.dimension_count", 2, 65536).value_or(c.head_dim_k));
    if (r.n_dims % 2 != 0 || r.n_dims > c.head_dim_k) {
        fail("{}: {} = {} must be even and at most the head dimension {}", path, k.key("rope.dimension_count"),
             r.n_dims, c.head_dim_k);
    }
    if (traits.rope_dim_must_equal_head_dim && r.n_dims != c.head_dim_k) {
        fail("{}: {} = {} must equal the head dimension {} for {}", path, k.key("rope.dimension_count"), r.n_dims,
             c.head_dim_k, c.arch);
    }
    r.freq_base = static_cast<float>(k.find_float("rope.freq_base").value_or(10000.0));
    if (!(r.freq_base > 0.0f)) fail("{}: {} must be positive", path, k.key("rope.freq_base"));
    const std::string scaling = k.find_string("rope.scaling.type").value_or("linear");
    std::optional<double> factor = k.find_float("rope.scaling.factor");
    if (!factor) factor = k.find_float("rope.scale_linear");
    if (factor.value_or(0.0) < 0.0) fail("{}: {} = {} is negative", path, k.key("rope.scaling.factor"), *factor);
    r.freq_scale = factor.value_or(0.0) == 0.0 ? 1.0f : static_cast<float>(1.0 / *factor);
    if (scaling == "none") {
        r.freq_scale = 1.0f;
    } else if (scaling == "yarn") {
        r.ext_factor = 1.0f;
    } else if (scaling != "linear") {
        fail("{}: {} = '{}' is not supported (none, linear or yarn)", path, k.key("rope.scaling.type"), scaling);
    }
    r.attn_factor = static_cast<float>(k.find_float("rope.scaling.attn_factor").value_or(1.0));
    r.n_ctx_orig =
        static_cast<int>(k.find_int("rope.scaling.original_context_length", 1, INT32_MAX).value_or(c.n_ctx_train));
    r.beta_fast = static_cast<float>(k.find_float("rope.scaling.yarn_beta_fast").value_or(32.0));
    r.beta_slow = static_cast<float>(k.find_float("rope.scaling.yarn_beta_slow").value_or(1.0));
    // Written by the converter, read by no llama.cpp v0.4.0 graph.
    k.accept("rope.scaling.finetuned");
    k.accept("rope.scaling.yarn_ext_factor");
    k.accept("rope.scaling.yarn_attn_factor");
    // rope.scaling.yarn_log_multiplier: read by the architectures whose graph applies it.
}

void read_experts(ArchKeys& k, const ArchitectureTraits& traits, ModelConfig& c,
                  const std::vector<int64_t>& n_ff) {
    const std::string& path = k.file().path();
    c.n_expert = static_cast<int>(k.find_int("expert_count", 0, 4096).value_or(0));
    c.n_expert_used = static_cast<int>(k.find_int("expert_used_count", 0, 4096).value_or(0));
    if (traits.experts == ExpertPresence::kNone && c.n_expert > 0) {
        fail("{}: architecture {} has no experts but {} = {}", path, c.arch, k.key("expert_count"), c.n_expert);
    }
    if (traits.experts == ExpertPresence::kRequired && c.n_expert == 0) {
        fail("{}: missing metadata key '{}' ({} needs experts)", path, k.key("expert_count"), c.arch);
    }
    if (c.n_expert == 0) {
        for (LayerConfig& L : c.layers) {
            if (L.n_ff <= 0) fail("{}: missing metadata key '{}'", path, k.key("feed_forward_length"));
        }
        return;
    }
    if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
        fail("{}: {} = {} must be in 1..{}", path, k.key("expert_used_count"), c.n_expert_used, c.n_expert);
    }
    const std::vector<int64_t> ff_exp = k.per_layer("expert_feed_forward_length", c.n_layer, 0, kMaxDim, 0);
    for (int il = 0; il < c.n_layer; ++il) {
        LayerConfig& L = c.layers[il];
        L.moe = true;
        L.dense_ffn = false;
        L.n_ff_exp = static_cast<int>(ff_exp[il]);
        if (L.n_ff_exp == 0) L.n_ff_exp = static_cast<int>(n_ff[il] / c.n_expert_used);  // llama.cpp's fallback
        if (L.n_ff_exp == 0) fail("{}: missing metadata key '{}'", path, k.key("expert_feed_forward_length"));
    }
    c.expert_weights_norm = traits.expert_weights_norm;
    // expert_weights_scale is read only by the architectures whose llama.cpp graph applies it
    // (their hooks); llama, qwen3moe, gemma4 and gpt-oss use 1 whatever the file says.
    k.accept("expert_weights_scale");
    // Group-limited routing, as build_moe_ffn applies it for any architecture.
    c.n_expert_groups = static_cast<int>(k.find_int("expert_group_count", 0, c.n_expert).value_or(0));
    c.n_group_used = static_cast<int>(k.find_int("expert_group_used_count", 0, c.n_expert).value_or(0));
    if (c.n_expert_groups > 1) {
        if (c.n_expert % c.n_expert_groups != 0 || c.n_group_used <= 0 || c.n_group_used >= c.n_expert_groups) {
            fail("{}: {} experts in {} groups of which {} are used: not a valid grouping", path, c.n_expert,
                 c.n_expert_groups, c.n_group_used);
        }
        if (c.n_expert / c.n_expert_groups < 2) fail("{}: groups of one expert are not supported", path);
    }
}

// Widest values over the layers, for buffer sizes, and the checks every layer must pass.
void finish_layers(const std::string& path, ModelConfig& c) {
    c.n_head = c.n_head_kv = c.head_dim_k = c.head_dim_v = c.n_ff = c.n_ff_exp = 0;
    for (int il = 0; il < c.n_layer; ++il) {
        LayerConfig& L = c.layers[il];
        if (L.n_head_kv <= 0 || L.n_head % L.n_head_kv != 0) {
            fail("{}: layer {}: the head count {} is not a multiple of the KV head count {}", path, il, L.n_head,
                 L.n_head_kv);
        }
        if (L.head_dim_k <= 0 || L.head_dim_v <= 0) fail("{}: layer {}: head dimension is 0", path, il);
        if (L.rope.n_dims % 2 != 0 || L.rope.n_dims > L.head_dim_k) {
            fail("{}: layer {}: {} rotated dimensions must be even and at most the head dimension {}", path, il,
                 L.rope.n_dims, L.head_dim_k);
        }
        if (L.attention == AttentionKind::kSliding && L.window <= 0) {
            fail("{}: layer {}: sliding window of {} positions", path, il, L.window);
        }
        if (L.kv_layer < 0 || L.kv_layer > il) fail("{}: layer {}: KV cache of layer {}", path, il, L.kv_layer);
        const LayerConfig& src = c.layers[L.kv_layer];
        if (src.n_head_kv != L.n_head_kv || src.head_dim_k != L.head_dim_k || src.head_dim_v != L.head_dim_v ||
            src.kv_layer != L.kv_layer || src.attention != L.attention || src.window != L.window ||
            src.values_in_keys != L.values_in_keys) {
            fail("{}: layer {} reads the KV cache of layer {}, whose shape differs", path, il, L.kv_layer);
        }
        if (L.attn_scale == 0.0f) L.attn_scale = 1.0f / std::sqrt(static_cast<float>(L.head_dim_k));
        if (L.dense_ffn && L.n_ff <= 0) fail("{}: layer {}: dense FFN of width {}", path, il, L.n_ff);
        if (L.values_in_keys && L.head_dim_v > L.head_dim_k) {
            fail("{}: layer {}: values of {} dims cannot be the first of keys of {}", path, il, L.head_dim_v,
                 L.head_dim_k);
        }
        c.n_head = std::max(c.n_head, L.n_head);
        c.n_head_kv = std::max(c.n_head_kv, L.n_head_kv);
        c.head_dim_k = std::max(c.head_dim_k, L.head_dim_k);
        c.head_dim_v = std::max(c.head_dim_v, L.head_dim_v);
        if (L.dense_ffn) c.n_ff = std::max(c.n_ff, L.n_ff);
        c.n_ff = std::max(c.n_ff, L.n_ff_shexp);  // the shared expert runs through the dense FFN's buffers
        if (L.moe) c.n_ff_exp = std::max(c.n_ff_exp, L.n_ff_exp);
    }
    c.attn_scale = c.layers[0].attn_scale;
}

}  // namespace

bool ModelConfig::has_sliding_layers() const {
    return std::any_of(layers.begin(), layers.end(),
                       [](const LayerConfig& L) { return L.attention == AttentionKind::kSliding; });
}

ModelConfig load_model_config(const GgufFile& f) {
    ModelConfig c;
    const std::string_view arch = f.architecture();
    if (arch.empty()) fail("{}: missing metadata key 'general.architecture'", f.path());
    const ArchitectureTraits* traits = find_architecture(arch);
    if (traits == nullptr) {
        std::string known;
        for (const ArchitectureTraits& a : supported_architectures()) {
            known += (known.empty() ? "" : ", ") + std::string(a.name);
        }
        fail("{}: unknown architecture '{}' (supported: {})", f.path(), arch, known);
    }
    c.arch = std::string(arch);
    c.name = f.has("general.name") && f.find("general.name")->type == GgufValueType::kString
                 ? f.get_string("general.name")
                 : std::filesystem::path(f.path()).filename().string();
    ArchKeys k(f, c.arch);

    // block_count counts the nextn (multi-token prediction) draft layers after the trunk too;
    // they are not run here (llama.cpp skips them unless asked for speculative decoding).
    const int n_layer_file = static_cast<int>(k.get_int("block_count", 1, 4096));
    c.n_layer_nextn = static_cast<int>(k.find_int("nextn_predict_layers", 0, n_layer_file - 1).value_or(0));
    c.n_layer = n_layer_file - c.n_layer_nextn;
    k.set_layers_in_file(n_layer_file);
    c.n_embd = static_cast<int>(k.get_int("embedding_length", 1, kMaxDim));
    const std::vector<int64_t> n_head = k.per_layer("attention.head_count", c.n_layer, 1, 4096, std::nullopt);
    std::vector<int64_t> n_head_kv = k.per_layer("attention.head_count_kv", c.n_layer, 0, 4096, -1);
    for (int il = 0; il < c.n_layer; ++il) {
        if (n_head_kv[il] == -1) n_head_kv[il] = n_head[il];
        if (n_head_kv[il] == 0) fail("{}: layer {} has no KV heads (not supported)", f.path(), il);
    }
    c.head_dim_k = static_cast<int>(k.find_int("attention.key_length", 1, 65536).value_or(c.n_embd / n_head[0]));
    c.head_dim_v = static_cast<int>(k.find_int("attention.value_length", 1, 65536).value_or(c.n_embd / n_head[0]));
    if (c.head_dim_k == 0 || c.head_dim_v == 0) fail("{}: head dimension is 0", f.path());
    c.n_ctx_train = static_cast<int>(k.find_int("context_length", 1, INT32_MAX).value_or(4096));
    const std::vector<int64_t> n_ff = k.per_layer("feed_forward_length", c.n_layer, 0, kMaxDim, 0);
    c.rms_eps = static_cast<float>(k.get_float("attention.layer_norm_rms_epsilon"));
    if (!(c.rms_eps > 0.0f) || c.rms_eps > 1.0f) {
        fail("{}: {} = {} is not in (0, 1]", f.path(), k.key("attention.layer_norm_rms_epsilon"), c.rms_eps);
    }
    // Vocabulary size: {arch}.vocab_size, else the tokenizer's token count.
    if (auto v = k.find_int("vocab_size", 1, INT32_MAX)) {
        c.n_vocab = static_cast<int>(*v);
    } else if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens")) {
        c.n_vocab = static_cast<int>(tokens->count);
    }
    if (!k.find_bool("attention.causal").value_or(true)) {
        fail("{}: {} = false: non-causal models are not supported", f.path(), k.key("attention.causal"));
    }
    c.qk_norm = traits->qk_norm;
    read_rope(k, *traits, c);

    // Every layer as the common keys describe it; the hook may change them.
    c.layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
        LayerConfig& L = c.layers[il];
        L.n_head = static_cast<int>(n_head[il]);
        L.n_head_kv = static_cast<int>(n_head_kv[il]);
        L.head_dim_k = c.head_dim_k;
        L.head_dim_v = c.head_dim_v;
        L.kv_layer = il;
        L.rope = c.rope;
        L.n_ff = static_cast<int>(n_ff[il]);
    }
    read_experts(k, *traits, c, n_ff);
    if (traits->configure != nullptr) traits->configure(k, c);
    finish_layers(f.path(), c);
    if (traits->strict) k.refuse_unknown();
    return c;
}

void make_sliding_layers(ArchKeys& k, ModelConfig& c, const std::vector<bool>& is_swa, int window,
                         float freq_base, float freq_scale) {
    const int dk = static_cast<int>(k.find_int("attention.key_length_swa", 1, 65536).value_or(c.head_dim_k));
    const int dv = static_cast<int>(k.find_int("attention.value_length_swa", 1, 65536).value_or(c.head_dim_v));
    const int n_rot = static_cast<int>(k.find_int("rope.dimension_count_swa", 2, 65536).value_or(c.rope.n_dims));
    for (int il = 0; il < c.n_layer; ++il) {
        if (!is_swa[il]) continue;
        LayerConfig& L = c.layers[il];
        L.attention = AttentionKind::kSliding;
        L.window = window;
        L.head_dim_k = dk;
        L.head_dim_v = dv;
        L.rope.n_dims = n_rot;
        L.rope.freq_base = freq_base;
        L.rope.freq_scale = freq_scale;
    }
}

int kv_cache_positions(const LayerConfig& layer, int n_ctx, int max_batch) {
    if (layer.attention == AttentionKind::kRecurrent) return 0;
    if (layer.attention != AttentionKind::kSliding) return n_ctx;
    return static_cast<int>(std::min<int64_t>(n_ctx, int64_t{layer.window} + max_batch - 1));
}

int max_rewind(const ModelConfig& c, int n_ctx, int max_batch) {
    int rewind = n_ctx;
    for (const LayerConfig& L : c.layers) {
        if (L.attention == AttentionKind::kRecurrent) return 0;  // a recurrent state cannot go back
        const int held = kv_cache_positions(L, n_ctx, max_batch);
        if (held < n_ctx) rewind = std::min(rewind, held - L.window + 1);
    }
    return rewind;
}

std::string describe(const ModelConfig& c) {
    std::string s = fmt::format("{}, {} layers, embd {}, {} heads ({} kv, dim {})", c.arch, c.n_layer, c.n_embd,
                                c.n_head, c.n_head_kv, c.head_dim_k);
    int sliding = 0, window = 0;
    for (const LayerConfig& L : c.layers) {
        if (L.attention != AttentionKind::kSliding) continue;
        ++sliding;
        window = L.window;
    }
    if (sliding > 0) s += fmt::format(", {} sliding-window layers (window {})", sliding, window);
    if (c.is_moe()) {
        s += fmt::format(", {} experts ({} used, ffn {})", c.n_expert, c.n_expert_used, c.n_ff_exp);
    } else {
        s += fmt::format(", ffn {}", c.n_ff);
    }
    return s + fmt::format(", vocab {}", c.n_vocab);
}

}  // namespace tandem
