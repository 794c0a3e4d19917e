// The gated delta-net's per-head norm, decay and delta rule on the device.
#include "cuda/delta_net.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/row_norm.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// One warp per head of every row.
__global__ void l2_norm_heads_kernel(DeviceRows x, int head_dim, float eps, int64_t n_heads) {
    const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (g >= n_heads) return;
    const int lane = threadIdx.x % 32;
    const int64_t per_row = x.cols / head_dim;
    float* p = x.data + (g / per_row) * x.stride + (g % per_row) * head_dim;
    double sum = 0.0;
    for (int i = lane; i < head_dim; i += 32) sum += static_cast<double>(p[i] * p[i]);
    const float scale = 1.0f / fmaxf(sqrtf(static_cast<float>(warp_sum_f64(sum))), eps);
    for (int i = lane; i < head_dim; i += 32) p[i] *= scale;
}

__global__ void ssm_decay_kernel(DeviceRows x, const float* bias, const float* a) {
    const int64_t n = static_cast<int64_t>(x.rows) * x.cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t h = i % x.cols;
        float* p = x.data + (i / x.cols) * x.stride + h;
        const float y = *p + bias[h];
        const float softplus = y > 20.0f ? y : logf(1.0f + expf(y));
        *p = softplus * a[h];
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

struct DeltaArgs {
    DeviceRows q, k, v, g, beta, out;
    int n_k_heads;
    int head_dim;
    float scale;
    RecurrentBatch batch;
    RecurrentState state;
};

// What one row of a span gives a warp: the key and query values of its lanes, the column's
// value, the decay and the write strength, and where the output goes.
template <int kPerLane>
struct DeltaRow {
    float k[kPerLane], q[kPerLane];
    float v, decay, beta;
    int64_t t;
};

template <int kPerLane>
__device__ __forceinline__ DeltaRow<kPerLane> load_row(const DeltaArgs& a, int64_t t, int h, int hk,
                                                       int j, int lane) {
    const int S = a.head_dim;
    const float* qt = a.q.data + t * a.q.stride + static_cast<int64_t>(hk) * S;
    const float* kt = a.k.data + t * a.k.stride + static_cast<int64_t>(hk) * S;
    DeltaRow<kPerLane> r;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
        const int i = lane + 32 * e;
        r.k[e] = i < S ? kt[i] : 0.0f;
        r.q[e] = i < S ? qt[i] : 0.0f;
    }
    r.v = a.v.data[t * a.v.stride + static_cast<int64_t>(h) * S + j];
    r.decay = expf(a.g.data[t * a.g.stride + h]);
    r.beta = a.beta.data[t * a.beta.stride + h];
    r.t = t;
    return r;
}

// Block (columns blockIdx.x · kWarps .., value head blockIdx.y, span blockIdx.z): warp w holds
// column j of the head's state, lane l its values i = l + 32 e (e < kPerLane), in registers
// through the span's rows in order. Per row: the decay, the column's product with k (a warp
// sum), its delta, the update, and the column's product with q: out[t][h · S + j]. The next
// row's inputs are loaded while this one's sums run.
template <int kPerLane>
__global__ void __launch_bounds__(kThreads) delta_net_kernel(const __grid_constant__ DeltaArgs a) {
    const int S = a.head_dim;
    const int j = blockIdx.x * kWarps + threadIdx.x / 32;
    const int h = blockIdx.y, lane = threadIdx.x % 32;
    const SequenceSpan span = a.batch.spans[blockIdx.z];
    if (span.count == 0 || j >= S) return;  // whole warps: no block barrier below
    const int hk = h % a.n_k_heads;
    const int32_t* rows = a.batch.rows + span.first;
    float* column =
        a.state.data + span.seq * a.state.seq_stride + (static_cast<int64_t>(h) * S + j) * S;
    float m[kPerLane];
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
        const int i = lane + 32 * e;
        m[e] = !span.reset && i < S ? column[i] : 0.0f;
    }
    DeltaRow<kPerLane> next = load_row<kPerLane>(a, rows[0], h, hk, j, lane);
    for (int r = 0; r < span.count; ++r) {
        const DeltaRow<kPerLane> row = next;
        if (r + 1 < span.count) next = load_row<kPerLane>(a, rows[r + 1], h, hk, j, lane);
        float sk = 0.0f;
#pragma unroll
        for (int e = 0; e < kPerLane; ++e) {
            m[e] = __fmul_rn(m[e], row.decay);
            sk += m[e] * row.k[e];
        }
        const float d = __fmul_rn(__fsub_rn(row.v, warp_sum(sk)), row.beta);
        float sq = 0.0f;
#pragma unroll
        for (int e = 0; e < kPerLane; ++e) {
            m[e] = __fadd_rn(m[e], __fmul_rn(row.k[e], d));
            sq += m[e] * row.q[e];
        }
        sq = warp_sum(sq);
        if (lane == 0)
            a.out.data[row.t * a.out.stride + static_cast<int64_t>(h) * S + j] = sq * a.scale;
    }
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
        const int i = lane + 32 * e;
        if (i < S) column[i] = m[e];
    }
}

}  // namespace

void l2_norm_heads(DeviceRows x, int head_dim, float eps, cudaStream_t stream) {
    const int64_t n_heads = static_cast<int64_t>(x.rows) * (x.cols / head_dim);
    if (n_heads == 0) return;
    l2_norm_heads_kernel<<<static_cast<unsigned>((n_heads + kWarps - 1) / kWarps), kThreads, 0,
                           stream>>>(x, head_dim, eps, n_heads);
    check_launch("l2_norm_heads");
}

void ssm_decay(DeviceRows x, const float* bias, const float* a, cudaStream_t stream) {
    const int64_t n = static_cast<int64_t>(x.rows) * x.cols;
    if (n == 0) return;
    ssm_decay_kernel<<<static_cast<unsigned>(
                           std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)),
                       kThreads, 0, stream>>>(x, bias, a);
    check_launch("ssm_decay");
}

void delta_net(DeviceRows q, DeviceRows k, DeviceRows v, DeviceRows g, DeviceRows beta,
               int n_k_heads, int n_v_heads, int head_dim, float scale, const RecurrentBatch& batch,
               RecurrentState state, DeviceRows out, cudaStream_t stream) {
    if (q.rows == 0 || batch.n_spans == 0) return;
    if (head_dim > kMaxDeltaHeadDim) check(cudaErrorInvalidValue, "delta_net: head size");
    const DeltaArgs a{q, k, v, g, beta, out, n_k_heads, head_dim, scale, batch, state};
    const dim3 grid(static_cast<unsigned>((head_dim + kWarps - 1) / kWarps),
                    static_cast<unsigned>(n_v_heads), static_cast<unsigned>(batch.n_spans));
    if (head_dim <= 32) {
        delta_net_kernel<1><<<grid, kThreads, 0, stream>>>(a);
    } else if (head_dim <= 64) {
        delta_net_kernel<2><<<grid, kThreads, 0, stream>>>(a);
    } else if (head_dim <= 128) {
        delta_net_kernel<4><<<grid, kThreads, 0, stream>>>(a);
    } else {
        delta_net_kernel<8><<<grid, kThreads, 0, stream>>>(a);
    }
    check_launch("delta_net");
}

}  // namespace tandem::cuda
