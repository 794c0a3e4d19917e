// Row-wise operations on device activations.
#include "cuda/elementwise.h"

#include <cfloat>

#include "cuda/check.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_sum(float v) {
    __shared__ float partial[32];
    v = warp_sum(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    return warp_sum(v);
}

// One warp per group of `group` values (a row or a head).
__global__ void rms_norm_kernel(DeviceRows x, const float* w, int64_t group, float eps, DeviceRows out,
                                int64_t n_groups) {
    const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (g >= n_groups) return;
    const int lane = threadIdx.x % 32;
    const int64_t per_row = x.cols / group;
    const int64_t r = g / per_row, off = (g % per_row) * group;
    const float* src = x.data + r * x.stride + off;
    float* dst = out.data + r * out.stride + off;
    float sum = 0.0f;
    for (int64_t i = lane; i < group; i += 32) sum += src[i] * src[i];
    sum = warp_sum(sum);
    const float scale = 1.0f / sqrtf(sum / static_cast<float>(group) + eps);
    const float* wg = w;  // the weights span one group
    for (int64_t i = lane; i < group; i += 32) {
        const float v = src[i] * scale;
        dst[i] = wg != nullptr ? v * wg[i] : v;
    }
}

// Whole rows longer than a warp comfortably covers: one block per row.
__global__ void rms_norm_row_kernel(DeviceRows x, const float* w, float eps, DeviceRows out) {
    const float* src = x.data + static_cast<int64_t>(blockIdx.x) * x.stride;
    float* dst = out.data + static_cast<int64_t>(blockIdx.x) * out.stride;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < x.cols; i += blockDim.x) sum += src[i] * src[i];
    sum = block_sum(sum);
    const float scale = 1.0f / sqrtf(sum / static_cast<float>(x.cols) + eps);
    for (int64_t i = threadIdx.x; i < x.cols; i += blockDim.x) {
        const float v = src[i] * scale;
        dst[i] = w != nullptr ? v * w[i] : v;
    }
}

template <typename Op>
__global__ void rows_kernel(int rows, int64_t cols, Op op) {
    const int64_t n = static_cast<int64_t>(rows) * cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        op(static_cast<int>(i / cols), i % cols);
    }
}

template <typename Op>
void for_each_element(int rows, int64_t cols, Op op, cudaStream_t stream, const char* name) {
    const int64_t n = static_cast<int64_t>(rows) * cols;
    if (n == 0) return;
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    rows_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(rows, cols, op);
    check_launch(name);
}

__global__ void argmax_kernel(DeviceRows x, int32_t* ids) {
    const float* row = x.data + static_cast<int64_t>(blockIdx.x) * x.stride;
    float best = -FLT_MAX;
    int64_t best_i = 0;
    for (int64_t i = threadIdx.x; i < x.cols; i += blockDim.x) {
        if (row[i] > best) best = row[i], best_i = i;  // strided ascending: the first of equals
    }
    __shared__ float values[kThreads];
    __shared__ int64_t index[kThreads];
    values[threadIdx.x] = best;
    index[threadIdx.x] = best_i;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float v = values[threadIdx.x + s];
            const int64_t j = index[threadIdx.x + s];
            if (v > values[threadIdx.x] || (v == values[threadIdx.x] && j < index[threadIdx.x])) {
                values[threadIdx.x] = v;
                index[threadIdx.x] = j;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) ids[blockIdx.x] = static_cast<int32_t>(index[0]);
}

}  // namespace

void rms_norm(DeviceRows x, const float* w, int64_t group, float eps, DeviceRows out, cudaStream_t stream) {
    if (x.rows == 0) return;
    if (group == x.cols && x.cols > 1024) {
        rms_norm_row_kernel<<<x.rows, kThreads, 0, stream>>>(x, w, eps, out);
    } else {
        const int64_t n_groups = static_cast<int64_t>(x.rows) * (x.cols / group);
        const int warps = kThreads / 32;
        rms_norm_kernel<<<static_cast<unsigned>((n_groups + warps - 1) / warps), kThreads, 0, stream>>>(
            x, w, group, eps, out, n_groups);
    }
    check_launch("rms_norm");
}

void add_bias(DeviceRows x, const float* bias, cudaStream_t stream) {
    for_each_element(
        x.rows, x.cols, [=] __device__(int r, int64_t c) { x.data[r * x.stride + c] += bias[c]; }, stream,
        "add_bias");
}

void add(DeviceRows y, DeviceRows x, cudaStream_t stream) {
    for_each_element(
        y.rows, y.cols, [=] __device__(int r, int64_t c) { y.data[r * y.stride + c] += x.data[r * x.stride + c]; },
        stream, "add");
}

void glu(GluKind kind, DeviceRows gate, DeviceRows up, DeviceRows out, cudaStream_t stream) {
    if (kind == GluKind::kSilu) {
        for_each_element(
            gate.rows, gate.cols,
            [=] __device__(int r, int64_t c) {
                const float g = gate.data[r * gate.stride + c];
                out.data[r * out.stride + c] = g / (1.0f + expf(-g)) * up.data[r * up.stride + c];
            },
            stream, "glu_silu");
    } else {
        for_each_element(
            gate.rows, gate.cols,
            [=] __device__(int r, int64_t c) {
                constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
                constexpr float kCoef = 0.044715f;
                const float g = gate.data[r * gate.stride + c];
                const float gelu = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * g * (1.0f + kCoef * g * g)));
                out.data[r * out.stride + c] = gelu * up.data[r * up.stride + c];
            },
            stream, "glu_gelu");
    }
}

void gather_rows(DeviceRows x, const int32_t* rows, DeviceRows out, cudaStream_t stream) {
    for_each_element(
        out.rows, out.cols,
        [=] __device__(int r, int64_t c) { out.data[r * out.stride + c] = x.data[rows[r] * x.stride + c]; },
        stream, "gather_rows");
}

void argmax_rows(DeviceRows x, int32_t* ids, cudaStream_t stream) {
    if (x.rows == 0) return;
    argmax_kernel<<<x.rows, kThreads, 0, stream>>>(x, ids);
    check_launch("argmax_rows");
}

}  // namespace tandem::cuda
