// `tandem bench kernels --device cuda`: the GPU's decode products per weight type in GB/s
// against the card's copy bandwidth (and the prefill tiles' TFLOP/s). Only in CUDA builds.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/ggml_type.h"

namespace tandem::cli {

// Prints the table (or JSON) for these types; throws Error when there is no GPU.
void run_gpu_kernel_bench(const std::vector<GgmlType>& types, int64_t cols, double mib, int rounds,
                          bool json);

}  // namespace tandem::cli
