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
                                         // wk, wv empty on a layer that reads another's KV cache;
                                         // wv empty on a Gemma-4 layer whose values are its keys
    WeightVector bq, bk, bv, bo;         // optional biases (empty when absent)
    // Multi-head latent attention (mla.kv_lora_rank > 0; H heads, Lq/Lkv the ranks, R the rotated
    // and N the unrotated dims, Dv the value dims; wq above is the plain query when Lq is 0):
    WeightMatrix wq_a;                   // [n_embd → Lq]
    WeightVector q_a_norm;               // [Lq]
    WeightMatrix wq_b;                   // [Lq → H·(N + R)]
    WeightMatrix wkv_a;                  // [n_embd → Lkv + R] the latent, then the rotated key
    WeightVector kv_a_norm;              // [Lkv]
    ExpertMatrix wk_b;                   // per head [N → Lkv]: absorbs the key's up-projection
    ExpertMatrix wv_b;                   // per head [Lkv → Dv]: the value's up-projection
    WeightVector q_norm, k_norm;         // [head_dim_k] (qk_norm architectures)
    // Gated delta-net (kRecurrent layers; C = the convolution's width, Hv value heads of S):
    WeightMatrix wqkv;                   // [n_embd → C] q, k, v before the convolution
    WeightMatrix wqkv_gate;              // [n_embd → Hv·S] the output gate z
    WeightVector ssm_conv;               // [C × taps] the depthwise convolution, channel-major
    WeightVector ssm_dt;                 // [Hv] the decay's bias
    WeightVector ssm_a;                  // [Hv] the decay's scale (-exp(A_log))
    WeightMatrix ssm_beta;               // [n_embd → Hv] write strength, through a sigmoid
    WeightMatrix ssm_alpha;              // [n_embd → Hv] decay, through softplus
    WeightVector ssm_norm;               // [S] the output norm per head
    WeightMatrix ssm_out;                // [Hv·S → n_embd]
    WeightVector attn_sinks;             // [n_head] (attn_sinks architectures)
    WeightVector attn_post_norm;         // [n_embd] (kSandwich: on the attention output)
    WeightVector ffn_norm;               // [n_embd] the FFN input norm (MoE+dense: the dense MLP's)
    WeightVector ffn_post_norm;          // [n_embd] (kSandwich: on the FFN output)
    // Dense FFN.
    WeightMatrix ffn_gate, ffn_up, ffn_down;  // [n_embd → n_ff], [n_embd → n_ff], [n_ff → n_embd]
    // MoE FFN.
    WeightMatrix router;                 // [n_embd → n_expert]
    WeightVector router_bias;            // [n_expert] optional
    WeightVector expert_bias;            // [n_expert] optional exp_probs_b: biases the choice only
    WeightVector router_scale;           // [n_embd] (kScaledRmsNorm router input)
    WeightVector ffn_pre_norm_2;         // [n_embd] experts' input norm beside a dense MLP (Gemma-4)
    WeightVector ffn_post_norm_1;        // [n_embd] on the dense MLP's output (Gemma-4)
    WeightVector ffn_post_norm_2;        // [n_embd] on the experts' output (Gemma-4)
    MoeLayer experts;
    // Shared expert beside the routed ones (n_ff_shexp > 0).
    WeightMatrix shexp_gate, shexp_up, shexp_down;  // [n_embd → F], [n_embd → F], [F → n_embd]
    WeightMatrix shexp_gate_inp;         // [n_embd → 1] the shared expert's sigmoid gate (qwen3.5)
    // Per-layer embeddings (n_embd_per_layer > 0).
    WeightMatrix pl_gate;                // [n_embd → n_pl]
    WeightMatrix pl_proj;                // [n_pl → n_embd]
    WeightVector pl_post_norm;           // [n_embd]
    WeightVector out_scale;              // [1] optional: the layer's output times it
};

struct ModelWeights {
    WeightMatrix token_embd;             // [n_vocab rows of n_embd]
    WeightVector output_norm;            // [n_embd]
    WeightMatrix output;                 // [n_embd → n_vocab] (token_embd when tied)
    WeightVector rope_freqs;             // optional rope frequency divisors [n_rot / 2]
    // Per-layer embeddings (n_embd_per_layer > 0, n_pl = n_embd_per_layer, L = n_layer).
    WeightMatrix pl_token_embd;          // [n_vocab rows of n_pl·L]
    WeightMatrix pl_model_proj;          // [n_embd → n_pl·L]
    WeightVector pl_proj_norm;           // [n_pl]
    std::vector<LayerWeights> layers;
    // The f32 copies the vectors and the experts' scales and biases point into.
    std::vector<std::unique_ptr<std::vector<float>>> owned;
};

// Binds every tensor of the architecture, checking presence, shape and type; applies the NVFP4
// scale-tensor rules. Throws Error naming the tensor.
ModelWeights bind_model_weights(const GgufFile& file, const ModelConfig& config);

}  // namespace tandem
