// The fused residual add, RMS norm and rounding.
#include "cuda/fused_norm.h"

#include "cuda/activation_rounding.h"
#include "cuda/check.h"
#include "cuda/early_launch.cuh"
#include "cuda/q8_round.cuh"
#include "cuda/routed_sum.cuh"
#include "cuda/row_norm.cuh"
#include "cuda/vector_access.cuh"

namespace tandem::cuda {
namespace {

constexpr int kPerThread = 8;  // consecutive values of a row per thread

// One block per row, kPerThread consecutive values per thread, so that a warp holds 256
// consecutive values (a q8_K block) and four lanes a q8_0 block. kRound: 0 no rounding, 1 a
// float type (f16, bf16), 32 or 256 the q8 types' blocks. kRoutes > 0: the residual is routed's
// sum, kRoutes routes' rows in flight at once (routed_sum): 8 for rows of up to
// kManyRoutesCols values (116-odd registers, within a block of 512 threads), 2 for wider ones (a
// block of up to 1024 threads leaves 64 registers a thread); the other norms keep their few
// registers for more blocks an SM.
constexpr int64_t kManyRoutesCols = 4096;
template <int kRound, int kRoutes>
__global__ void __launch_bounds__(kRoutes == 8 ? kManyRoutesCols / kPerThread : 1024)
    residual_norm_kernel(DeviceRows x, DeviceRows residual, const float* w, float eps,
                         DeviceRows out, gpu::ActivationRounding rounding, DeviceRows rounded,
                         Q8Rows q8, RoutedRows routed) {
    const int64_t row = blockIdx.x;
    const int64_t c0 = static_cast<int64_t>(threadIdx.x) * kPerThread;
    // The norm's weights before the wait (no kernel writes them): the barrier of the block's sum
    // keeps the compiler from moving their loads ahead of it, where they would wait in turn.
    float wv[kPerThread];
    if (w != nullptr) load_run(w + c0, wv);
    wait_for_previous_kernel();
    float* xr = x.data + row * x.stride + c0;
    float v[kPerThread];
    load_run(xr, v);
    if (residual.data != nullptr || kRoutes > 0) {
        float r[kPerThread];
        if constexpr (kRoutes > 0) {
            routed_sum<kRoutes>(routed, row, c0, r);
        } else {
            load_run(residual.data + row * residual.stride + c0, r);
        }
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) v[i] += r[i];
        store_run(xr, v);
    }
    double sum = 0.0;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) sum += static_cast<double>(v[i] * v[i]);
    const float scale = rms_scale(block_sum_f64(sum), x.cols, eps);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
        v[i] = v[i] * scale;
        if (w != nullptr) v[i] = v[i] * wv[i];
    }
    store_run(out.data + row * out.stride + c0, v);
    float* r = rounded.data + row * rounded.stride + c0;
    if constexpr (kRound == 1) {
        float rv[kPerThread];
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) rv[i] = gpu::round_value(rounding, v[i]);
        store_run(r, rv);
    } else if constexpr (kRound > 1) {
        constexpr int kLanes = kRound / kPerThread;
        const int part = threadIdx.x % kLanes;
        const int64_t block0 = c0 - part * kPerThread;  // the q8 block's first column
        int8_t* codes = q8.q != nullptr ? q8.q + row * q8.q_stride + c0 : nullptr;
        float* scales = q8.q != nullptr ? q8.d + row * q8.d_stride + block0 / 32 : nullptr;
        round_q8_lanes<kPerThread, kLanes>(v, part, r, codes, scales);
    }
}

template <int kRoutes>
decltype(&residual_norm_kernel<0, kRoutes>) kernel_for(gpu::ActivationRounding r, int block) {
    return r == gpu::ActivationRounding::kNone ? residual_norm_kernel<0, kRoutes>
           : block == 1                        ? residual_norm_kernel<1, kRoutes>
           : block == 32                       ? residual_norm_kernel<32, kRoutes>
                                               : residual_norm_kernel<256, kRoutes>;
}

}  // namespace

bool residual_norm_fits(int64_t cols) {
    return cols > 0 && cols % 256 == 0 && cols <= 1024 * kPerThread;
}

void residual_norm(DeviceRows x, DeviceRows residual, const float* w, float eps, DeviceRows out,
                   GgmlType dot_type, DeviceRows rounded, const Q8Rows* q8, cudaStream_t stream,
                   const RoutedRows& routed) {
    if (x.rows == 0) return;
    const gpu::ActivationRounding r = gpu::rounding_for(dot_type);
    const int block = gpu::rounding_block(r);
    const Q8Rows codes = q8 != nullptr && block >= 32 ? *q8 : Q8Rows{};
    const unsigned threads = static_cast<unsigned>(x.cols / kPerThread);
    const auto kernel = routed.routes == nullptr    ? kernel_for<0>(r, block)
                        : x.cols <= kManyRoutesCols ? kernel_for<8>(r, block)
                                                    : kernel_for<2>(r, block);
    launch_early(kernel, x.rows, threads, 0, stream, "residual_norm", x, residual, w, eps, out, r,
                 rounded, codes, routed);
}

}  // namespace tandem::cuda
