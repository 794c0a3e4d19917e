// Sigmoids on device activations, as the CPU backend computes them (ggml's sigmoid, and sigmoid
// then mul): the gated delta-net's write strength, and the output gates of qwen3.5's attention
// and shared expert.
#pragma once

#include <cuda_runtime.h>

#include "cuda/elementwise.h"

namespace tandem::cuda {

// x = 1 / (1 + exp(-x)).
void sigmoid(DeviceRows x, cudaStream_t stream);
// x[t][i] *= σ(gate[t][i]) (gate as wide as x), or x[t][i] *= σ(gate[t][0]) (gate one column
// wide).
void mul_sigmoid(DeviceRows x, DeviceRows gate, cudaStream_t stream);

}  // namespace tandem::cuda
