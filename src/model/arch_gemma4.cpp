// Gemma-4 (llama.cpp's src/models/gemma4.cpp, v0.4.0): sliding-window and global layers with
// their own head sizes, KV heads and rope; Q/K norms and an unweighted V norm; Gemma's sandwich
// norms; the embedding scale; GELU FFNs, with a dense MLP beside the routed experts in MoE
// layers; a router reading its own scaled norm of the residual; optional per-layer embeddings,
// layer output scales and KV caches shared by the last layers; final logit soft-capping.
#include <cmath>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/arch_keys.h"
#include "model/architectures.h"
#include "model/model_config.h"
#include "model/tensor_names.h"

namespace tandem {

void configure_gemma4(ArchKeys& k, ModelConfig& c) {
    const GgufFile& f = k.file();
    const std::string& path = f.path();
    // Which layers slide: one bool per layer (or one for all), required.
    const std::vector<int64_t> pattern =
        k.per_layer("attention.sliding_window_pattern", c.n_layer, 0, 1, std::nullopt);
    std::vector<bool> is_swa(pattern.begin(), pattern.end());
    const int window = static_cast<int>(k.get_int("attention.sliding_window", 1, INT32_MAX));
    for (const char* key : {"attention.key_length_swa", "attention.value_length_swa"}) {
        if (!k.has(key)) fail("{}: missing metadata key '{}'", path, k.key(key));
    }
    // Sliding layers: rope.freq_base_swa (llama.cpp's default 10000) and no frequency scaling.
    const float base_swa = static_cast<float>(k.find_float("rope.freq_base_swa").value_or(10000.0));
    if (!(base_swa > 0.0f)) fail("{}: {} must be positive", path, k.key("rope.freq_base_swa"));
    make_sliding_layers(k, c, is_swa, window, base_swa, 1.0f);

    c.n_embd_per_layer = static_cast<int>(k.get_int("embedding_length_per_layer_input", 0, 1 << 20));
    // llama.cpp's default cap is 30 when the key is absent.
    c.final_logit_softcap = static_cast<float>(k.find_float("final_logit_softcapping").value_or(30.0));
    if (c.final_logit_softcap < 0.0f) fail("{}: {} is negative", path, k.key("final_logit_softcapping"));

    // The last n_shared layers read the caches of the last sliding and the last full layer
    // before them (llama.cpp's layer_reuse_cb).
    const int n_shared = static_cast<int>(k.find_int("attention.shared_kv_layers", 0, c.n_layer).value_or(0));
    const int kv_from = c.n_layer - n_shared;
    if (n_shared > 0 && kv_from < 2) {
        fail("{}: {} = {} leaves fewer than 2 layers with a KV cache", path, k.key("attention.shared_kv_layers"),
             n_shared);
    }
    // Experts: the graph passes softmax gating, normalized weights and scale 1 whatever the
    // keys say.
    k.accept("expert_gating_func");
    k.accept("expert_weights_norm");
    for (int il = 0; il < c.n_layer; ++il) {
        LayerConfig& L = c.layers[il];
        if (L.head_dim_k != L.head_dim_v) {
            fail("{}: layer {}: key and value heads of {} and {} values (Gemma 4 needs them equal)", path, il,
                 L.head_dim_k, L.head_dim_v);
        }
        if (il >= kv_from) L.kv_layer = kv_from - (is_swa[il] ? 2 : 1);
        L.attn_scale = 1.0f;  // f_attention_scale: the Q norm does the scaling
        L.rope_freq_factors = !is_swa[il];  // rope_freqs makes the global layers' rope proportional
        L.dense_ffn = true;   // in MoE layers, the "shared expert" MLP
        // A layer has experts when it has a router (llama.cpp's is_moe_layer).
        L.moe = c.is_moe() && f.find_tensor(tensor_names::layer(il, tensor_names::kFfnRouter)) != nullptr;
        if (L.moe && L.n_ff_exp <= 0) fail("{}: layer {}: expert FFN width {}", path, il, L.n_ff_exp);
    }
    c.norm_placement = NormPlacement::kSandwich;
    c.v_norm = true;
    c.values_may_be_keys = true;
    c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
    c.activation = GluKind::kGelu;
    c.expert_activation = GluKind::kGelu;
    c.router_input = RouterInput::kScaledRmsNorm;
    c.gating = ExpertGating::kSoftmax;
}

}  // namespace tandem
