// Device helpers shared by the kernels that norm rows or heads (elementwise.cu, fused_norm.cu,
// rope.cu): f64 sums over a warp or a block, and the RMS norm's scaling, as the CPU computes it.
#pragma once

#include <cstdint>

namespace tandem::cuda {

__device__ __forceinline__ double warp_sum_f64(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block in f64 (blockDim.x a multiple of 32); every thread gets the result.
__device__ __forceinline__ double block_sum_f64(double v) {
    __shared__ double partial[32];
    v = warp_sum_f64(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < blockDim.x / 32 ? partial[lane] : 0.0;
    return warp_sum_f64(v);
}

// The factor 1 / sqrt(mean(x²) + eps) of n values whose squares (each squared in f32) sum to
// sum_sq in f64: the CPU's (and ggml's) rms_norm.
__device__ __forceinline__ float rms_scale(double sum_sq, int64_t n, float eps) {
    const float mean = static_cast<float>(sum_sq / static_cast<double>(n));
    return 1.0f / sqrtf(mean + eps);
}

// dst[i] = (src[i] · scale) · w[i] (w may be nullptr) for i = first, first + step, ... < n.
__device__ __forceinline__ void rms_norm_apply(const float* src, const float* w, int64_t n,
                                               float scale, float* dst, int first, int step) {
    for (int64_t i = first; i < n; i += step) {
        const float v = src[i] * scale;
        dst[i] = w != nullptr ? v * w[i] : v;
    }
}

}  // namespace tandem::cuda
