// Random-weight GGUF models that llama.cpp can load, for tests, demos and benchmarks
// (`tandem synth`): qwen3moe, qwen3 and llama, any weight type per tensor class.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/ggml_type.h"
#include "gguf/gguf_split.h"

namespace tandem {

struct SynthSpec {
    std::string arch = "qwen3moe";  // qwen3moe | qwen3 | llama
    std::string name;               // general.name; default "tandem-synthetic-<arch>"
    int n_layer = 2;
    int n_embd = 256;
    int n_head = 4;
    int n_head_kv = 2;
    int head_dim = 64;
    int n_expert = 8;        // MoE only
    int n_expert_used = 2;   // MoE only
    int n_ff_exp = 256;      // MoE only: rows of one expert's gate/up
    int n_ff = 512;          // dense FFN (qwen3, llama)
    int n_vocab = 512;       // >= 256 + the special tokens
    int n_ctx = 4096;
    float rms_eps = 1e-6f;
    float rope_base = 1000000.0f;
    bool tied_output = false;  // no output.weight: the head reuses token_embd
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
