// Attention on the device.
#include "cuda/attention.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <mutex>

#include "base/env_flag.h"
#include "cuda/attention_decode.cuh"
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

// Block (head block, query of the slice): its heads' chunks combined (combine_chunks).
__global__ void attention_combine_kernel(const __grid_constant__ AttentionArgs a) {
    extern __shared__ float weight[];  // [block_heads][n_chunks]
    wait_for_previous_kernel();
    combine_chunks(a, block_head_range(a, blockIdx.x), blockIdx.y, weight);
}

// The tensor-core decode kernel for heads of kDim. A block of 16 heads of 128 (or the combine's
// weights of a very long context) takes shared memory past the default 48 KiB, which the kernel
// is allowed as launches first need it (under a lock: backends on other threads may launch it).
template <int kDim>
void launch_decode_mma(dim3 grid, size_t shared, cudaStream_t stream, const AttentionArgs& a) {
    static std::mutex mutex;
    static size_t allowed = 48 << 10;
    {
        const std::lock_guard<std::mutex> lock(mutex);
        if (shared > allowed) {
            check(cudaFuncSetAttribute(attention_decode_mma_kernel<kDim>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(shared)),
                  "cudaFuncSetAttribute (decode attention's shared memory)");
            allowed = shared;
        }
    }
    launch_early(attention_decode_mma_kernel<kDim>, grid, kThreads, shared, stream,
                 "attention_decode_mma_kernel", a);
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

// Lets kernel take the shared memory of `heads` heads of kMaxHeadDim (past the default 48 KiB;
// every GPU since Ampere gives it).
template <typename Kernel>
bool set_max_shared(Kernel kernel, int heads = 1) {
    check(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(tiled_shared_bytes(kMaxHeadDim, kMaxHeadDim, heads))),
        "cudaFuncSetAttribute");
    return true;
}

// Launches the tiled kernel for heads of up to kMaxHeadDim, kHeads query heads a block.
template <int kHeads>
void launch_tiled(bool f16, dim3 grid, size_t shared, cudaStream_t stream, const TiledArgs& a) {
    if (f16) {
        static const bool ready =
            set_max_shared(attention_tiled_kernel<true, kMaxHeadDim, kHeads>, kHeads);
        (void)ready;
        attention_tiled_kernel<true, kMaxHeadDim, kHeads><<<grid, kThreads, shared, stream>>>(a);
    } else {
        static const bool ready =
            set_max_shared(attention_tiled_kernel<false, kMaxHeadDim, kHeads>, kHeads);
        (void)ready;
        attention_tiled_kernel<false, kMaxHeadDim, kHeads><<<grid, kThreads, shared, stream>>>(a);
    }
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
    return tiled_shared_bytes(dk, dv, 1) <= max_block_shared_bytes();
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

// Whether combine_chunks() can round its output through r: every pass of its threads then covers
// whole warps (the heads of a head block make a multiple of 256 values) whose q8 blocks begin at
// a lane group's first run (each head block starts at a multiple of 256 values). Otherwise (a
// block per head of 128, an odd group) the product rounds its input in a launch of its own.
bool combine_rounds(const AttentionArgs& a, gpu::ActivationRounding r) {
    if (r == gpu::ActivationRounding::kNone) return false;
    if (gpu::rounding_block(r) == 1) return true;
    return (a.block_heads * a.dv) % 256 == 0 && (a.group * a.dv) % 256 == 0;
}

bool attention(const KvLayer& kv, DeviceRows q, const TokenPlace* places,
               const Attention::Params& p, int chunk, int n_chunks, const AttentionScratch& scratch,
               DeviceRows out, cudaStream_t stream, const OutputRounding& rounding) {
    if (q.rows == 0) return false;
    AttentionArgs a{};
    static_cast<LayerArgs&>(a) = layer_args(kv, p);
    a.n_head = p.n_head;
    a.n_chunks = n_chunks;
    a.chunk = chunk;
    // f16 caches of heads of 64 and 128 take the tensor-core kernel, a block for a kv head's
    // group of query heads, whose chunks hold a pass of its warps at least; the others a block a
    // query head.
    const bool mma = decode_mma_takes(kv, a.group);
    a.min_chunk = mma ? kMinDecodeChunk : 1;
    // The most positions a query sees: its window, or the whole cache.
    const int seen = p.window > 0 ? std::min(p.window, kv.positions) : kv.positions;
    a.max_chunk = chunk > 0 ? chunk : std::max(a.min_chunk, (seen + n_chunks - 1) / n_chunks);
    a.q = q.data;
    a.q_stride = q.stride;
    a.places = places;
    a.values = scratch.values;
    a.stats = scratch.stats;
    a.done = scratch.done;
    a.out = out.data;
    a.out_stride = out.stride;
    a.block_heads = mma ? a.group : 1;
    const gpu::ActivationRounding r = gpu::rounding_for(rounding.dot_type);
    const bool rounds = combine_rounds(a, r);
    if (rounds) {
        a.rounding = r;
        a.rounded = rounding.rounded.data;
        a.rounded_stride = rounding.rounded.stride;
        if (rounding.q8 != nullptr && gpu::rounding_block(r) >= 32) a.q8 = *rounding.q8;
    }
    const size_t shared =
        mma ? decode_mma_shared_bytes(a.dk, a.group, a.done ? n_chunks : 0)
            : sizeof(float) * (a.dk + a.max_chunk + std::max(kWarps * a.dv, a.done ? n_chunks : 0));
    const int64_t per_query = static_cast<int64_t>(p.n_head) * n_chunks;
    const int slice = static_cast<int>(std::max<int64_t>(1, scratch.capacity / per_query));
    for (int t0 = 0; t0 < q.rows; t0 += slice) {
        const int n = std::min(slice, q.rows - t0);
        a.token0 = t0;
        const dim3 grid(n_chunks, head_blocks(a), n);
        if (mma && a.dk == 64) {
            launch_decode_mma<64>(grid, shared, stream, a);
        } else if (mma) {
            launch_decode_mma<128>(grid, shared, stream, a);
        } else if (wide(a.dk, a.dv)) {
            launch_chunks_wide(kv.f16, grid, shared, stream, a);
        } else {
            launch_early(kv.f16 ? attention_chunk_kernel<true, kMaxHeadDim>
                                : attention_chunk_kernel<false, kMaxHeadDim>,
                         grid, kThreads, shared, stream, "attention_chunk_kernel", a);
        }
        if (a.done == nullptr)
            launch_early(attention_combine_kernel, dim3(head_blocks(a), n), kThreads,
                         sizeof(float) * a.block_heads * n_chunks, stream,
                         "attention_combine_kernel", a);
    }
    return rounds;
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
    // f16 caches of the common head sizes on tensor cores (TANDEM_GPU_SCALAR_ATTENTION=1: the
    // scalar kernel below for every cache, for comparison).
    static const bool scalar_only = env_flag("TANDEM_GPU_SCALAR_ATTENTION");
    if (!scalar_only && attention_mma_takes(kv, q.stride, out.stride)) {
        attention_mma(a, stream);
        return;
    }
    const int tiles = (q.rows + kTileQueries - 1) / kTileQueries;
    if (wide(a.dk, a.dv)) {  // (callers check tiled_attention_fits())
        launch_tiled_wide(kv.f16, dim3(tiles, p.n_head), tiled_shared_bytes(a.dk, a.dv, 1), stream,
                          a);
        return;
    }
    // Two query heads of a kv head a block where the group pairs up: each staged key and value
    // then serves both (the kernel is bound by those shared-memory reads).
    if (a.group % 2 == 0) {
        launch_tiled<2>(kv.f16, dim3(tiles, p.n_head / 2), tiled_shared_bytes(a.dk, a.dv, 2),
                        stream, a);
    } else {
        launch_tiled<1>(kv.f16, dim3(tiles, p.n_head), tiled_shared_bytes(a.dk, a.dv, 1), stream,
                        a);
    }
    check_launch("attention_tiled_kernel");
}

}  // namespace tandem::cuda
