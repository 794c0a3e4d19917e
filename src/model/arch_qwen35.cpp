// Qwen3.5 / Qwen3.6 (llama.cpp's `qwen35` and `qwen35moe`, src/models/qwen35*.cpp and
// delta-net-base.cpp, v0.4.0): gated delta-net layers (a short causal convolution, then the
// gated delta rule with a recurrent state per sequence) between gated full-attention layers
// (every full_attention_interval-th layer, or as attention.recurrent_layers says), interleaved
// multimodal rope over text, the FFN's norm named post_attention_norm, and for qwen35moe a
// shared expert with a sigmoid gate beside the routed experts.
#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/arch_keys.h"
#include "model/architectures.h"
#include "model/model_config.h"

namespace tandem {
namespace {

void configure_common(ArchKeys& k, ModelConfig& c) {
    const std::string& path = k.file().path();
    constexpr int64_t kMaxDim = 1 << 20;
    ModelConfig::DeltaNet& d = c.delta;
    d.conv_kernel = static_cast<int>(k.get_int("ssm.conv_kernel", 1, 64));
    const int64_t d_inner = k.get_int("ssm.inner_size", 1, kMaxDim);
    d.head_dim = static_cast<int>(k.get_int("ssm.state_size", 1, 4096));
    d.n_v_heads = static_cast<int>(k.get_int("ssm.time_step_rank", 1, 4096));
    d.n_k_heads = static_cast<int>(k.get_int("ssm.group_count", 1, 4096));
    if (d_inner != d.value_width()) {
        fail("{}: {} = {} is not {} value heads of {} ({})", path, k.key("ssm.inner_size"), d_inner, d.n_v_heads,
             d.head_dim, k.key("ssm.state_size"));
    }
    if (d.n_v_heads % d.n_k_heads != 0) {
        fail("{}: {} value heads are not a multiple of {} key heads", path, d.n_v_heads, d.n_k_heads);
    }
    // Which layers are recurrent: attention.recurrent_layers, else all but every
    // full_attention_interval-th.
    std::vector<int64_t> recurrent;
    if (k.has("attention.recurrent_layers")) {
        recurrent = k.per_layer("attention.recurrent_layers", c.n_layer, 0, 1, std::nullopt);
    } else {
        const int64_t interval = k.find_int("full_attention_interval", 1, 4096).value_or(4);
        recurrent.resize(c.n_layer);
        for (int il = 0; il < c.n_layer; ++il) recurrent[il] = (il + 1) % interval != 0;
    }
    k.accept("full_attention_interval");
    // Interleaved multimodal rope: four section sizes, required.
    const std::vector<int64_t> sections = k.per_layer_array("rope.dimension_sections", 4, 0, 65536);
    for (int il = 0; il < c.n_layer; ++il) {
        LayerConfig& L = c.layers[il];
        if (recurrent[il]) {
            L.attention = AttentionKind::kRecurrent;
            continue;
        }
        if (L.head_dim_k != L.head_dim_v) {
            fail("{}: layer {}: key and value heads of {} and {} values (qwen3.5 needs them equal)", path, il,
                 L.head_dim_k, L.head_dim_v);
        }
        L.rope.imrope = true;
        for (int i = 0; i < 4; ++i) L.rope.sections[i] = static_cast<int>(sections[i]);
    }
    c.rope.imrope = true;
    for (int i = 0; i < 4; ++i) c.rope.sections[i] = static_cast<int>(sections[i]);
    c.attn_output_gate = true;
}

}  // namespace

void configure_qwen35(ArchKeys& k, ModelConfig& c) { configure_common(k, c); }

void configure_qwen35moe(ArchKeys& k, ModelConfig& c) {
    configure_common(k, c);
    const int64_t shexp = k.find_int("expert_shared_feed_forward_length", 0, 1 << 20).value_or(0);
    for (LayerConfig& L : c.layers) L.n_ff_shexp = static_cast<int>(shexp > 0 ? shexp : L.n_ff);
    c.shared_expert_gate = true;
    // The graph passes normalized weights, softmax gating and scale 1 (expert_weights_scale unread).
    c.expert_weights_norm = true;
    k.accept("expert_gating_func");
    k.accept("expert_weights_norm");
}

}  // namespace tandem
