// Attention on the device.
#include "cuda/attention.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <climits>

#include "cuda/attention_kernels.cuh"
#include "cuda/check.h"
#include "cuda/early_launch.cuh"

namespace tandem::cuda {
namespace {

using namespace attention_kernels;

// Whether heads of dk / dv take the wide kernels (attention_wide.cu); this file's are for heads
// of up to kMaxHeadDim.
bool wide(int dk, int dv) {
    return dk > kMaxHeadDim || dv > kMaxHeadDim;
}

// Block (head, query of the slice): the chunks' results rescaled to the common max and summed.
// The threads take the chunks' statistics in parallel (the common max, each chunk's weight
// exp(m_c - m) into shared memory, the common sum), then each output dimension adds the chunks'
// weighted values in chunk order. Empty chunks (weight 0) wrote no values and are skipped. A
// sink joins the max and the sum, and no values.
__global__ void attention_combine_kernel(const __grid_constant__ AttentionArgs a, float* out,
                                         int64_t out_stride) {
    extern __shared__ float weight[];  // [n_chunks]
    __shared__ float red[kWarps];
    wait_for_previous_kernel();
    const int h = blockIdx.x, tq = blockIdx.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t slot0 = (static_cast<int64_t>(tq) * a.n_head + h) * a.n_chunks;
    const float* stats = a.stats + 2 * slot0;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < a.n_chunks; c += kThreads) {
        if (stats[2 * c + 1] > 0.0f) m = fmaxf(m, stats[2 * c]);
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, red[w]);
    if (a.sinks != nullptr) m = fmaxf(m, a.sinks[h]);
    __syncthreads();
    float l = 0.0f;
    for (int c = threadIdx.x; c < a.n_chunks; c += kThreads) {
        const float lc = stats[2 * c + 1];
        const float wc = lc > 0.0f ? expf(stats[2 * c] - m) : 0.0f;
        weight[c] = wc;
        l += wc * lc;
    }
    l = warp_sum(l);
    if (lane == 0) red[warp] = l;
    __syncthreads();  // also publishes weight
    l = 0.0f;
    for (int w = 0; w < kWarps; ++w) l += red[w];
    if (a.sinks != nullptr) l += expf(a.sinks[h] - m);
    float* dst = out + (a.token0 + tq) * out_stride + static_cast<int64_t>(h) * a.dv;
    const float* values = a.values + slot0 * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += kThreads) {
        float acc = 0.0f;
        for (int c = 0; c < a.n_chunks; ++c) {
            if (weight[c] != 0.0f) acc += weight[c] * values[c * a.dv + d];
        }
        dst[d] = acc / l;
    }
}

template <bool kF16>
__global__ void store_kv_kernel(void* cache, int positions, int64_t row, DeviceRows x,
                                const TokenPlace* places) {
    const int64_t n = static_cast<int64_t>(x.rows) * row;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int t = static_cast<int>(i / row);
        const int64_t e = i % row;
        const TokenPlace p = places[t];
        const int64_t dst =
            (static_cast<int64_t>(p.seq) * positions + ring_slot(p.pos, positions)) * row + e;
        const float value = x.data[t * x.stride + e];
        if constexpr (kF16) {
            static_cast<__half*>(cache)[dst] = __float2half_rn(value);
        } else {
            static_cast<float*>(cache)[dst] = value;
        }
    }
}

void store_one(void* cache, bool f16, int positions, int64_t row, DeviceRows x,
               const TokenPlace* places, cudaStream_t stream) {
    const int64_t n = static_cast<int64_t>(x.rows) * row;
    if (n == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535));
    if (f16) {
        store_kv_kernel<true><<<blocks, 256, 0, stream>>>(cache, positions, row, x, places);
    } else {
        store_kv_kernel<false><<<blocks, 256, 0, stream>>>(cache, positions, row, x, places);
    }
    check_launch("store_kv");
}

// Lets kernel take the shared memory of heads of kMaxHeadDim (past the default 48 KiB; every
// GPU since Ampere gives it).
template <typename Kernel>
bool set_max_shared(Kernel kernel) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(tiled_shared_bytes(kMaxHeadDim, kMaxHeadDim))),
          "cudaFuncSetAttribute");
    return true;
}

}  // namespace

namespace attention_kernels {

size_t max_block_shared_bytes() {
    static const size_t bytes = [] {
        int device = 0, optin = 0;
        check(cudaGetDevice(&device), "cudaGetDevice");
        check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
              "cudaDeviceGetAttribute");
        return static_cast<size_t>(optin);
    }();
    return bytes;
}

}  // namespace attention_kernels

bool attention_takes(int dk, int dv) {
    return dk > 0 && dv > 0 && dk % 8 == 0 && dv % 8 == 0 && dk <= kMaxWideKeyDim &&
           dv <= kMaxWideValueDim;
}

bool tiled_attention_fits(int dk, int dv) {
    return tiled_shared_bytes(dk, dv) <= max_block_shared_bytes();
}

int DeviceKv::layer_positions(int layer) const {
    return positions.empty() ? shape.n_ctx : positions[layer];
}

KvLayerShape DeviceKv::layer_shape(int layer) const {
    if (per_layer.empty())
        return {shape.n_kv_head, shape.head_dim_k, shape.head_dim_v, layer, shape.values_in_keys};
    return per_layer[layer];
}

size_t DeviceKv::slot_bytes(int layer, bool keys) const {
    const KvLayerShape s = layer_shape(layer);
    if (!keys && s.values_in_keys) return 0;
    return static_cast<size_t>(s.n_kv) * (keys ? s.dk : s.dv) * (f16 ? 2 : 4);
}

KvLayer DeviceKv::layer(int layer) const {
    const KvLayerShape own = layer_shape(layer);
    if (own.source != layer) return this->layer(own.source);
    size_t k_before = 0, v_before = 0;  // bytes of the caches of the layers before this one
    for (int l = 0; l < layer; ++l) {
        if (!owns(l)) continue;
        const size_t slots = static_cast<size_t>(shape.n_seq) * layer_positions(l);
        k_before += slots * slot_bytes(l, true);
        v_before += slots * slot_bytes(l, false);
    }
    KvLayer out;
    out.k = static_cast<uint8_t*>(k) + k_before;
    out.v = own.values_in_keys ? out.k : static_cast<uint8_t*>(v) + v_before;
    out.values_in_keys = own.values_in_keys;
    out.n_seq = shape.n_seq;
    out.positions = layer_positions(layer);
    out.n_kv = own.n_kv;
    out.dk = own.dk;
    out.dv = own.dv;
    out.f16 = f16;
    return out;
}

size_t DeviceKv::key_bytes() const {
    size_t bytes = 0;
    for (int l = 0; l < shape.n_layer; ++l) {
        if (owns(l))
            bytes += static_cast<size_t>(shape.n_seq) * layer_positions(l) * slot_bytes(l, true);
    }
    return bytes;
}

size_t DeviceKv::value_bytes() const {
    size_t bytes = 0;
    for (int l = 0; l < shape.n_layer; ++l) {
        if (owns(l))
            bytes += static_cast<size_t>(shape.n_seq) * layer_positions(l) * slot_bytes(l, false);
    }
    return bytes;
}

void store_kv(const KvLayer& kv, DeviceRows k, DeviceRows v, const TokenPlace* places,
              cudaStream_t stream) {
    store_one(kv.k, kv.f16, kv.positions, static_cast<int64_t>(kv.n_kv) * kv.dk, k, places, stream);
    if (kv.values_in_keys) return;
    store_one(kv.v, kv.f16, kv.positions, static_cast<int64_t>(kv.n_kv) * kv.dv, v, places, stream);
}

void attention(const KvLayer& kv, DeviceRows q, const TokenPlace* places,
               const Attention::Params& p, int chunk, int n_chunks, const AttentionScratch& scratch,
               DeviceRows out, cudaStream_t stream) {
    if (q.rows == 0) return;
    AttentionArgs a{};
    static_cast<LayerArgs&>(a) = layer_args(kv, p);
    a.n_head = p.n_head;
    a.n_chunks = n_chunks;
    a.chunk = chunk;
    // The most positions a query sees: its window, or the whole cache.
    const int seen = p.window > 0 ? std::min(p.window, kv.positions) : kv.positions;
    a.max_chunk = chunk > 0 ? chunk : (seen + n_chunks - 1) / n_chunks;
    a.q = q.data;
    a.q_stride = q.stride;
    a.places = places;
    a.values = scratch.values;
    a.stats = scratch.stats;
    const int64_t per_query = static_cast<int64_t>(p.n_head) * n_chunks;
    const int slice = static_cast<int>(std::max<int64_t>(1, scratch.capacity / per_query));
    const size_t shared = sizeof(float) * (a.dk + a.max_chunk + kWarps * a.dv);
    for (int t0 = 0; t0 < q.rows; t0 += slice) {
        const int n = std::min(slice, q.rows - t0);
        a.token0 = t0;
        const dim3 grid(n_chunks, p.n_head, n);
        if (wide(a.dk, a.dv)) {
            launch_chunks_wide(kv.f16, grid, shared, stream, a);
        } else {
            launch_early(kv.f16 ? attention_chunk_kernel<true, kMaxHeadDim>
                                : attention_chunk_kernel<false, kMaxHeadDim>,
                         grid, kThreads, shared, stream, "attention_chunk_kernel", a);
        }
        launch_early(attention_combine_kernel, dim3(p.n_head, n), kThreads,
                     sizeof(float) * n_chunks, stream, "attention_combine_kernel", a, out.data,
                     out.stride);
    }
}

size_t tiled_attention_shared_bytes(int dk, int dv) {
    return tiled_shared_bytes(dk, dv);
}

void attention_tiled(const KvLayer& kv, DeviceRows q, const TokenPlace* places,
                     const Attention::Params& p, DeviceRows out, cudaStream_t stream) {
    if (q.rows == 0) return;
    TiledArgs a{};
    static_cast<LayerArgs&>(a) = layer_args(kv, p);
    a.n_tokens = q.rows;
    a.q = q.data;
    a.q_stride = q.stride;
    a.places = places;
    a.out = out.data;
    a.out_stride = out.stride;
    const size_t shared = tiled_attention_shared_bytes(a.dk, a.dv);
    const dim3 grid((q.rows + kTileQueries - 1) / kTileQueries, p.n_head);
    if (wide(a.dk, a.dv)) {  // (callers check tiled_attention_fits())
        launch_tiled_wide(kv.f16, grid, shared, stream, a);
        return;
    }
    if (kv.f16) {
        static const bool ready = set_max_shared(attention_tiled_kernel<true, kMaxHeadDim>);
        (void)ready;
        attention_tiled_kernel<true, kMaxHeadDim><<<grid, kThreads, shared, stream>>>(a);
    } else {
        static const bool ready = set_max_shared(attention_tiled_kernel<false, kMaxHeadDim>);
        (void)ready;
        attention_tiled_kernel<false, kMaxHeadDim><<<grid, kThreads, shared, stream>>>(a);
    }
    check_launch("attention_tiled_kernel");
}

}  // namespace tandem::cuda
