// Hyperparameters of a decoder model, read from GGUF keys as llama.cpp reads them
// (llama_model::load_hparams).
#include "model/model_config.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/architectures.h"

namespace tandem {

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
    auto key = [&](const char* suffix) { return c.arch + "." + suffix; };
    constexpr int64_t kMaxDim = 1 << 20;

    c.n_layer = static_cast<int>(f.get_int(key("block_count"), 1, 4096));
    c.n_embd = static_cast<int>(f.get_int(key("embedding_length"), 1, kMaxDim));
    c.n_head = static_cast<int>(f.get_int(key("attention.head_count"), 1, 4096));
    c.n_head_kv = static_cast<int>(f.find_int(key("attention.head_count_kv"), 1, 4096).value_or(c.n_head));
    if (c.n_head % c.n_head_kv != 0) {
        fail("{}: {} = {} is not a multiple of {} = {}", f.path(), key("attention.head_count"),
             c.n_head, key("attention.head_count_kv"), c.n_head_kv);
    }
    c.head_dim_k = static_cast<int>(f.find_int(key("attention.key_length"), 1, 65536).value_or(c.n_embd / c.n_head));
    c.head_dim_v = static_cast<int>(f.find_int(key("attention.value_length"), 1, 65536).value_or(c.n_embd / c.n_head));
    if (c.head_dim_k == 0 || c.head_dim_v == 0) fail("{}: head dimension is 0", f.path());
    c.n_ctx_train = static_cast<int>(f.find_int(key("context_length"), 1, INT32_MAX).value_or(4096));
    c.n_ff = static_cast<int>(f.find_int(key("feed_forward_length"), 0, kMaxDim).value_or(0));
    c.rms_eps = static_cast<float>(f.get_float(key("attention.layer_norm_rms_epsilon")));
    if (!(c.rms_eps > 0.0f) || c.rms_eps > 1.0f) {
        fail("{}: {} = {} is not in (0, 1]", f.path(), key("attention.layer_norm_rms_epsilon"), c.rms_eps);
    }
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));

    // Vocabulary size: {arch}.vocab_size, else the tokenizer's token count.
    if (auto v = f.find_int(key("vocab_size"), 1, INT32_MAX)) {
        c.n_vocab = static_cast<int>(*v);
    } else if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens")) {
        c.n_vocab = static_cast<int>(tokens->count);
    }

    // Experts.
    c.n_expert = static_cast<int>(f.find_int(key("expert_count"), 0, 4096).value_or(0));
    c.n_expert_used = static_cast<int>(f.find_int(key("expert_used_count"), 0, 4096).value_or(0));
    if (traits->experts == ExpertPresence::kNone && c.n_expert > 0) {
        fail("{}: architecture {} has no experts but {} = {}", f.path(), c.arch, key("expert_count"), c.n_expert);
    }
    if (traits->experts == ExpertPresence::kRequired && c.n_expert == 0) {
        fail("{}: missing metadata key '{}' ({} needs experts)", f.path(), key("expert_count"), c.arch);
    }
    if (c.n_expert > 0) {
        if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
            fail("{}: {} = {} must be in 1..{}", f.path(), key("expert_used_count"), c.n_expert_used, c.n_expert);
        }
        c.n_ff_exp = static_cast<int>(f.find_int(key("expert_feed_forward_length"), 0, kMaxDim).value_or(0));
        if (c.n_ff_exp == 0) c.n_ff_exp = c.n_ff / c.n_expert_used;  // llama.cpp's fallback
        if (c.n_ff_exp == 0) fail("{}: missing metadata key '{}'", f.path(), key("expert_feed_forward_length"));
        c.expert_weights_norm = traits->expert_weights_norm;
        c.expert_weights_scale = static_cast<float>(f.find_float(key("expert_weights_scale")).value_or(1.0));
        if (c.expert_weights_scale == 0.0f) c.expert_weights_scale = 1.0f;
    } else if (c.n_ff <= 0) {
        fail("{}: missing metadata key '{}'", f.path(), key("feed_forward_length"));
    }
    c.qk_norm = traits->qk_norm;

    // Rotary embedding (llama_model::load_hparams and llama_context's cparams).
    RopeParams& r = c.rope;
    r.type = traits->rope_type;
    r.n_dims = static_cast<int>(f.find_int(key("rope.dimension_count"), 2, 65536).value_or(c.head_dim_k));
    if (r.n_dims % 2 != 0 || r.n_dims > c.head_dim_k) {
        fail("{}: {} = {} must be even and at most the head dimension {}", f.path(),
             key("rope.dimension_count"), r.n_dims, c.head_dim_k);
    }
    if (traits->rope_dim_must_equal_head_dim && r.n_dims != c.head_dim_k) {
        fail("{}: {} = {} must equal the head dimension {} for {}", f.path(), key("rope.dimension_count"),
             r.n_dims, c.head_dim_k, c.arch);
    }
    r.freq_base = static_cast<float>(f.find_float(key("rope.freq_base")).value_or(10000.0));
    if (!(r.freq_base > 0.0f)) fail("{}: {} must be positive", f.path(), key("rope.freq_base"));
    std::string scaling = "linear";
    if (f.has(key("rope.scaling.type"))) scaling = f.get_string(key("rope.scaling.type"));
    double factor = f.find_float(key("rope.scaling.factor")).value_or(f.find_float(key("rope.scale_linear")).value_or(0.0));
    if (factor < 0.0) fail("{}: {} = {} is negative", f.path(), key("rope.scaling.factor"), factor);
    r.freq_scale = factor == 0.0 ? 1.0f : static_cast<float>(1.0 / factor);
    if (scaling == "none") {
        r.freq_scale = 1.0f;
    } else if (scaling == "yarn") {
        r.ext_factor = 1.0f;
    } else if (scaling != "linear") {
        fail("{}: {} = '{}' is not supported (none, linear or yarn)", f.path(), key("rope.scaling.type"), scaling);
    }
    r.attn_factor = static_cast<float>(f.find_float(key("rope.scaling.attn_factor")).value_or(1.0));
    r.n_ctx_orig = static_cast<int>(f.find_int(key("rope.scaling.original_context_length"), 1, INT32_MAX).value_or(c.n_ctx_train));
    r.beta_fast = static_cast<float>(f.find_float(key("rope.scaling.yarn_beta_fast")).value_or(32.0));
    r.beta_slow = static_cast<float>(f.find_float(key("rope.scaling.yarn_beta_slow")).value_or(1.0));
    return c;
}

std::string describe(const ModelConfig& c) {
    std::string s = fmt::format("{}, {} layers, embd {}, {} heads ({} kv, dim {})", c.arch, c.n_layer,
                                c.n_embd, c.n_head, c.n_head_kv, c.head_dim_k);
    if (c.is_moe()) {
        s += fmt::format(", {} experts ({} used, ffn {})", c.n_expert, c.n_expert_used, c.n_ff_exp);
    } else {
        s += fmt::format(", ffn {}", c.n_ff);
    }
    return s + fmt::format(", vocab {}", c.n_vocab);
}

}  // namespace tandem
