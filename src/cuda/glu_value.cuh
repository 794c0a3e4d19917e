// act(gate) · up for the gated activations that need no table (SiLU, gpt-oss's clamped SwiGLU),
// as cpu/elementwise.h computes them: shared by the elementwise kernels (elementwise.cu, which
// adds GELU through its table) and the down projection that makes its own activations
// (matmul_int_kernels.cuh).
#pragma once

#include "cuda/elementwise.h"

namespace tandem::cuda {

// act(gate) · up of a glu_direct() kind.
__device__ __forceinline__ float glu_value_direct(GluKind kind, float g, float u) {
    if (kind == GluKind::kSilu) return g / (1.0f + expf(-g)) * u;
    // gpt-oss: the gate clamped above and the up clamped both ways at 7, alpha 1.702.
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;
    const float x = fminf(g, kLimit), y = fminf(fmaxf(u, -kLimit), kLimit);
    return x / (1.0f + expf(kAlpha * (-x))) * (y + 1.0f);
}

}  // namespace tandem::cuda
