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
    int token0;  // first query of this slice
    const float* q;
    int64_t q_stride;
    const TokenPlace* places;
    float* values;
    float* stats;
};

template <bool kF16>
__device__ __forceinline__ float dot_row(const void* base, int64_t offset, const float* q, int n) {
    float sum = 0.0f;
    if constexpr (kF16) {
        const __half2* p = reinterpret_cast<const __half2*>(static_cast<const __half*>(base) + offset);
        for (int i = 0; i < n / 2; ++i) {
            const float2 f = __half22float2(p[i]);
            sum = fmaf(f.x, q[2 * i], sum);
            sum = fmaf(f.y, q[2 * i + 1], sum);
        }
    } else {
        const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + offset);
        for (int i = 0; i < n / 4; ++i) {
            const float4 f = p[i];
            sum = fmaf(f.x, q[4 * i], sum);
            sum = fmaf(f.y, q[4 * i + 1], sum);
            sum = fmaf(f.z, q[4 * i + 2], sum);
            sum = fmaf(f.w, q[4 * i + 3], sum);
        }
    }
    return sum;
}

template <bool kF16>
__device__ __forceinline__ float load_value(const void* base, int64_t offset) {
    if constexpr (kF16) {
        return __half2float(static_cast<const __half*>(base)[offset]);
    } else {
        return static_cast<const float*>(base)[offset];
    }
}

__device__ float block_max(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    v = red[0];
    for (int w = 1; w < kThreads / 32; ++w) v = fmaxf(v, red[w]);
    __syncthreads();
    return v;
}

__device__ float block_sum(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) v += red[w];
    __syncthreads();
    return v;
}

// Block (chunk, head, query of the slice): scores of the chunk's positions, their softmax
// against the chunk's own max, and the weighted sum of the values.
template <bool kF16>
__global__ void __launch_bounds__(kThreads) attention_chunk_kernel(const __grid_constant__ AttentionArgs a) {
    extern __shared__ float shared[];
    float* q = shared;              // [dk]
    float* p = shared + a.dk;       // [kAttentionChunk]
    __shared__ float red[kThreads / 32];
    const int c = blockIdx.x, h = blockIdx.y, tq = blockIdx.z;
    const int t = a.token0 + tq;
    const TokenPlace place = a.places[t];
    const int64_t slot = (static_cast<int64_t>(tq) * a.n_head + h) * a.n_chunks + c;
    const int j0 = c * kAttentionChunk;
    const int j1 = min(j0 + kAttentionChunk, place.pos + 1);
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
    float local_max = -FLT_MAX;
    for (int j = j0 + threadIdx.x; j < j1; j += kThreads) {
        const float s = dot_row<kF16>(a.k, (seq_base + j) * k_row + static_cast<int64_t>(kvh) * a.dk, q, a.dk);
        p[j - j0] = s;
        local_max = fmaxf(local_max, s);
    }
    const float m = block_max(local_max, red);
    float local_sum = 0.0f;
    for (int j = j0 + threadIdx.x; j < j1; j += kThreads) {
        const float e = __expf(p[j - j0] - m);
        p[j - j0] = e;
        local_sum += e;
    }
    const float l = block_sum(local_sum, red);  // (its barrier also publishes p)
    float* out = a.values + slot * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += kThreads) {
        const int64_t base = seq_base * v_row + static_cast<int64_t>(kvh) * a.dv + d;
        float acc = 0.0f;
        for (int j = j0; j < j1; ++j) acc = fmaf(p[j - j0], load_value<kF16>(a.v, base + j * v_row), acc);
        out[d] = acc;
    }
    if (threadIdx.x == 0) {
        a.stats[2 * slot] = m;
        a.stats[2 * slot + 1] = l;
    }
}

// Block (head, query of the slice): the chunks' results rescaled to the common max and summed.
__global__ void attention_combine_kernel(const __grid_constant__ AttentionArgs a, float* out, int64_t out_stride) {
    const int h = blockIdx.x, tq = blockIdx.y;
    const int64_t slot0 = (static_cast<int64_t>(tq) * a.n_head + h) * a.n_chunks;
    float m = -FLT_MAX;
    for (int c = 0; c < a.n_chunks; ++c) {
        if (a.stats[2 * (slot0 + c) + 1] > 0.0f) m = fmaxf(m, a.stats[2 * (slot0 + c)]);
    }
    float l = 0.0f;
    for (int c = 0; c < a.n_chunks; ++c) {
        const float lc = a.stats[2 * (slot0 + c) + 1];
        if (lc > 0.0f) l += __expf(a.stats[2 * (slot0 + c)] - m) * lc;
    }
    float* dst = out + (a.token0 + tq) * out_stride + static_cast<int64_t>(h) * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float acc = 0.0f;
        for (int c = 0; c < a.n_chunks; ++c) {
            const float lc = a.stats[2 * (slot0 + c) + 1];
            if (lc > 0.0f) acc += __expf(a.stats[2 * (slot0 + c)] - m) * a.values[(slot0 + c) * a.dv + d];
        }
        dst[d] = acc / l;
    }
}

template <bool kF16>
__global__ void store_kv_kernel(void* cache, int64_t layer_seq_stride, int n_ctx, int64_t row, int layer,
                                int n_seq, DeviceRows x, const TokenPlace* places) {
    const int64_t n = static_cast<int64_t>(x.rows) * row;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int t = static_cast<int>(i / row);
        const int64_t e = i % row;
        const TokenPlace p = places[t];
        const int64_t dst = ((static_cast<int64_t>(layer) * n_seq + p.seq) * n_ctx + p.pos) * row + e;
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
        store_kv_kernel<true><<<blocks, 256, 0, stream>>>(cache, 0, s.n_ctx, row, layer, s.n_seq, x, places);
    } else {
        store_kv_kernel<false><<<blocks, 256, 0, stream>>>(cache, 0, s.n_ctx, row, layer, s.n_seq, x, places);
    }
    check_launch("store_kv");
}

}  // namespace

size_t DeviceKv::bytes() const {
    const size_t positions = static_cast<size_t>(shape.n_layer) * shape.n_seq * shape.n_ctx * shape.n_kv_head;
    return positions * (shape.head_dim_k + shape.head_dim_v) * (f16 ? 2 : 4);
}

void store_kv(const DeviceKv& kv, int layer, DeviceRows k, DeviceRows v, const TokenPlace* places,
              cudaStream_t stream) {
    const KvShape& s = kv.shape;
    store_one(kv.k, kv.f16, s, static_cast<int64_t>(s.n_kv_head) * s.head_dim_k, layer, k, places, stream);
    store_one(kv.v, kv.f16, s, static_cast<int64_t>(s.n_kv_head) * s.head_dim_v, layer, v, places, stream);
}

void attention(const DeviceKv& kv, int layer, DeviceRows q, const TokenPlace* places, int n_head, float scale,
               int n_chunks, const AttentionScratch& scratch, DeviceRows out, cudaStream_t stream) {
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
    a.q = q.data;
    a.q_stride = q.stride;
    a.places = places;
    a.values = scratch.values;
    a.stats = scratch.stats;
    const int64_t per_query = static_cast<int64_t>(n_head) * n_chunks;
    const int slice = static_cast<int>(std::max<int64_t>(1, scratch.capacity / per_query));
    const size_t shared = sizeof(float) * (a.dk + kAttentionChunk);
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
