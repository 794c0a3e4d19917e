// Activations rounded through q8_0 / q8_1 (blocks of 32) or q8_K (blocks of 256) by the lanes of
// a warp that hold a block between them: the formats' quantizers (cuda/activation_rounding.h)
// with their scans split over the lanes. Shared by the rounding kernels (elementwise.cu) and the
// fused residual add, norm and rounding (fused_norm.cu).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "cuda/vector_access.cuh"

namespace tandem::cuda {

// One block of kPerLane · kLanes values (32: q8_0 and q8_1, the same values; 256: q8_K) held by
// kLanes consecutive lanes (the group aligned to kLanes within the warp; every lane of the warp
// takes part), kPerLane consecutive values each, lane `part` of the group holding values
// [part · kPerLane, part · kPerLane + kPerLane). The largest magnitude (and, for q8_K, the first
// value that has it, whose sign sets the scale) comes from a reduction over the group, which
// picks what the sequential scan picks. Writes the rounded values to dst, the codes to codes and
// the scale of every 32 values at scales[i / 32] (q8_K's one scale repeated) by the lane holding
// value i, each where not null.
template <int kPerLane, int kLanes>
__device__ __forceinline__ void round_q8_lanes(const float (&v)[kPerLane], int part, float* dst,
                                               int8_t* codes, float* scales) {
    constexpr int kValues = kPerLane * kLanes;
    static_assert(kValues == 32 || kValues == 256, "q8 blocks hold 32 or 256 values");
    float amax = 0.0f, max = 0.0f;  // max: the value of largest magnitude (the first of equals)
    int index = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]), max = v[i], index = part * kPerLane + i;
    }
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
        const float om = __shfl_xor_sync(0xffffffffu, max, o);
        const int oi = __shfl_xor_sync(0xffffffffu, index, o);
        if (oa > amax || (oa == amax && oi < index)) amax = oa, max = om, index = oi;
    }
    const bool writes_scale = scales != nullptr && (part * kPerLane) % 32 == 0;
    float* scale = writes_scale ? scales + part * kPerLane / 32 : nullptr;
    if constexpr (kValues == 32) {
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const float dh = __half2float(__float2half_rn(d));
        float out[kPerLane];
        int q[kPerLane];
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            q[i] = __float2int_rn(__fmul_rn(v[i], id));
            out[i] = __fmul_rn(dh, static_cast<float>(q[i]));
        }
        if (dst != nullptr) store_run(dst, out);
        if (codes != nullptr) store_codes(codes, q);
        if (scale != nullptr) *scale = dh;
    } else {
        // All zeros: codes and values 0, scale 0.
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
        float out[kPerLane];
        int q[kPerLane];
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            q[i] = min(127, __float2int_rn(__fmul_rn(iscale, v[i])));
            out[i] = __fmul_rn(d, static_cast<float>(q[i]));
        }
        if (dst != nullptr) store_run(dst, out);
        if (codes != nullptr) store_codes(codes, q);
        if (scale != nullptr) *scale = d;
    }
}

}  // namespace tandem::cuda
