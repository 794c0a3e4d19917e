// act(gate) · up for one value, as the CPU's glu() computes it: shared by the GLU kernels
// (elementwise.cu) and the routed gate and up products that apply it as their last step
// (matmul_int_kernels.cuh).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "cpu/elementwise.h"

namespace tandem::cuda {

// gelu_f16: ggml's fp16 GELU table on the device (gelu_table_on_device()), read by kGelu only.
__device__ __forceinline__ float glu_value(GluKind kind, float g, float u,
                                           const uint16_t* gelu_f16) {
    if (kind == GluKind::kSilu) return g / (1.0f + expf(-g)) * u;
    if (kind == GluKind::kSwigluOai) {
        // gpt-oss: the gate clamped above and the up clamped both ways at 7, alpha 1.702.
        constexpr float kAlpha = 1.702f, kLimit = 7.0f;
        const float x = fminf(g, kLimit), y = fminf(fmaxf(u, -kLimit), kLimit);
        return x / (1.0f + expf(kAlpha * (-x))) * (y + 1.0f);
    }
    // GELU through ggml's table: the gate rounded to fp16 indexes it; outside (-10, 10) the
    // CPU's shortcuts (gelu_glu).
    if (g <= -10.0f) return 0.0f;
    if (g >= 10.0f) return g * u;
    const uint16_t bits = __half_as_ushort(__float2half_rn(g));
    return __half2float(__ushort_as_half(gelu_f16[bits])) * u;
}

}  // namespace tandem::cuda
