// The attention kernels of attention.cu, templated on the cache's type and on the largest value
// head they take (kMaxValueDim: the registers a thread keeps for its share of a head's output;
// keys stream through shared memory and registers of a fixed size, whatever their width), and
// what the decode kernels share: the chunks' spans, their combine, the loads of cache rows.
// attention.cu instantiates them for heads of up to kMaxHeadDim (256), attention_wide.cu for
// values of up to kMaxWideValueDim (512) under keys of up to kMaxWideKeyDim (576), each in its
// own translation unit, so the common path's registers stay as they were; attention_mma.cu and
// attention_decode.cuh (prefill and decode on tensor cores) take their argument structures and
// helpers. Nothing else includes this file.
#pragma once

#include <cuda_fp16.h>

#include <cfloat>
#include <climits>
#include <cstdint>

#include "cuda/activation_rounding.h"
#include "cuda/attention.h"
#include "cuda/early_launch.cuh"
#include "cuda/q8_round.cuh"
#include "cuda/vector_access.cuh"

namespace tandem::cuda::attention_kernels {

constexpr int kThreads = 128;

// What both kernels take of the layer's cache and its attention parameters.
struct LayerArgs {
    const void* k;
    const void* v;
    int positions, n_kv, dk, dv;
    int group;  // query heads per kv head
    float scale;
    int window;          // > 0: the last `window` positions only
    const float* sinks;  // [n_head], or nullptr
    // Where values sit: v + (slot · v_pos_stride + kv head · v_head_stride) (with the values in
    // the keys, the keys' strides).
    int64_t v_pos_stride;
    int v_head_stride;
    bool values_in_keys;
};

inline LayerArgs layer_args(const KvLayer& kv, const Attention::Params& p) {
    const int v_head = kv.values_in_keys ? kv.dk : kv.dv;
    return {kv.k,
            kv.values_in_keys ? kv.k : kv.v,
            kv.positions,
            kv.n_kv,
            kv.dk,
            kv.dv,
            p.n_head / kv.n_kv,
            p.scale,
            p.window,
            p.sinks,
            static_cast<int64_t>(kv.n_kv) * v_head,
            v_head,
            kv.values_in_keys};
}

struct AttentionArgs : LayerArgs {
    int n_head;
    int n_chunks;
    int chunk;      // positions per chunk (0: (pos + 1) / n_chunks, rounded up, per query)
    int min_chunk;  // with chunk 0, positions a chunk holds at least (short contexts fill fewer)
    int max_chunk;  // the most a chunk may hold
    int token0;     // first query of this slice
    const float* q;
    int64_t q_stride;
    const TokenPlace* places;
    float* values;
    float* stats;
    int* done;        // per (query of the slice, head): chunks finished, or nullptr
    float* out;       // where the combined heads go (with done)
    int64_t out_stride;
    // Query heads a block takes, of one kv head: 1 for attention_chunk_kernel, the group (up to
    // kMaxBlockHeads) for the tensor-core decode kernel (attention_decode.cuh). The combine takes
    // the same heads a block.
    int block_heads;
    // Unless kNone, the combine also writes its output rounded for the product that reads it
    // next, as round_activations() rounds it: values into `rounded`, codes and scales into q8
    // (where q8.q is set). Only where every warp of a combine pass holds whole rounding blocks
    // (combine_rounds()).
    gpu::ActivationRounding rounding;
    float* rounded;
    int64_t rounded_stride;
    Q8Rows q8;
};

constexpr int kMaxBlockHeads = 16;

// The query heads [first, first + count) of head block b: block_heads of one kv head's group
// (the group's last block may hold fewer).
struct HeadRange {
    int first, count;
};

__device__ __forceinline__ HeadRange block_head_range(const AttentionArgs& a, int b) {
    const int per_kv = (a.group + a.block_heads - 1) / a.block_heads;
    const int in_group = b % per_kv * a.block_heads;
    return {b / per_kv * a.group + in_group, min(a.block_heads, a.group - in_group)};
}

// Head blocks of a launch: per_kv of them for each kv head.
inline int head_blocks(const AttentionArgs& a) {
    return a.n_kv * ((a.group + a.block_heads - 1) / a.block_heads);
}

template <bool kF16>
__device__ __forceinline__ float load_value(const void* base, int64_t offset) {
    if constexpr (kF16) {
        return __half2float(static_cast<const __half*>(base)[offset]);
    } else {
        return static_cast<const float*>(base)[offset];
    }
}

// The slot of position j in a cache of `positions` slots per sequence: j itself in a full
// layer's (no division on that path), j mod positions in a ring.
__device__ __forceinline__ int64_t ring_slot(int j, int positions) {
    return j < positions ? j : j % positions;
}

// The first position a token at `pos` sees.
__device__ __forceinline__ int first_seen(int pos, int window) {
    return window > 0 ? max(0, pos - window + 1) : 0;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The rounded copy of a combined run of 8 output values at column `col` of query tq: lanes whose
// runs make up a q8 block (4 of them for q8_0 and q8_1, a warp for q8_K) round it together.
__device__ __forceinline__ void round_combined(const AttentionArgs& a, int tq, int64_t col,
                                               const float (&v)[8]) {
    const int64_t row = a.token0 + tq;
    float* dst = a.rounded + row * a.rounded_stride + col;
    const int block = gpu::rounding_block(a.rounding);
    if (block == 1) {
        float r[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) r[i] = gpu::round_value(a.rounding, v[i]);
        store_run(dst, r);
        return;
    }
    const int part = static_cast<int>(col % block) / 8;
    int8_t* codes = a.q8.q != nullptr ? a.q8.q + row * a.q8.q_stride + col : nullptr;
    float* scales =
        a.q8.q != nullptr ? a.q8.d + row * a.q8.d_stride + (col - 8 * part) / 32 : nullptr;
    if (block == 32) {
        round_q8_lanes<8, 4>(v, part, dst, codes, scales);
    } else {
        round_q8_lanes<8, 32>(v, part, dst, codes, scales);
    }
}

// Heads [h.first, h.first + h.count) of query tq of the slice: each head's chunks' results
// rescaled to the common max and summed. A warp a head takes the chunks' statistics (the common
// max, each chunk's weight exp(m_c - m) into `weight` [count][n_chunks], the common sum), then
// each output value of the heads adds its chunks' weighted values in chunk order. Empty chunks
// (weight 0) wrote no values and are skipped. A sink joins the max and the sum, and no values.
// The chunks' results are read through L2 (__ldcg): other blocks of the same launch may have
// written them.
__device__ __forceinline__ void combine_chunks(const AttentionArgs& a, HeadRange heads, int tq,
                                               float* weight) {
    __shared__ float total[kMaxBlockHeads];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t slot0 = (static_cast<int64_t>(tq) * a.n_head + heads.first) * a.n_chunks;
    for (int i = warp; i < heads.count; i += kWarps) {
        const float* stats = a.stats + 2 * (slot0 + static_cast<int64_t>(i) * a.n_chunks);
        float m = -FLT_MAX;
        for (int c = lane; c < a.n_chunks; c += 32) {
            if (__ldcg(stats + 2 * c + 1) > 0.0f) m = fmaxf(m, __ldcg(stats + 2 * c));
        }
        m = warp_max(m);
        const float sink = a.sinks != nullptr ? a.sinks[heads.first + i] : -FLT_MAX;
        m = fmaxf(m, sink);
        float l = 0.0f;
        for (int c = lane; c < a.n_chunks; c += 32) {
            const float lc = __ldcg(stats + 2 * c + 1);
            const float wc = lc > 0.0f ? expf(__ldcg(stats + 2 * c) - m) : 0.0f;
            weight[i * a.n_chunks + c] = wc;
            l += wc * lc;
        }
        l = warp_sum(l);
        if (a.sinks != nullptr) l += expf(sink - m);
        if (lane == 0) total[i] = l;
    }
    __syncthreads();  // publishes weight and total
    // A thread a run of 8 output values of a head (two 16-byte loads a chunk, kInFlight chunks'
    // loads in flight): a group of 8 heads of 128 is one pass of the block's threads, so the
    // chunks' round trips to L2 stay few however many heads a block combines.
    constexpr int kInFlight = 8;
    const int runs = a.dv / 8;
    for (int job = threadIdx.x; job < heads.count * runs; job += kThreads) {
        const int i = job / runs, d = 8 * (job % runs);
        const float* w = weight + i * a.n_chunks;
        const float* values =
            a.values + (slot0 + static_cast<int64_t>(i) * a.n_chunks) * a.dv + d;
        float acc[8] = {};
        for (int c0 = 0; c0 < a.n_chunks; c0 += kInFlight) {
            float4 v[kInFlight][2];
#pragma unroll
            for (int k = 0; k < kInFlight; ++k) {
                const int c = c0 + k;
                if (c < a.n_chunks && w[c] != 0.0f) {
                    const float4* src = reinterpret_cast<const float4*>(values + c * a.dv);
                    v[k][0] = __ldcg(src);
                    v[k][1] = __ldcg(src + 1);
                }
            }
#pragma unroll
            for (int k = 0; k < kInFlight; ++k) {
                const int c = c0 + k;
                if (c >= a.n_chunks || w[c] == 0.0f) continue;
                const float wc = w[c];
                acc[0] += wc * v[k][0].x, acc[1] += wc * v[k][0].y;
                acc[2] += wc * v[k][0].z, acc[3] += wc * v[k][0].w;
                acc[4] += wc * v[k][1].x, acc[5] += wc * v[k][1].y;
                acc[6] += wc * v[k][1].z, acc[7] += wc * v[k][1].w;
            }
        }
        float out[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) out[k] = acc[k] / total[i];
        const int64_t col = static_cast<int64_t>(heads.first + i) * a.dv + d;
        store_run<8>(a.out + (a.token0 + tq) * a.out_stride + col, out);
        if (a.rounding != gpu::ActivationRounding::kNone) round_combined(a, tq, col, out);
    }
}

// Whether this block is the last of its head block's chunk blocks to finish (its writes, and
// through the fence and the counter every other block's, are visible to it then); the last
// leaves the counter at zero for the next launch.
__device__ __forceinline__ bool last_chunk_block(const AttentionArgs& a, HeadRange heads, int tq) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int* done = a.done + static_cast<int64_t>(tq) * a.n_head + heads.first;
        last = atomicAdd(done, 1) == a.n_chunks - 1;
        if (last) *done = 0;
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// The positions [j0, j1) of chunk c of a query at `place` (empty where the chunk lies past it):
// with a.chunk 0, the query's positions split evenly over the n_chunks blocks, at least
// a.min_chunk a chunk.
struct ChunkSpan {
    int j0, j1;
};

__device__ __forceinline__ ChunkSpan chunk_span(const AttentionArgs& a, TokenPlace place, int c) {
    const int first = first_seen(place.pos, a.window);
    const int chunk =
        a.chunk > 0 ? a.chunk : max(a.min_chunk, (place.pos - first + a.n_chunks) / a.n_chunks);
    const int j0 = first + c * chunk;
    return {j0, min(j0 + chunk, place.pos + 1)};
}

// The scores of positions j0 .. j1 - 1 for query t's head h, their softmax against the chunk's own
// max, and the weighted sum of the values, into the chunk's slot of the scratch.
template <bool kF16, int kMaxValueDim>
__device__ __forceinline__ void chunk_attention(const AttentionArgs& a, TokenPlace place, int h,
                                                int t, int j0, int j1, int64_t slot, float* q,
                                                float* p, float* part, float* red) {
    constexpr int kMaxDimsPerLane = kMaxValueDim / 32;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int kvh = h / a.group;
    const float* qsrc = a.q + t * a.q_stride + static_cast<int64_t>(h) * a.dk;
    for (int d = threadIdx.x; d < a.dk; d += kThreads) q[d] = qsrc[d] * a.scale;
    __syncthreads();

    const int64_t seq_base = static_cast<int64_t>(place.seq) * a.positions;
    const int64_t k_row = static_cast<int64_t>(a.n_kv) * a.dk;
    const int64_t v_row = a.v_pos_stride;
    const int64_t k_head = static_cast<int64_t>(kvh) * a.dk;
    const int64_t v_head = static_cast<int64_t>(kvh) * a.v_head_stride;
    float local_max = -FLT_MAX;
    // Unrolled: a warp's next positions' loads go out before this one's sum comes back.
#pragma unroll 4
    for (int j = j0 + warp; j < j1; j += kWarps) {
        const int64_t row = k_head + (seq_base + ring_slot(j, a.positions)) * k_row;
        float s = 0.0f;
        for (int d = lane; d < a.dk; d += 32) s = fmaf(load_value<kF16>(a.k, row + d), q[d], s);
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
#pragma unroll 4
    for (int j = j0 + warp; j < j1; j += kWarps) {
        const float pj = p[j - j0];
        const int64_t row = v_head + (seq_base + ring_slot(j, a.positions)) * v_row;
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

// Block (chunk, head, query of the slice): the scores of the chunk's positions, their softmax
// against the chunk's own max, and the weighted sum of the values. Warps take positions in
// turn; the lanes of a warp split a key's (or value's) dimensions, so every load of a row is
// coalesced, and a score is a warp sum. Position j sits in slot j mod positions. A lane
// accumulates kMaxValueDim / 32 value dimensions (dv <= kMaxValueDim). With a.done, the head's
// last block to finish combines its chunks (else attention_combine_kernel does, a launch later).
template <bool kF16, int kMaxValueDim>
__global__ void __launch_bounds__(kThreads)
    attention_chunk_kernel(const __grid_constant__ AttentionArgs a) {
    extern __shared__ float shared[];
    float* q = shared;              // [dk]
    float* p = shared + a.dk;       // [max_chunk]
    float* part = p + a.max_chunk;  // [kWarps][dv], and the combine's [n_chunks] weights
    __shared__ float red[kWarps];
    wait_for_previous_kernel();
    const int c = blockIdx.x, h = blockIdx.y, tq = blockIdx.z;
    const int t = a.token0 + tq;
    const TokenPlace place = a.places[t];
    const int64_t slot = (static_cast<int64_t>(tq) * a.n_head + h) * a.n_chunks + c;
    const ChunkSpan span = chunk_span(a, place, c);
    if (span.j0 < span.j1) {
        chunk_attention<kF16, kMaxValueDim>(a, place, h, t, span.j0, span.j1, slot, q, p, part,
                                            red);
    } else if (threadIdx.x == 0) {
        a.stats[2 * slot] = -FLT_MAX;
        a.stats[2 * slot + 1] = 0.0f;
    }
    if (a.done != nullptr && last_chunk_block(a, {h, 1}, tq)) combine_chunks(a, {h, 1}, tq, part);
}

// ---------------------------------------------------------------- prefill: query tiles

// Block (tile of kTileQueries queries, kHeads query heads of one kv head): the tile's queries
// against key tiles of kTileKeys positions staged in shared memory, with an online softmax
// (running max and sum per query and head), so the keys and values are read once per tile
// instead of once per query, and once for the kHeads heads that share them (the loop is bound by
// shared-memory loads: a staged key or value row read once serves every head of the thread).
// Queries of different sequences in one tile are taken a sequence at a time (the others
// masked), over the positions from the first any of them sees to the last. Thread i owns query
// i / 8 of the tile in each of the block's heads: its scores for keys i % 8 + 8 u, and its output
// dimensions 4 (i % 8) + 32 u .. + 3 (u < kMaxValueDim / 32). With the values in the keys, the
// staged keys are the values.
constexpr int kTileQueries = 16;
constexpr int kTileKeys = 32;
constexpr int kLanesPerQuery = kThreads / kTileQueries;  // 8
static_assert(kTileKeys / kLanesPerQuery == 4);

struct TiledArgs : LayerArgs {
    int n_tokens;
    const float* q;
    int64_t q_stride;
    const TokenPlace* places;
    float* out;
    int64_t out_stride;
};

// The next sequence after done_seq among a tile's n queries (INT_MAX: none left), and the
// positions [begin, end) its queries see: for thread 0 to publish to the block, which then takes
// that sequence's queries (the others masked).
__device__ __forceinline__ void next_tile_sequence(const int* q_seq, const int* q_pos, int n,
                                                   int window, int done_seq, int& seq, int& begin,
                                                   int& end) {
    int s = INT_MAX, b = INT_MAX, e = -1;
    for (int i = 0; i < n; ++i)
        if (q_seq[i] > done_seq && q_seq[i] < s) s = q_seq[i];
    for (int i = 0; i < n; ++i) {
        if (q_seq[i] != s) continue;
        b = min(b, first_seen(q_pos[i], window));
        e = max(e, q_pos[i] + 1);
    }
    seq = s;
    begin = b;
    end = e;
}

template <bool kF16>
__device__ __forceinline__ void load_rows(const void* base, int64_t first, int64_t row_stride,
                                          int j0, int positions, int n_rows, int dim, float* dst,
                                          int ld) {
    // Positions j0 .. j0 + n_rows - 1 (position j in row j mod positions after `first`) of dim
    // values (a multiple of 8) as floats, 8 values a thread at a time.
    const int per_row = dim / 8;
    for (int job = threadIdx.x; job < n_rows * per_row; job += kThreads) {
        const int r = job / per_row, c = 8 * (job % per_row);
        const int64_t at = first + ring_slot(j0 + r, positions) * row_stride + c;
        float v[8];
        if constexpr (kF16) {
            const uint4 raw =
                *reinterpret_cast<const uint4*>(static_cast<const __half*>(base) + at);
            const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 f = __half22float2(h[i]);
                v[2 * i] = f.x;
                v[2 * i + 1] = f.y;
            }
        } else {
            const float4* src =
                reinterpret_cast<const float4*>(static_cast<const float*>(base) + at);
            const float4 a = src[0], b = src[1];
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
            v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        }
        float4* d = reinterpret_cast<float4*>(dst + r * ld + c);
        d[0] = make_float4(v[0], v[1], v[2], v[3]);
        d[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
}

__device__ __forceinline__ void scale4(float4& v, float s) {
    v.x *= s, v.y *= s, v.z *= s, v.w *= s;
}

template <bool kF16, int kMaxValueDim, int kHeads>
__global__ void __launch_bounds__(kThreads)
    attention_tiled_kernel(const __grid_constant__ TiledArgs a) {
    extern __shared__ float4 shared4[];
    float* shared = reinterpret_cast<float*>(shared4);
    const int qld = a.dk + 4, kvld = (a.dk > a.dv ? a.dk : a.dv) + 4;
    float* Qs = shared;                             // [kHeads][kTileQueries][qld], scaled
    float* KVs = Qs + kHeads * kTileQueries * qld;  // [kTileKeys][kvld]: keys, then values
    float* Ps = KVs + kTileKeys * kvld;             // [kHeads][kTileQueries][kTileKeys]
    __shared__ int q_pos[kTileQueries], q_seq[kTileQueries];
    __shared__ int next_seq, seq_begin, seq_end;
    const int h0 = blockIdx.y * kHeads, t0 = blockIdx.x * kTileQueries;
    const int kvh = h0 / a.group;  // (kHeads divides the group)
    const int qi = threadIdx.x / kLanesPerQuery, sub = threadIdx.x % kLanesPerQuery;
    if (threadIdx.x < kTileQueries) {
        const int t = t0 + threadIdx.x;
        const bool real = t < a.n_tokens;
        q_pos[threadIdx.x] = real ? a.places[t].pos : -1;
        q_seq[threadIdx.x] = real ? a.places[t].seq : INT_MAX;
    }
    for (int job = threadIdx.x; job < kHeads * kTileQueries * a.dk; job += kThreads) {
        const int hh = job / (kTileQueries * a.dk), i = job / a.dk % kTileQueries, d = job % a.dk;
        const int t = t0 + i;
        Qs[(hh * kTileQueries + i) * qld + d] =
            t < a.n_tokens
                ? a.q[t * a.q_stride + static_cast<int64_t>(h0 + hh) * a.dk + d] * a.scale
                : 0.0f;
    }
    const int64_t k_row = static_cast<int64_t>(a.n_kv) * a.dk;
    const int64_t v_row = a.v_pos_stride;
    constexpr int kMaxDimVectors = kMaxValueDim / 32;  // float4s of output per thread and head
    float4 acc[kHeads][kMaxDimVectors];
    float m[kHeads], l[kHeads];
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
        m[hh] = -FLT_MAX, l[hh] = 0.0f;
#pragma unroll
        for (int u = 0; u < kMaxDimVectors; ++u) acc[hh][u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    int done_seq = -1;
    for (;;) {
        __syncthreads();
        if (threadIdx.x == 0) {
            next_tile_sequence(q_seq, q_pos, kTileQueries, a.window, done_seq, next_seq,
                               seq_begin, seq_end);
        }
        __syncthreads();
        const int seq = next_seq, first_key = seq_begin, n_keys = seq_end;
        if (seq == INT_MAX) break;
        done_seq = seq;
        const bool mine = q_seq[qi] == seq;
        const int my_pos = q_pos[qi], my_first = first_seen(my_pos, a.window);
        const int64_t seq_base = static_cast<int64_t>(seq) * a.positions;
        for (int j0 = first_key; j0 < n_keys; j0 += kTileKeys) {
            const int n = min(kTileKeys, n_keys - j0);
            __syncthreads();  // the last tile's values are read
            load_rows<kF16>(a.k, seq_base * k_row + static_cast<int64_t>(kvh) * a.dk, k_row, j0,
                            a.positions, n, a.dk, KVs, kvld);
            __syncthreads();
            // Scores of keys sub + 8 u, each head's.
            float s[kHeads][4];
#pragma unroll
            for (int hh = 0; hh < kHeads; ++hh)
#pragma unroll
                for (int u = 0; u < 4; ++u) s[hh][u] = 0.0f;
            for (int d = 0; d < a.dk; d += 4) {
                float4 kv[4];
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    kv[u] = *reinterpret_cast<const float4*>(KVs + (sub + 8 * u) * kvld + d);
#pragma unroll
                for (int hh = 0; hh < kHeads; ++hh) {
                    const float4 qv =
                        *reinterpret_cast<const float4*>(Qs + (hh * kTileQueries + qi) * qld + d);
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        s[hh][u] = fmaf(qv.x, kv[u].x, s[hh][u]);
                        s[hh][u] = fmaf(qv.y, kv[u].y, s[hh][u]);
                        s[hh][u] = fmaf(qv.z, kv[u].z, s[hh][u]);
                        s[hh][u] = fmaf(qv.w, kv[u].w, s[hh][u]);
                    }
                }
            }
#pragma unroll
            for (int hh = 0; hh < kHeads; ++hh) {
                float tile_max = -FLT_MAX;
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const int j = j0 + sub + 8 * u;
                    const bool visible = mine && sub + 8 * u < n && j >= my_first && j <= my_pos;
                    s[hh][u] = visible ? s[hh][u] : -INFINITY;
                    tile_max = fmaxf(tile_max, s[hh][u]);
                }
                for (int o = 1; o < kLanesPerQuery; o <<= 1)
                    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
                const float m_new = fmaxf(m[hh], tile_max);
                const float rescale = m[hh] == -FLT_MAX ? 0.0f : expf(m[hh] - m_new);
                float sum = 0.0f;
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const float p = s[hh][u] == -INFINITY ? 0.0f : expf(s[hh][u] - m_new);
                    Ps[(hh * kTileQueries + qi) * kTileKeys + sub + 8 * u] = p;
                    sum += p;
                }
                for (int o = 1; o < kLanesPerQuery; o <<= 1)
                    sum += __shfl_xor_sync(0xffffffffu, sum, o);
                if (tile_max != -FLT_MAX && tile_max != -INFINITY) {
                    l[hh] = l[hh] * rescale + sum;
                    m[hh] = m_new;
#pragma unroll
                    for (int u = 0; u < kMaxDimVectors; ++u) scale4(acc[hh][u], rescale);
                }
            }
            __syncthreads();  // scores done with the keys (and Ps published)
            if (!a.values_in_keys) {
                load_rows<kF16>(a.v, seq_base * v_row + static_cast<int64_t>(kvh) * a.v_head_stride,
                                v_row, j0, a.positions, n, a.dv, KVs, kvld);
                __syncthreads();
            }
            if (!mine) continue;
            for (int j = 0; j < n; ++j) {
                float p[kHeads];
                bool any = false;
#pragma unroll
                for (int hh = 0; hh < kHeads; ++hh) {
                    p[hh] = Ps[(hh * kTileQueries + qi) * kTileKeys + j];
                    any = any || p[hh] != 0.0f;
                }
                if (!any) continue;
#pragma unroll
                for (int u = 0; u < kMaxDimVectors; ++u) {
                    const int d = 4 * sub + 32 * u;
                    if (d < a.dv) {
                        const float4 vv = *reinterpret_cast<const float4*>(KVs + j * kvld + d);
#pragma unroll
                        for (int hh = 0; hh < kHeads; ++hh) {
                            acc[hh][u].x = fmaf(p[hh], vv.x, acc[hh][u].x);
                            acc[hh][u].y = fmaf(p[hh], vv.y, acc[hh][u].y);
                            acc[hh][u].z = fmaf(p[hh], vv.z, acc[hh][u].z);
                            acc[hh][u].w = fmaf(p[hh], vv.w, acc[hh][u].w);
                        }
                    }
                }
            }
        }
    }
    const int t = t0 + qi;
    if (t >= a.n_tokens) return;
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
        const int h = h0 + hh;
        if (a.sinks != nullptr) {
            // The sink joins the max and the sum (every query sees its own position: m is a
            // score).
            const float m_sink = fmaxf(m[hh], a.sinks[h]), rescale = expf(m[hh] - m_sink);
            l[hh] = l[hh] * rescale + expf(a.sinks[h] - m_sink);
#pragma unroll
            for (int u = 0; u < kMaxDimVectors; ++u) scale4(acc[hh][u], rescale);
        }
        float* dst = a.out + t * a.out_stride + static_cast<int64_t>(h) * a.dv;
        const float inv = l[hh] > 0.0f ? 1.0f / l[hh] : 0.0f;
#pragma unroll
        for (int u = 0; u < kMaxDimVectors; ++u) {
            const int d = 4 * sub + 32 * u;
            if (d < a.dv) {
                float4 o = acc[hh][u];
                scale4(o, inv);
                *reinterpret_cast<float4*>(dst + d) = o;
            }
        }
    }
}

// Shared memory of a tiled block for `heads` heads of dk and dv values.
inline size_t tiled_shared_bytes(int dk, int dv, int heads) {
    const int kvld = (dk > dv ? dk : dv) + 4;
    return sizeof(float) *
           (heads * kTileQueries * (dk + 4) + kTileKeys * kvld + heads * kTileQueries * kTileKeys);
}

// The most shared memory a block may take on the current device (attention.cu).
size_t max_block_shared_bytes();

// attention_mma.cu: prefill on tensor cores, for f16 caches of heads of 64, 128 or 256 keys and
// as many values (rows of an even number of floats).
bool attention_mma_takes(const KvLayer& kv, int64_t q_stride, int64_t out_stride);
void attention_mma(const TiledArgs& a, cudaStream_t stream);

// attention_wide.cu: the kernels for the wide heads (keys or values past kMaxHeadDim).
void launch_chunks_wide(bool f16, dim3 grid, size_t shared, cudaStream_t stream,
                        const AttentionArgs& a);
void launch_tiled_wide(bool f16, dim3 grid, size_t shared, cudaStream_t stream, const TiledArgs& a);

}  // namespace tandem::cuda::attention_kernels
