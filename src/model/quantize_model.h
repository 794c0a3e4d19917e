// `tandem quantize`: rewrites a GGUF model with its weights in other ggml types (for example
// q8_0 attention and embeddings, q4_K experts), metadata copied and general.file_type set.
#pragma once

#include <string>
#include <vector>

#include "formats/ggml_type.h"
#include "gguf/gguf_reader.h"

namespace tandem {

// The type each class of weight gets. Norms, biases and other vectors, and the router
// (ffn_gate_inp, as llama-quantize leaves it), keep their type.
struct QuantizeSpec {
    GgmlType embd = GgmlType::kQ8_0;     // token_embd and other embeddings
    GgmlType attn = GgmlType::kQ8_0;     // attn_* matrices (and every other matrix)
    GgmlType ffn = GgmlType::kQ8_0;      // dense FFN and shared experts
    GgmlType experts = GgmlType::kQ4_K;  // *_exps
    GgmlType output = GgmlType::kQ8_0;   // output.weight
};

struct QuantizedTensor {
    std::string name;
    GgmlType from;
    GgmlType to;
    std::string note;  // why `to` differs from the class's type, or ""
};

// The type every tensor of `file` gets under `spec`. A matrix whose rows do not split into
// blocks of its class's type falls back to q8_0 (32-value blocks), else keeps its type.
std::vector<QuantizedTensor> plan_quantization(const GgufFile& file, const QuantizeSpec& spec);

// llama.cpp's general.file_type (llama_ftype) for a model whose experts (or, without experts,
// attention) are of `main`: the "M" mixes for the k-quants, as the other tensors here are of
// higher precision.
uint32_t file_type_for(GgmlType main);

// Quantizes `in` to `out` (written through a temporary file). Rows are dequantized to f32 and
// quantized with the format table's quantizer; a tensor whose type does not change is copied
// byte for byte. Throws Error naming the tensor on a type without a quantizer.
std::vector<QuantizedTensor> quantize_model(const std::string& in, const std::string& out,
                                            const QuantizeSpec& spec, int threads = 1);

}  // namespace tandem
