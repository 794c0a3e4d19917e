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
    a.arrivals = scratch.arrivals;
    a.out = out.data;
    a.out_stride = out.stride;
    if (scratch.arrivals == nullptr)
        check(cudaErrorInvalidValue, "attention (a scratch without arrival counts)");
    // The most heads of one kv head a block takes (a divisor of the group) within the default
    // 48 KiB of shared memory.
    const int max_heads = wide(a.dk, a.dv) ? kMaxWideHeadsPerBlock : kMaxHeadsPerBlock;
    a.heads_per_block = 1;
    for (int hb = std::min(max_heads, a.group); hb > 1; --hb) {
        if (a.group % hb == 0 && chunk_shared_bytes(a, hb) <= 48 * 1024) {
            a.heads_per_block = hb;
            break;
        }
    }
    const int64_t per_query = static_cast<int64_t>(p.n_head) * n_chunks;
    const int slice = static_cast<int>(std::max<int64_t>(1, scratch.capacity / per_query));
    const size_t shared = chunk_shared_bytes(a, a.heads_per_block);
    for (int t0 = 0; t0 < q.rows; t0 += slice) {
        const int n = std::min(slice, q.rows - t0);
        a.token0 = t0;
        const dim3 grid(n_chunks, p.n_head / a.heads_per_block, n);
        if (wide(a.dk, a.dv)) {
            launch_chunks_wide(kv.f16, grid, shared, stream, a);
        } else {
            launch_early(kv.f16 ? attention_chunk_kernel<true, kMaxHeadDim, kMaxHeadDim,
                                                         kMaxHeadsPerBlock>
                                : attention_chunk_kernel<false, kMaxHeadDim, kMaxHeadDim,
                                                         kMaxHeadsPerBlock>,
                         grid, kThreads, shared, stream, "attention_chunk_kernel", a);
        }
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
