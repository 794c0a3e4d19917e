// act(gate) · up, as cpu/elementwise.h's glu() computes it: written once for the elementwise
// kernels (elementwise.cu) and the down projection that makes its own activations
// (matmul_int_kernels.cuh), so that the two give the same bits.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cpu/elementwise.h"

namespace tandem::cuda {

// GELU reads ggml's fp16 table at gelu_table (the device copy: elementwise.h's
// gelu_table_on_device(); the other kinds ignore it).
__device__ __forceinline__ float glu_value(GluKind kind, float g, float u,
                                           const uint16_t* gelu_table) {
    if (kind == GluKind::kSilu) return g / (1.0f + expf(-g)) * u;
    if (kind == GluKind::kSwigluOai) {
        // gpt-oss: the gate clamped above and the up clamped both ways at 7, alpha 1.702.
        constexpr float kAlpha = 1.702f, kLimit = 7.0f;
        const float x = fminf(g, kLimit), y = fminf(fmaxf(u, -kLimit), kLimit);
        return x / (1.0f + expf(kAlpha * (-x))) * (y + 1.0f);
    }
    // GELU through the table: the gate rounded to fp16 indexes it; outside (-10, 10) the CPU's
    // shortcuts (gelu_glu).
    if (g <= -10.0f) return 0.0f;
    if (g >= 10.0f) return g * u;
    const uint16_t bits = __half_as_ushort(__float2half_rn(g));
    return __half2float(__ushort_as_half(gelu_table[bits])) * u;
}

}  // namespace tandem::cuda
