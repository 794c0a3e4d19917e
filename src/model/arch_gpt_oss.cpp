// gpt-oss (llama.cpp's `gpt-oss` architecture, src/models/openai-moe.cpp, v0.4.0): alternating
// sliding-window and full attention with learnt sinks, biases on q/k/v/o, the router and every
// expert projection, the clamped SwiGLU of gpt-oss, a softmax over the selected experts'
// logits, YaRN rope.
#include <cmath>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "model/arch_keys.h"
#include "model/architectures.h"
#include "model/model_config.h"

namespace tandem {

void configure_gpt_oss(ArchKeys& k, ModelConfig& c) {
    const std::string& path = k.file().path();
    if (!k.has("expert_feed_forward_length")) {
        fail("{}: missing metadata key '{}'", path, k.key("expert_feed_forward_length"));
    }
    const int window = static_cast<int>(k.get_int("attention.sliding_window", 1, INT32_MAX));
    // set_swa_pattern(period): every period-th layer, from the period-th, is full.
    const int period = static_cast<int>(k.find_int("attention.sliding_window_pattern", 0, c.n_layer).value_or(2));
    std::vector<bool> is_swa(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) is_swa[il] = period == 0 || il % period < period - 1;
    // Sliding layers rotate as the full ones unless rope.freq_base_swa says otherwise.
    const float base_swa = static_cast<float>(k.find_float("rope.freq_base_swa").value_or(c.rope.freq_base));
    if (!(base_swa > 0.0f)) fail("{}: {} must be positive", path, k.key("rope.freq_base_swa"));
    make_sliding_layers(k, c, is_swa, window, base_swa, c.rope.freq_scale);
    // The graph uses the rotated dimensions of layer 0 as every layer's head size and rope.
    const int n_rot = c.layers[0].rope.n_dims;
    for (int il = 0; il < c.n_layer; ++il) {
        LayerConfig& L = c.layers[il];
        if (L.head_dim_k != n_rot || L.head_dim_v != n_rot) {
            fail("{}: layer {}: heads of {}/{} values but {} rotated dimensions (gpt-oss needs them equal)", path,
                 il, L.head_dim_k, L.head_dim_v, n_rot);
        }
        L.rope.n_dims = n_rot;
        L.attn_scale = 1.0f / std::sqrt(static_cast<float>(n_rot));
    }
    k.accept("expert_gating_func");  // the graph passes its own gating
    k.accept("expert_weights_norm");
    c.attn_sinks = true;
    c.biases = true;
    c.gating = ExpertGating::kSoftmaxSelected;
    c.expert_activation = GluKind::kSwigluOai;
}

}  // namespace tandem
