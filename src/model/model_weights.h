// The weights of a decoder model, bound to tensors of the mapped GGUF file with their shapes
// checked. Matrices are read in place; small vectors (norms, biases, scales) are copied to f32
// and owned here. A backend that computes elsewhere keeps a copy of this struct whose views point
// into its own memory (Ops::weights()).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cpu/moe_layer.h"
#include "cpu/weight_matrix.h"
#include "model/model_config.h"

namespace tandem {

class GgufFile;

struct LayerWeights {
    WeightVector attn_norm;              // [n_embd]
    WeightMatrix wq, wk, wv, wo;         // [n_embd → n_head·dk], [→ n_kv·dk], [→ n_kv·dv], [n_head·dv → n_embd]
    WeightVector bq, bk, bv, bo;         // optional biases (empty when absent)
    WeightVector q_norm, k_norm;         // [head_dim_k] (qk_norm architectures)
    WeightVector ffn_norm;               // [n_embd]
    // Dense FFN.
    WeightMatrix ffn_gate, ffn_up, ffn_down;  // [n_embd → n_ff], [n_embd → n_ff], [n_ff → n_embd]
    // MoE FFN.
    WeightMatrix router;                 // [n_embd → n_expert]
    MoeLayer experts;
};

struct ModelWeights {
    WeightMatrix token_embd;             // [n_vocab rows of n_embd]
    WeightVector output_norm;            // [n_embd]
    WeightMatrix output;                 // [n_embd → n_vocab] (token_embd when tied)
    WeightVector rope_freqs;             // optional llama-3 rope frequency factors [n_rot / 2]
    std::vector<LayerWeights> layers;
    // The f32 copies the vectors and the experts' scales and biases point into.
    std::vector<std::unique_ptr<std::vector<float>>> owned;
};

// Binds every tensor of the architecture, checking presence, shape and type; applies the NVFP4
// scale-tensor rules. Throws Error naming the tensor.
ModelWeights bind_model_weights(const GgufFile& file, const ModelConfig& config);

}  // namespace tandem
