// Attention on the device.
#include "cuda/attention.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>

#include "cuda/check.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 128;

struct AttentionArgs {
    const void* k;
    const void* v;
    int n_seq, n_ctx, n_kv, dk, dv;
    int layer;
    int n_head;
    int group;  // query heads per kv head
    float scale;
    int n_chunks;
    int chunk;   // positions per chunk
    int token0;  // first query of this slice
    const float* q;
    int64_t q_stride;
    const TokenPlace* places;
    float* values;
    float* stats;
};

template <bool kF16>
__device__ __forceinline__ float load_value(const void* base, int64_t offset) {
    if constexpr (kF16) {
        return __half2float(static_cast<const __half*>(base)[offset]);
    } else {
        return static_cast<const float*>(base)[offset];
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

constexpr int kWarps = kThreads / 32;
constexpr int kMaxDimsPerLane = kMaxHeadDim / 32;

// Block (chunk, head, query of the slice): the scores of the chunk's positions, their softmax
// against the chunk's own max, and the weighted sum of the values. Warps take positions in
// turn; the lanes of a warp split a key's (or value's) dimensions, so every load of a row is
// coalesced, and a score is a warp sum.
template <bool kF16>
__global__ void __launch_bounds__(kThreads)
    attention_chunk_kernel(const __grid_constant__ AttentionArgs a) {
    extern __shared__ float shared[];
    float* q = shared;          // [dk]
    float* p = shared + a.dk;   // [chunk]
    float* part = p + a.chunk;  // [kWarps][dv]
    __shared__ float red[kWarps];
    const int c = blockIdx.x, h = blockIdx.y, tq = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = a.token0 + tq;
    const TokenPlace place = a.places[t];
    const int64_t slot = (static_cast<int64_t>(tq) * a.n_head + h) * a.n_chunks + c;
    const int j0 = c * a.chunk;
    const int j1 = min(j0 + a.chunk, place.pos + 1);
    if (j0 >= j1) {
        if (threadIdx.x == 0) {
            a.stats[2 * slot] = -FLT_MAX;
            a.stats[2 * slot + 1] = 0.0f;
        }
        return;
    }
    const int kvh = h / a.group;
    const float* qsrc = a.q + t * a.q_stride + static_cast<int64_t>(h) * a.dk;
    for (int d = threadIdx.x; d < a.dk; d += kThreads) q[d] = qsrc[d] * a.scale;
    __syncthreads();

    const int64_t seq_base = (static_cast<int64_t>(a.layer) * a.n_seq + place.seq) * a.n_ctx;
    const int64_t k_row = static_cast<int64_t>(a.n_kv) * a.dk;
    const int64_t v_row = static_cast<int64_t>(a.n_kv) * a.dv;
    const int64_t k_base = seq_base * k_row + static_cast<int64_t>(kvh) * a.dk;
    const int64_t v_base = seq_base * v_row + static_cast<int64_t>(kvh) * a.dv;
    float local_max = -FLT_MAX;
    for (int j = j0 + warp; j < j1; j += kWarps) {
        float s = 0.0f;
        for (int d = lane; d < a.dk; d += 32)
            s = fmaf(load_value<kF16>(a.k, k_base + j * k_row + d), q[d], s);
        s = warp_sum(s);
        if (lane == 0) p[j - j0] = s;
        local_max = fmaxf(local_max, s);
    }
    if (lane == 0) red[warp] = local_max;
    __syncthreads();
    float m = red[0];
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float local_sum = 0.0f;
    for (int j = j0 + threadIdx.x; j < j1; j += kThreads) {
        const float e = expf(p[j - j0] - m);
        p[j - j0] = e;
        local_sum += e;
    }
    local_sum = warp_sum(local_sum);
    if (lane == 0) red[warp] = local_sum;
    __syncthreads();  // also publishes p
    float l = 0.0f;
    for (int w = 0; w < kWarps; ++w) l += red[w];

    // Each warp sums its positions' values; lane l holds dimensions l, l + 32, ...
    float acc[kMaxDimsPerLane];
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) acc[i] = 0.0f;
    for (int j = j0 + warp; j < j1; j += kWarps) {
        const float pj = p[j - j0];
        const int64_t row = v_base + j * v_row;
#pragma unroll
        for (int i = 0; i < kMaxDimsPerLane; ++i) {
            const int d = lane + 32 * i;
            if (d < a.dv) acc[i] = fmaf(pj, load_value<kF16>(a.v, row + d), acc[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < a.dv) part[warp * a.dv + d] = acc[i];
    }
    __syncthreads();
    float* out = a.values + slot * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += kThreads) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; ++w) v += part[w * a.dv + d];
        out[d] = v;
    }
    if (threadIdx.x == 0) {
        a.stats[2 * slot] = m;
        a.stats[2 * slot + 1] = l;
    }
}

// Block (head, query of the slice): the chunks' results rescaled to the common max and summed.
__global__ void attention_combine_kernel(const __grid_constant__ AttentionArgs a, float* out,
                                         int64_t out_stride) {
    const int h = blockIdx.x, tq = blockIdx.y;
    const int64_t slot0 = (static_cast<int64_t>(tq) * a.n_head + h) * a.n_chunks;
    float m = -FLT_MAX;
    for (int c = 0; c < a.n_chunks; ++c) {
        if (a.stats[2 * (slot0 + c) + 1] > 0.0f) m = fmaxf(m, a.stats[2 * (slot0 + c)]);
    }
    float l = 0.0f;
    for (int c = 0; c < a.n_chunks; ++c) {
        const float lc = a.stats[2 * (slot0 + c) + 1];
        if (lc > 0.0f) l += expf(a.stats[2 * (slot0 + c)] - m) * lc;
    }
    float* dst = out + (a.token0 + tq) * out_stride + static_cast<int64_t>(h) * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float acc = 0.0f;
        for (int c = 0; c < a.n_chunks; ++c) {
            const float lc = a.stats[2 * (slot0 + c) + 1];
            if (lc > 0.0f)
                acc += expf(a.stats[2 * (slot0 + c)] - m) * a.values[(slot0 + c) * a.dv + d];
        }
        dst[d] = acc / l;
    }
}

template <bool kF16>
__global__ void store_kv_kernel(void* cache, int64_t layer_seq_stride, int n_ctx, int64_t row,
                                int layer, int n_seq, DeviceRows x, const TokenPlace* places) {
    const int64_t n = static_cast<int64_t>(x.rows) * row;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int t = static_cast<int>(i / row);
        const int64_t e = i % row;
        const TokenPlace p = places[t];
        const int64_t dst =
            ((static_cast<int64_t>(layer) * n_seq + p.seq) * n_ctx + p.pos) * row + e;
        const float value = x.data[t * x.stride + e];
        if constexpr (kF16) {
            static_cast<__half*>(cache)[dst] = __float2half_rn(value);
        } else {
            static_cast<float*>(cache)[dst] = value;
        }
    }
    (void)layer_seq_stride;
}

void store_one(void* cache, bool f16, const KvShape& s, int64_t row, int layer, DeviceRows x,
               const TokenPlace* places, cudaStream_t stream) {
    const int64_t n = static_cast<int64_t>(x.rows) * row;
    if (n == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535));
    if (f16) {
        store_kv_kernel<true>
            <<<blocks, 256, 0, stream>>>(cache, 0, s.n_ctx, row, layer, s.n_seq, x, places);
    } else {
        store_kv_kernel<false>
            <<<blocks, 256, 0, stream>>>(cache, 0, s.n_ctx, row, layer, s.n_seq, x, places);
    }
    check_launch("store_kv");
}

}  // namespace

size_t DeviceKv::bytes() const {
    const size_t positions =
        static_cast<size_t>(shape.n_layer) * shape.n_seq * shape.n_ctx * shape.n_kv_head;
    return positions * (shape.head_dim_k + shape.head_dim_v) * (f16 ? 2 : 4);
}

void store_kv(const DeviceKv& kv, int layer, DeviceRows k, DeviceRows v, const TokenPlace* places,
              cudaStream_t stream) {
    const KvShape& s = kv.shape;
    store_one(kv.k, kv.f16, s, static_cast<int64_t>(s.n_kv_head) * s.head_dim_k, layer, k, places,
              stream);
    store_one(kv.v, kv.f16, s, static_cast<int64_t>(s.n_kv_head) * s.head_dim_v, layer, v, places,
              stream);
}

void attention(const DeviceKv& kv, int layer, DeviceRows q, const TokenPlace* places, int n_head,
               float scale, int chunk, int n_chunks, const AttentionScratch& scratch,
               DeviceRows out, cudaStream_t stream) {
    const KvShape& s = kv.shape;
    if (q.rows == 0) return;
    AttentionArgs a{};
    a.k = kv.k;
    a.v = kv.v;
    a.n_seq = s.n_seq;
    a.n_ctx = s.n_ctx;
    a.n_kv = s.n_kv_head;
    a.dk = s.head_dim_k;
    a.dv = s.head_dim_v;
    a.layer = layer;
    a.n_head = n_head;
    a.group = n_head / s.n_kv_head;
    a.scale = scale;
    a.n_chunks = n_chunks;
    a.chunk = chunk;
    a.q = q.data;
    a.q_stride = q.stride;
    a.places = places;
    a.values = scratch.values;
    a.stats = scratch.stats;
    const int64_t per_query = static_cast<int64_t>(n_head) * n_chunks;
    const int slice = static_cast<int>(std::max<int64_t>(1, scratch.capacity / per_query));
    const size_t shared = sizeof(float) * (a.dk + chunk + kWarps * a.dv);
    for (int t0 = 0; t0 < q.rows; t0 += slice) {
        const int n = std::min(slice, q.rows - t0);
        a.token0 = t0;
        const dim3 grid(n_chunks, n_head, n);
        if (kv.f16) {
            attention_chunk_kernel<true><<<grid, kThreads, shared, stream>>>(a);
        } else {
            attention_chunk_kernel<false><<<grid, kThreads, shared, stream>>>(a);
        }
        check_launch("attention_chunk_kernel");
        attention_combine_kernel<<<dim3(n_head, n), kThreads, 0, stream>>>(a, out.data, out.stride);
        check_launch("attention_combine_kernel");
    }
}

}  // namespace tandem::cuda
