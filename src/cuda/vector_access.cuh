// Runs of consecutive values a thread loads or stores as 16-byte (8-byte for codes) accesses
// where the address allows, one by one elsewhere: a warp whose lanes hold 8 consecutive floats
// each then moves whole sectors per instruction instead of touching 32 sectors for 4 bytes each
// (the fused norm over 4096 rows: L2-bound at 84 % with scalar stores).
#pragma once

#include <cstdint>

namespace tandem::cuda {

template <int N>
__device__ __forceinline__ void load_run(const float* p, float (&v)[N]) {
    if (N % 4 == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0) {
#pragma unroll
        for (int i = 0; i < N; i += 4) {
            const float4 a = *reinterpret_cast<const float4*>(p + i);
            v[i] = a.x, v[i + 1] = a.y, v[i + 2] = a.z, v[i + 3] = a.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) v[i] = p[i];
    }
}

template <int N>
__device__ __forceinline__ void store_run(float* p, const float (&v)[N]) {
    if (N % 4 == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0) {
#pragma unroll
        for (int i = 0; i < N; i += 4)
            *reinterpret_cast<float4*>(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) p[i] = v[i];
    }
}

// Codes in [-128, 127] as int8.
template <int N>
__device__ __forceinline__ void store_codes(int8_t* p, const int (&q)[N]) {
    if (N % 8 == 0 && reinterpret_cast<uintptr_t>(p) % 8 == 0) {
#pragma unroll
        for (int i = 0; i < N; i += 8) {
            uint32_t w[2] = {0, 0};
#pragma unroll
            for (int j = 0; j < 8; ++j)
                w[j / 4] |= (static_cast<uint32_t>(q[i + j]) & 0xffu) << (8 * (j % 4));
            *reinterpret_cast<uint2*>(p + i) = make_uint2(w[0], w[1]);
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) p[i] = static_cast<int8_t>(q[i]);
    }
}

}  // namespace tandem::cuda
