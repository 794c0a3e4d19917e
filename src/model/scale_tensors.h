// The loader rules for NVFP4 second-level scale tensors, shared by every architecture:
// `<name>.scale` / `<name>.input_scale` may only sit next to an NVFP4 weight `<name>.weight`,
// with shape {1} (a dense tensor) or {n_expert} (stacked experts), never on a merged
// ffn_gate_up_exps tensor. `.input_scale` is read and ignored, as in llama.cpp.
#pragma once

#include <span>
#include <string_view>

namespace tandem {

class GgufFile;

// Checks every scale tensor of the file; throws Error naming the offending tensor. Tensors whose
// names end with one of `exempt` are an architecture's own parameters (Gemma-4's router scale and
// per-expert scale on weights of any type), checked where they are bound.
void check_scale_tensors(const GgufFile& file, int n_expert, std::span<const std::string_view> exempt = {});

// The f32 values of `<weight name without .weight>.scale`, or an empty vector when absent.
// `expected` is 1 or n_expert (checked by check_scale_tensors first).
bool has_scale_tensor(const GgufFile& file, std::string_view weight_name);

}  // namespace tandem
