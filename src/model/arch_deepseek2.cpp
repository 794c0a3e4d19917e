// DeepSeek-V2/V3, Kimi-K2 (llama.cpp's `deepseek2` architecture, src/models/deepseek2.cpp,
// v0.4.0): multi-head latent attention with the absorbed key and value up-projections (the KV
// cache keeps the latent and the rotated key only), the leading dense layers, shared experts,
// softmax or sigmoid gating with the expert-score bias, the weights' norm and scale, and
// group-limited routing (read by the common code).
#include <cmath>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/arch_keys.h"
#include "model/architectures.h"
#include "model/model_config.h"

namespace tandem {

void configure_deepseek2(ArchKeys& k, ModelConfig& c) {
    const std::string& path = k.file().path();
    constexpr int64_t kMaxDim = 1 << 20;
    ModelConfig::Latent& m = c.mla;
    // The "lite" variants (DeepSeek-V2-Lite, GigaChat3-10B-A1.8B, Kanana-2-30B-A3B) have a plain
    // attn_q; llama.cpp knows them by their layer count (and vocabulary) and reads no
    // q_lora_rank then. The others need it.
    const bool lite = c.n_layer == 27 || c.n_layer == 26 || (c.n_layer == 48 && c.n_vocab == 128256);
    if (lite) {
        k.accept("attention.q_lora_rank");
    } else {
        m.q_lora_rank = static_cast<int>(k.get_int("attention.q_lora_rank", 1, kMaxDim));
    }
    m.kv_lora_rank = static_cast<int>(k.get_int("attention.kv_lora_rank", 1, kMaxDim));
    const std::optional<int64_t> k_mla = k.find_int("attention.key_length_mla", 1, 65536);
    const std::optional<int64_t> v_mla = k.find_int("attention.value_length_mla", 1, 65536);
    if (!k_mla || !v_mla) {
        fail("{}: no {} / {}: DeepSeek files with the unsplit attn_kv_b (multi-head attention) are not supported; "
             "convert the model again with a current llama.cpp",
             path, k.key("attention.key_length_mla"), k.key("attention.value_length_mla"));
    }
    if (!k.has("rope.dimension_count")) fail("{}: missing metadata key '{}'", path, k.key("rope.dimension_count"));
    m.qk_rope = c.rope.n_dims;
    m.qk_nope = static_cast<int>(*k_mla) - m.qk_rope;
    m.v_head = static_cast<int>(*v_mla);
    if (m.qk_nope < 1) fail("{}: {} = {} leaves no unrotated dims beside {} rotated", path,
                            k.key("attention.key_length_mla"), *k_mla, m.qk_rope);
    // The cache's keys are the latent then the rotated key; its values, the latent.
    if (c.head_dim_k != m.kv_lora_rank + m.qk_rope || c.head_dim_v != m.kv_lora_rank) {
        fail("{}: {} = {} and {} = {} must be the latent plus the rotated dims ({} + {}) and the latent", path,
             k.key("attention.key_length"), c.head_dim_k, k.key("attention.value_length"), c.head_dim_v,
             m.kv_lora_rank, m.qk_rope);
    }

    // Rope and the attention scale with YaRN (llama_context and deepseek2.cpp): the file's
    // yarn_log_multiplier is 0.1 · mscale_all_dim. llama.cpp's attn_factor for rope cancels the
    // ggml factor 1 + 0.1·ln(1/freq_scale) (the ratio of the two mscales is 1 for deepseek2), and the
    // scale of q·k is mscale² / √(N + R).
    const float log_mul = static_cast<float>(k.find_float("rope.scaling.yarn_log_multiplier").value_or(0.0)) / 0.1f;
    RopeParams& r = c.rope;
    const float raf = r.attn_factor;
    float yarn_attn = raf;
    if (r.ext_factor != 0.0f) {
        const float factor = 1.0f / r.freq_scale;
        const float mscale_one = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
        yarn_attn = (log_mul != 0.0f ? 1.0f : mscale_one) / (1.0f + 0.1f * std::log(factor)) * raf;
    }
    r.attn_factor = yarn_attn;
    const float attn_factor_org = yarn_attn * (1.0f + 0.1f * std::log(1.0f / r.freq_scale));
    const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * std::log(1.0f / r.freq_scale));
    const float kq_scale = mscale * mscale / std::sqrt(static_cast<float>(*k_mla));
    if (k.find_float("attention.temperature_scale").value_or(0.0) != 0.0) {
        fail("{}: {} (attention temperature tuning) is not supported", path, k.key("attention.temperature_scale"));
    }
    k.accept("attention.temperature_length");

    // Experts: shared ones, gating, the weights' norm and scale.
    const int n_dense = static_cast<int>(k.find_int("leading_dense_block_count", 0, c.n_layer).value_or(0));
    const int n_shared = static_cast<int>(k.get_int("expert_shared_count", 0, 4096));
    if (!k.has("expert_feed_forward_length")) {
        fail("{}: missing metadata key '{}'", path, k.key("expert_feed_forward_length"));
    }
    c.expert_weights_norm = k.find_bool("expert_weights_norm").value_or(false);
    const float scale = static_cast<float>(k.find_float("expert_weights_scale").value_or(0.0));
    c.expert_weights_scale = scale == 0.0f ? 1.0f : scale;
    int64_t gating = k.find_int("expert_gating_func", 0, 16).value_or(0);
    if (gating == 0) {
        // DeepSeek-V2/V2.5 files have no key: softmax, except GLM-4.7 Lite (llama.cpp's rule).
        const int64_t n_vocab = c.n_vocab;
        gating = (c.n_layer == 47 || c.n_layer == 48) && n_vocab == 154880 ? 2 : 1;
    }
    if (gating == 1) {
        c.gating = ExpertGating::kSoftmax;
    } else if (gating == 2) {
        c.gating = ExpertGating::kSigmoid;
    } else {
        fail("{}: {} = {} is not supported (1 softmax, 2 sigmoid)", path, k.key("expert_gating_func"), gating);
    }

    for (int il = 0; il < c.n_layer; ++il) {
        LayerConfig& L = c.layers[il];
        if (L.n_head_kv != 1) fail("{}: layer {}: {} KV heads (latent attention has 1)", path, il, L.n_head_kv);
        L.values_in_keys = true;
        L.rope.n_dims = m.qk_rope;
        L.attn_scale = kq_scale;
        L.rope.attn_factor = r.attn_factor;
        if (il < n_dense) {
            L.moe = false;
            L.dense_ffn = true;
        } else {
            L.n_ff_shexp = L.n_ff_exp * n_shared;
        }
    }
}

}  // namespace tandem
