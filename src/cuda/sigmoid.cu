// Sigmoids on device activations.
#include "cuda/sigmoid.h"

#include <algorithm>

#include "cuda/check.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid_value(float x) {
    return 1.0f / (1.0f + expf(-x));
}

__global__ void sigmoid_kernel(DeviceRows x) {
    const int64_t n = static_cast<int64_t>(x.rows) * x.cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float* p = x.data + (i / x.cols) * x.stride + i % x.cols;
        *p = sigmoid_value(*p);
    }
}

// gate_cols: x.cols (one gate per value) or 1 (one per row).
__global__ void mul_sigmoid_kernel(DeviceRows x, DeviceRows gate) {
    const int64_t n = static_cast<int64_t>(x.rows) * x.cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = i / x.cols, c = i % x.cols;
        const float g = gate.data[r * gate.stride + (gate.cols == 1 ? 0 : c)];
        x.data[r * x.stride + c] *= sigmoid_value(g);
    }
}

unsigned blocks_for(const DeviceRows& x) {
    const int64_t n = static_cast<int64_t>(x.rows) * x.cols;
    return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
}

}  // namespace

void sigmoid(DeviceRows x, cudaStream_t stream) {
    if (x.rows == 0 || x.cols == 0) return;
    sigmoid_kernel<<<blocks_for(x), kThreads, 0, stream>>>(x);
    check_launch("sigmoid");
}

void mul_sigmoid(DeviceRows x, DeviceRows gate, cudaStream_t stream) {
    if (x.rows == 0 || x.cols == 0) return;
    mul_sigmoid_kernel<<<blocks_for(x), kThreads, 0, stream>>>(x, gate);
    check_launch("mul_sigmoid");
}

}  // namespace tandem::cuda
