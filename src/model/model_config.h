// Hyperparameters of a decoder model, read from GGUF keys. Architectures differ by the fields
// of this typed config (rope type, QK-norm, experts, ...), not by name checks in the forward pass.
#pragma once

#include <string>

#include "cpu/elementwise.h"
#include "cpu/rope.h"

namespace tandem {

class GgufFile;

struct ModelConfig {
    std::string arch;        // general.architecture
    std::string name;        // general.name, or the file name
    int n_layer = 0;
    int n_embd = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;      // attention.key_length (default n_embd / n_head)
    int head_dim_v = 0;      // attention.value_length
    int n_vocab = 0;
    int n_ctx_train = 0;     // context_length
    int n_ff = 0;            // dense FFN width (feed_forward_length)
    int n_expert = 0;        // 0: dense model
    int n_expert_used = 0;
    int n_ff_exp = 0;        // expert FFN width
    float rms_eps = 1e-5f;
    float attn_scale = 0.0f;  // 1 / sqrt(head_dim_k)
    RopeParams rope;
    bool qk_norm = false;              // per-head RMSNorm of Q and K (qwen3 family)
    bool expert_weights_norm = false;  // renormalise the chosen routing weights to sum 1
    float expert_weights_scale = 1.0f;
    GluKind activation = GluKind::kSilu;

    bool is_moe() const { return n_expert > 0; }
};

// Reads and validates the hyperparameters of a supported architecture; throws Error naming the
// file and key (unknown architecture, missing key, value out of range).
ModelConfig load_model_config(const GgufFile& file);

// "qwen3moe, 48 layers, embd 2048, 32 heads (4 kv, dim 128), 128 experts (8 used, ffn 768)".
std::string describe(const ModelConfig& config);

}  // namespace tandem
