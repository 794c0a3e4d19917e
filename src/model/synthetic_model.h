// Random-weight GGUF models that llama.cpp can load, for tests, demos and benchmarks
// (`tandem synth`): qwen3moe, qwen3, llama, gemma4 and gpt-oss, any weight type per tensor
// class, the optional parts of an architecture switched on or off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/ggml_type.h"
#include "gguf/gguf_split.h"

namespace tandem {

struct SynthSpec {
    std::string arch = "qwen3moe";  // qwen3moe | qwen3 | llama | gemma4 | gpt-oss | deepseek2 | qwen35 | qwen35moe
    std::string name;               // general.name; default "tandem-synthetic-<arch>"
    int n_layer = 2;
    int n_embd = 256;
    int n_head = 4;
    int n_head_kv = 2;
    int head_dim = 64;
    int n_expert = 8;        // MoE only (gemma4: 0 writes a dense model)
    int n_expert_used = 2;   // MoE only
    int n_ff_exp = 256;      // MoE only: rows of one expert's gate/up
    int n_ff = 512;          // dense FFN (qwen3, llama)
    int n_vocab = 512;       // >= 256 + the special tokens
    int n_ctx = 4096;
    float rms_eps = 1e-6f;
    float rope_base = 1000000.0f;
    bool tied_output = false;  // no output.weight: the head reuses token_embd
    // Sliding windows (gemma4, gpt-oss): layer L is full when L % swa_period == swa_period - 1
    // (gpt-oss's pattern; 0: every layer slides), the others see `sliding_window` positions.
    int sliding_window = 8;
    int swa_period = 2;
    // gemma4: sliding layers' head size and KV heads (0: those of the full layers), their rope
    // base, the share of a full layer's head that rotates (a rope_freqs tensor of 1 and 1e30),
    // final logit soft-capping (0: none written, llama.cpp's default 30 applies), the last
    // layers reading earlier KV caches, per-layer embeddings (their width, 0: none), layer output
    // scales, full layers without attn_v (values = keys), the per-expert scale
    // (ffn_down_exps.scale, on weights of any type).
    int head_dim_swa = 0;
    int n_head_kv_swa = 0;
    float rope_base_swa = 10000.0f;
    float rope_partial = 1.0f;
    float final_softcap = 30.0f;
    int shared_kv_layers = 0;
    int n_embd_per_layer = 0;
    bool layer_out_scale = false;
    bool values_are_keys = false;
    bool expert_scale = false;
    // gemma4 MoE: experts as one ffn_gate_up_exps tensor.
    bool gate_up_fused = false;
    // YaRN rope scaling (any architecture; gpt-oss's real files use factor 32 over 4096): 0 = none.
    float yarn_factor = 0.0f;
    int yarn_orig_ctx = 0;
    float yarn_log_mul = 0.0f;  // deepseek2: rope.scaling.yarn_log_multiplier (0.1 · mscale_all_dim)
    // deepseek2: multi-head latent attention (head_dim is the rotated dims per head), shared
    // experts (n_expert_shared × n_ff_exp wide), leading dense layers (n_ff wide), sigmoid or
    // softmax gating, the expert-selection bias, group-limited routing, the weights' norm and
    // scale.
    int q_lora_rank = 64;  // 0: a plain attn_q (lite models: llama.cpp needs 26 or 27 layers)
    int kv_lora_rank = 64;
    int qk_nope = 32;
    int v_head_mla = 32;
    int n_expert_shared = 1;
    int n_dense_lead = 1;
    bool sigmoid_gating = true;
    bool expert_bias = true;
    int n_expert_groups = 0;
    int n_group_used = 0;
    bool expert_weights_norm = true;
    float expert_weights_scale = 2.5f;
    // qwen35, qwen35moe: gated delta-net layers (all but every full_attn_interval-th) with a
    // state of ssm_state² per value head, ssm_k_heads / ssm_v_heads heads, conv_kernel taps; full
    // layers rotate rope_dims of head_dim with interleaved sections; qwen35moe's shared expert
    // is n_ff_shexp wide (and gated).
    int ssm_state = 16;
    int ssm_k_heads = 2;
    int ssm_v_heads = 4;
    int conv_kernel = 4;
    int full_attn_interval = 4;
    int rope_dims = 0;  // 0: head_dim / 4
    std::vector<int> rope_sections = {1, 1, 1, 1};
    int n_ff_shexp = 64;
    uint64_t seed = 1;
    // Quantized tensors are random valid blocks instead of quantized random floats (much faster
    // for multi-gigabyte models).
    bool fast_random = false;

    GgmlType embd_type = GgmlType::kF32;
    GgmlType attn_type = GgmlType::kF32;
    GgmlType ffn_type = GgmlType::kF32;  // dense FFN
    GgmlType exp_gate_type = GgmlType::kF32;
    GgmlType exp_up_type = GgmlType::kF32;
    GgmlType exp_down_type = GgmlType::kF32;
    GgmlType router_type = GgmlType::kF32;
    GgmlType out_type = GgmlType::kF32;
    // When not empty, layer L uses layer_exp_types[L % size] for all its experts.
    std::vector<GgmlType> layer_exp_types;
    int threads = 0;  // 0: one per physical core
};

// Writes the model to `path` (through a temporary file), or as split parts named after it
// (gguf_split.h); returns the paths written. Throws Error on a bad spec, naming the field (e.g. a
// row length that is not a multiple of a type's block size).
std::vector<std::string> write_synthetic_model(const SynthSpec& spec, const std::string& path,
                                               const GgufSplitLayout& split = {});

// Whether this architecture has routed experts.
bool is_moe_arch(const std::string& arch);

}  // namespace tandem
