// Hyperparameters of a decoder model, read from GGUF keys. Architectures differ by the fields
// of this typed config (rope, QK-norm, sliding windows, norm placement, routing, ...), not by
// name checks in the forward pass: the per-architecture files (arch_*.cpp) fill it in.
#pragma once

#include <string>
#include <vector>

#include "cpu/elementwise.h"
#include "cpu/moe_routing.h"
#include "cpu/rope.h"

namespace tandem {

class GgufFile;

// Which positions a layer's attention sees.
enum class AttentionKind {
    kFull,     // every earlier position of the sequence
    kSliding,  // the last `window` positions (itself included), llama.cpp's LLAMA_SWA_TYPE_STANDARD
    kRecurrent,  // no attention: a gated delta-net with a short convolution and a recurrent state
                 // per sequence (qwen3.5's linear-attention layers; ModelConfig::delta)
};

// Where the RMS norms of a block sit.
enum class NormPlacement {
    kPre,       // norm → attention → residual; norm → FFN → residual (llama, qwen, gpt-oss)
    kSandwich,  // Gemma: a second norm on each block's output before its residual add
};

// What the router reads.
enum class RouterInput {
    kFfnInput,      // the normed FFN input, as the experts
    kScaledRmsNorm, // Gemma-4: rms_norm(residual) / sqrt(n_embd) · ffn_gate_inp.scale
};

// One layer's shape: layers may differ in heads, head sizes, window, rope and FFN (Gemma-4's
// sliding and global layers, gpt-oss's alternating windows, dense layers before MoE layers).
struct LayerConfig {
    AttentionKind attention = AttentionKind::kFull;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
    int window = 0;        // kSliding: positions seen, the token's own included
    bool values_in_keys = false;  // the values are the first head_dim_v of the keys (MLA's latent)
    int kv_layer = 0;      // the layer whose KV cache this one reads (itself unless shared)
    float attn_scale = 0;  // the factor of q·k before the softmax
    RopeParams rope;       // freq_factors is set when the model's weights are bound
    bool rope_freq_factors = true;  // the model's rope_freqs tensor (if any) applies to this layer
    bool moe = false;      // routed experts
    bool dense_ffn = true; // a dense FFN (with moe: beside the experts, Gemma-4)
    int n_ff = 0;          // dense FFN width
    int n_ff_exp = 0;      // expert FFN width
    int n_ff_shexp = 0;    // shared expert width beside the routed ones (0: none)

    int64_t q_width() const { return int64_t{n_head} * head_dim_k; }
    int64_t k_width() const { return int64_t{n_head_kv} * head_dim_k; }
    int64_t v_width() const { return int64_t{n_head_kv} * head_dim_v; }
    int64_t attn_width() const { return int64_t{n_head} * head_dim_v; }
};

struct ModelConfig {
    std::string arch;        // general.architecture
    std::string name;        // general.name, or the file name
    int n_layer = 0;         // layers run (block_count less the nextn draft layers)
    int n_layer_nextn = 0;   // nextn_predict_layers: draft layers after the trunk, not run
    int n_embd = 0;
    // The widest of the layers (buffer sizes); layers[] has each layer's own.
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;      // attention.key_length (default n_embd / n_head)
    int head_dim_v = 0;      // attention.value_length
    int n_vocab = 0;
    int n_ctx_train = 0;     // context_length
    int n_ff = 0;            // dense FFN width (feed_forward_length), widest layer
    int n_expert = 0;        // 0: dense model
    int n_expert_used = 0;
    int n_ff_exp = 0;        // expert FFN width
    float rms_eps = 1e-5f;
    float attn_scale = 0.0f;  // 1 / sqrt(head_dim_k)
    RopeParams rope;          // of full-attention layers (layers[] has each layer's)
    bool qk_norm = false;              // per-head RMSNorm of Q and K (qwen3, gemma4)
    bool v_norm = false;               // per-head RMSNorm of V without a weight (gemma4)
    bool values_may_be_keys = false;   // a layer without attn_v uses its keys as values (gemma4)
    bool attn_sinks = false;           // a learnt logit per head in the softmax denominator (gpt-oss)
    NormPlacement norm_placement = NormPlacement::kPre;
    bool biases = false;               // q/k/v/o, router and expert biases are required (gpt-oss);
                                       // other architectures take the ones a file has
    float embed_scale = 1.0f;          // the token embeddings are multiplied by it (Gemma: √n_embd)
    float final_logit_softcap = 0.0f;  // logits = cap · tanh(logits / cap) when > 0
    int n_embd_per_layer = 0;          // Gemma per-layer embeddings: width per layer, 0: none
    // Multi-head latent attention (DeepSeek-V2/V3): queries through an optional low-rank
    // projection, keys and values from a shared latent of kv_lora_rank values plus one rotated
    // key of qk_rope dims; the KV cache keeps the latent and the rotated key only.
    struct Latent {
        int q_lora_rank = 0;   // 0: a plain attn_q
        int kv_lora_rank = 0;  // 0: not MLA
        int qk_nope = 0;       // unrotated query/key dims per head
        int qk_rope = 0;       // rotated dims
        int v_head = 0;        // value dims per head after the latent's up-projection
    } mla;
    // Gated delta-net layers (qwen3.5): projections to q, k (n_k_heads × head_dim each) and v
    // (n_v_heads × head_dim) through a causal depthwise convolution of conv_kernel taps, a
    // per-head decay and write strength, a state of head_dim × head_dim per value head.
    struct DeltaNet {
        int conv_kernel = 0;
        int n_k_heads = 0;
        int n_v_heads = 0;
        int head_dim = 0;
        int64_t key_width() const { return int64_t{n_k_heads} * head_dim; }
        int64_t value_width() const { return int64_t{n_v_heads} * head_dim; }
        int64_t conv_width() const { return 2 * key_width() + value_width(); }
    } delta;
    bool attn_output_gate = false;     // full attention: q projects a gate per head too, out · σ(gate)
    bool shared_expert_gate = false;   // the shared expert's output times σ(ffn_gate_inp_shexp · x)
    // Experts.
    ExpertGating gating = ExpertGating::kSoftmax;
    int n_expert_groups = 0;           // group-limited routing: groups of experts ...
    int n_group_used = 0;              // ... of which the best (sum of their top two) are used
    RouterInput router_input = RouterInput::kFfnInput;
    bool expert_weights_norm = false;  // renormalise the chosen routing weights to sum 1
    float expert_weights_scale = 1.0f;
    GluKind activation = GluKind::kSilu;         // dense FFN
    GluKind expert_activation = GluKind::kSilu;  // routed experts
    std::vector<LayerConfig> layers;

    bool is_moe() const { return n_expert > 0; }
    bool has_sliding_layers() const;
};

// Reads and validates the hyperparameters of a supported architecture; throws Error naming the
// file and key (unknown architecture, missing key, value out of range, a key of the
// architecture's namespace that a strict architecture does not know).
ModelConfig load_model_config(const GgufFile& file);

// Positions the KV cache of a layer keeps per sequence: all n_ctx for full attention; for a
// sliding window W a ring of W + max_batch - 1 (the first token of a batch still sees the W - 1
// positions before it while the batch's own are stored), at most n_ctx.
int kv_cache_positions(const LayerConfig& layer, int n_ctx, int max_batch);

// How many positions a sequence may be rewound and continued without recomputing it: the ring
// of a sliding layer still holds the window of the new position (n_ctx when every layer keeps
// the whole context).
int max_rewind(const ModelConfig& config, int n_ctx, int max_batch);

// "qwen3moe, 48 layers, embd 2048, 32 heads (4 kv, dim 128), 128 experts (8 used, ffn 768)".
std::string describe(const ModelConfig& config);

}  // namespace tandem
