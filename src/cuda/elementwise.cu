// Row-wise operations on device activations.
#include "cuda/elementwise.h"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <mutex>

#include <cuda_fp16.h>

#include "cuda/activation_rounding.h"
#include "cuda/check.h"
#include "cuda/early_launch.cuh"
#include "cuda/glu_value.cuh"
#include "cuda/q8_round.cuh"
#include "cuda/row_norm.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

// One warp per group of `group` values (a row or a head).
__global__ void rms_norm_kernel(DeviceRows x, const float* w, int64_t group, float eps,
                                DeviceRows out, int64_t n_groups) {
    const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (g >= n_groups) return;
    const int lane = threadIdx.x % 32;
    const int64_t per_row = x.cols / group;
    const int64_t r = g / per_row, off = (g % per_row) * group;
    const float* src = x.data + r * x.stride + off;
    double sum = 0.0;
    for (int64_t i = lane; i < group; i += 32) sum += static_cast<double>(src[i] * src[i]);
    rms_norm_apply(src, w, group, rms_scale(warp_sum_f64(sum), group, eps),
                   out.data + r * out.stride + off, lane, 32);
}

// Whole rows longer than a warp comfortably covers: one block per row.
__global__ void rms_norm_row_kernel(DeviceRows x, const float* w, float eps, DeviceRows out) {
    const float* src = x.data + static_cast<int64_t>(blockIdx.x) * x.stride;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < x.cols; i += blockDim.x)
        sum += static_cast<double>(src[i] * src[i]);
    rms_norm_apply(src, w, x.cols, rms_scale(block_sum_f64(sum), x.cols, eps),
                   out.data + static_cast<int64_t>(blockIdx.x) * out.stride, threadIdx.x,
                   blockDim.x);
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
    rows_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
        rows, cols, op);
    check_launch(name);
}

// The argmax of a row as one 64-bit key per row that atomicMax can merge across blocks: the
// value's bits made unsigned-orderable above, the complement of its index below (so that among
// equal values the lowest index is largest). argmax_index() reads the index back.
__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t i) {
    const uint32_t bits = __float_as_uint(v);
    const uint32_t ordered = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
    return (static_cast<unsigned long long>(ordered) << 32) |
           (0xffffffffu - static_cast<uint32_t>(i));
}

// Block (blockIdx.x, row blockIdx.y) scans kArgmaxValues values of the row, kArgmaxUnroll loads
// in flight per thread (a vocabulary row over one block was ~100 µs of latency-bound loads),
// then merges its best into the row's key. NaNs never win, as in a plain `>` scan.
constexpr int kArgmaxUnroll = 16;
constexpr int64_t kArgmaxValues = static_cast<int64_t>(kThreads) * kArgmaxUnroll;
__global__ void argmax_kernel(DeviceRows x, unsigned long long* keys) {
    const float* row = x.data + static_cast<int64_t>(blockIdx.y) * x.stride;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kArgmaxValues + threadIdx.x;
    float v[kArgmaxUnroll];
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
        const int64_t i = first + u * kThreads;
        v[u] = i < x.cols ? row[i] : -FLT_MAX;
    }
    float best = -FLT_MAX;
    int64_t best_i = first < x.cols ? first : 0;
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) {
        if (v[u] > best) best = v[u], best_i = first + u * kThreads;  // ascending: first of equals
    }
    unsigned long long key = argmax_key(best, best_i);
    for (int o = 16; o > 0; o >>= 1) key = max(key, __shfl_xor_sync(0xffffffffu, key, o));
    __shared__ unsigned long long warp_best[kThreads / 32];
    if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = key;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kThreads / 32; ++w) key = max(key, warp_best[w]);
        atomicMax(&keys[blockIdx.y], key);
    }
}

// ggml's fp16 GELU table (cpu/elementwise.h's gelu_fp16_table), copied by upload_gelu_table().
__device__ uint16_t gelu_f16[65536];
std::atomic<bool> gelu_uploaded{false};
const uint16_t* gelu_address = nullptr;  // set before gelu_uploaded

void require_gelu_table(GluKind kind) {
    if (kind == GluKind::kGelu && !gelu_uploaded.load(std::memory_order_acquire))
        check(cudaErrorInvalidValue, "glu: GELU before cuda::upload_gelu_table()");
}

// Where the rounding kernel reads its values: rows of x, or act(gate) · up computed on the fly.
struct RowsSource {
    DeviceRows x;
    __device__ float at(int64_t row, int64_t col) const { return x.data[row * x.stride + col]; }
};
struct GluSource {
    GluKind kind;
    DeviceRows gate, up;
    __device__ float at(int64_t row, int64_t col) const {
        return glu_value(kind, gate.data[row * gate.stride + col], up.data[row * up.stride + col],
                         gelu_f16);
    }
};

// Warp per block of 32 (q8_0, q8_1) or 256 (q8_K) values (cuda/q8_round.cuh).
template <int kValues, typename Source>
__global__ void round_q8_kernel(Source src, int64_t cols, DeviceRows out, int64_t n_blocks,
                                Q8Rows q8) {
    constexpr int kPerLane = kValues / 32;
    wait_for_previous_kernel();
    const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (g >= n_blocks) return;
    const int lane = threadIdx.x % 32;
    const int64_t per_row = cols / kValues;
    const int64_t row = g / per_row, b = g % per_row;
    const int64_t col0 = b * kValues + lane * kPerLane;
    int8_t* codes = q8.q != nullptr ? q8.q + row * q8.q_stride + col0 : nullptr;
    float* scales = q8.q != nullptr ? q8.d + row * q8.d_stride + b * (kValues / 32) : nullptr;
    float v[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) v[i] = src.at(row, col0 + i);
    round_q8_lanes<kPerLane, 32>(v, lane, out.data + row * out.stride + col0, codes, scales);
}

// Rounds (and codes) the values of src, rows × cols, through a q8 type's blocks of kValues.
template <typename Source>
void launch_round_q8(int block, Source src, int rows, int64_t cols, DeviceRows out, Q8Rows codes,
                     cudaStream_t stream) {
    const int64_t n_blocks = static_cast<int64_t>(rows) * (cols / block);
    if (n_blocks == 0) return;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>((n_blocks + 7) / 8, 1 << 30));
    launch_early(block == 32 ? round_q8_kernel<32, Source> : round_q8_kernel<256, Source>, grid,
                 256, 0, stream, "round_activations", src, cols, out, n_blocks, codes);
}

__global__ void round_value_kernel(DeviceRows x, gpu::ActivationRounding r, DeviceRows out) {
    const int64_t n = static_cast<int64_t>(x.rows) * x.cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t row = i / x.cols, c = i % x.cols;
        out.data[row * out.stride + c] = gpu::round_value(r, x.data[row * x.stride + c]);
    }
}

}  // namespace

bool has_q8_codes(GgmlType dot_type) {
    return gpu::rounding_block(gpu::rounding_for(dot_type)) >= 32;
}

void round_activations(DeviceRows x, GgmlType dot_type, DeviceRows out, cudaStream_t stream,
                       const Q8Rows* q8) {
    const gpu::ActivationRounding r = gpu::rounding_for(dot_type);
    const int block = gpu::rounding_block(r);
    if (block >= 32) {
        launch_round_q8(block, RowsSource{x}, x.rows, x.cols, out, q8 != nullptr ? *q8 : Q8Rows{},
                        stream);
        return;
    }
    const int64_t n = static_cast<int64_t>(x.rows) * x.cols;
    if (n == 0) return;
    round_value_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535)), 256, 0,
                         stream>>>(x, r, out);
    check_launch("round_activations");
}

void glu_round_activations(GluKind kind, DeviceRows gate, DeviceRows up, GgmlType dot_type,
                           DeviceRows out, const Q8Rows& q8, cudaStream_t stream) {
    require_gelu_table(kind);
    launch_round_q8(gpu::rounding_block(gpu::rounding_for(dot_type)), GluSource{kind, gate, up},
                    gate.rows, gate.cols, out, q8, stream);
}

void rms_norm(DeviceRows x, const float* w, int64_t group, float eps, DeviceRows out,
              cudaStream_t stream) {
    if (x.rows == 0) return;
    if (group == x.cols && x.cols > 1024) {
        rms_norm_row_kernel<<<x.rows, kThreads, 0, stream>>>(x, w, eps, out);
    } else {
        const int64_t n_groups = static_cast<int64_t>(x.rows) * (x.cols / group);
        const int warps = kThreads / 32;
        rms_norm_kernel<<<static_cast<unsigned>((n_groups + warps - 1) / warps), kThreads, 0,
                          stream>>>(x, w, group, eps, out, n_groups);
    }
    check_launch("rms_norm");
}

void add_bias(DeviceRows x, const float* bias, cudaStream_t stream) {
    for_each_element(
        x.rows, x.cols, [=] __device__(int r, int64_t c) { x.data[r * x.stride + c] += bias[c]; },
        stream, "add_bias");
}

void add(DeviceRows y, DeviceRows x, cudaStream_t stream) {
    for_each_element(
        y.rows, y.cols,
        [=] __device__(int r, int64_t c) { y.data[r * y.stride + c] += x.data[r * x.stride + c]; },
        stream, "add");
}

void glu(GluKind kind, DeviceRows gate, DeviceRows up, DeviceRows out, cudaStream_t stream) {
    require_gelu_table(kind);
    for_each_element(
        gate.rows, gate.cols,
        [=] __device__(int r, int64_t c) {
            out.data[r * out.stride + c] = glu_value(kind, gate.data[r * gate.stride + c],
                                                     up.data[r * up.stride + c], gelu_f16);
        },
        stream, "glu");
}

void upload_gelu_table() {
    static std::once_flag once;
    std::call_once(once, [] {
        check(cudaMemcpyToSymbol(gelu_f16, gelu_fp16_table(), sizeof(uint16_t) * 65536),
              "uploading the GELU table");
        // Its address now, outside any stream capture that a product taking it may run in.
        void* address = nullptr;
        check(cudaGetSymbolAddress(&address, gelu_f16), "the GELU table's address");
        gelu_address = static_cast<const uint16_t*>(address);
        gelu_uploaded.store(true, std::memory_order_release);
    });
}

const uint16_t* gelu_table_on_device() {
    require_gelu_table(GluKind::kGelu);
    return gelu_address;
}

void scale_rows(DeviceRows x, float s, cudaStream_t stream) {
    for_each_element(
        x.rows, x.cols, [=] __device__(int r, int64_t c) { x.data[r * x.stride + c] *= s; },
        stream, "scale");
}

void mul_rows(DeviceRows x, const float* w, int64_t w_size, cudaStream_t stream) {
    if (w_size != x.cols && w_size != 1)
        check(cudaErrorInvalidValue, "mul_rows: a vector neither one value nor a row long");
    const bool one = w_size == 1;
    for_each_element(
        x.rows, x.cols,
        [=] __device__(int r, int64_t c) { x.data[r * x.stride + c] *= w[one ? 0 : c]; }, stream,
        "mul");
}

void softcap_rows(DeviceRows x, float cap, cudaStream_t stream) {
    const float inv = 1.0f / cap;  // as the CPU: the product by the reciprocal
    for_each_element(
        x.rows, x.cols,
        [=] __device__(int r, int64_t c) {
            float& v = x.data[r * x.stride + c];
            v = tanhf(v * inv) * cap;
        },
        stream, "softcap");
}

void copy_rows(DeviceRows src, DeviceRows dst, cudaStream_t stream) {
    for_each_element(
        src.rows, src.cols,
        [=] __device__(int r, int64_t c) {
            dst.data[r * dst.stride + c] = src.data[r * src.stride + c];
        },
        stream, "copy_rows");
}

void gather_rows(DeviceRows x, const int32_t* rows, DeviceRows out, cudaStream_t stream) {
    for_each_element(
        out.rows, out.cols,
        [=] __device__(int r, int64_t c) {
            out.data[r * out.stride + c] = x.data[rows[r] * x.stride + c];
        },
        stream, "gather_rows");
}

void argmax_rows(DeviceRows x, uint64_t* keys, cudaStream_t stream) {
    if (x.rows == 0) return;
    check(cudaMemsetAsync(keys, 0, sizeof(uint64_t) * x.rows, stream), "argmax_rows");
    const dim3 grid(static_cast<unsigned>((x.cols + kArgmaxValues - 1) / kArgmaxValues),
                    static_cast<unsigned>(x.rows));
    argmax_kernel<<<grid, kThreads, 0, stream>>>(x, reinterpret_cast<unsigned long long*>(keys));
    check_launch("argmax_rows");
}

}  // namespace tandem::cuda
