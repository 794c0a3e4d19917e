// Decode attention on tensor cores, for f16 caches of heads of 64 or 128 (keys and values alike)
// and groups of up to 16 query heads a kv head: a block takes one chunk of a query's positions
// for all the heads of a kv head, the heads being the 16 rows of mma.sync m16n8k16 (rows past
// the group are zeros). Each key and value row then crosses from memory once for the whole group,
// and a warp's 16 keys cost 32 mma instructions. The scalar kernel it replaces for these caches
// (attention_chunk_kernel, a block per query head) read every row once per head and spent a warp
// sum per key and head: after 4096 positions an H100's decode of a Qwen3-30B-A3B-shaped model (8
// heads a group) fell from 293 to 211 tok/s, where llama.cpp's fell from 297 to 290; a grouped
// scalar kernel spent as long (one warp per scheduler, stalled on its dependent sums: 56 µs a
// layer at 4096 positions under Nsight Compute).
//
// The fragments come straight from memory, no shared-memory staging: the order in which a
// score's dims are summed, and which output dims a column holds, are free to choose, and are
// chosen so that each lane's part of a key or value row is 16 consecutive bytes.
// - Scores S = Q·Kᵀ: lane (quad, pair) loads key row `quad` of each tile of 8 keys at dims
//   32 i + 8 pair .. + 7, which are the four words its b operand takes in k-steps 2 i and 2 i + 1;
//   the queries' a operand is built once with the same order of dims.
// - Values O += P·V, 16 keys a k-step: lane (quad, pair) loads value dims 64 h + 8 quad .. + 7 of
//   its four keys (2 pair, + 1, + 8, + 9), and byte permutes pair two keys' halves of one dim into
//   each b register: column `quad` of n-tile nt is dim 64 (nt / 8) + 8 quad + nt % 8.
// The queries and the softmax weights are rounded to f16 as the CPU backend does for f16 caches
// (and the prefill kernel on tensor cores). The warps of a block take the chunk's keys 16 at a
// time in turn, each with its own online softmax; at the end they merge through shared memory and
// the chunk's max, sum and values go to the scratch as attention_chunk_kernel's do, for
// combine_chunks (in the last block to finish, or in attention_combine_kernel).
#pragma once

#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "cuda/attention_kernels.cuh"
#include "cuda/early_launch.cuh"
#include "cuda/mma_f16.cuh"

namespace tandem::cuda::attention_kernels {

constexpr int kMmaDecodeHeads = kMaxBlockHeads;  // query heads a block: the rows of an mma
static_assert(kMmaDecodeHeads == 16);

// Whether a layer's decode takes the tensor-core kernel.
inline bool decode_mma_takes(const KvLayer& kv, int group) {
    return kv.f16 && !kv.values_in_keys && kv.dk == kv.dv && (kv.dk == 64 || kv.dk == 128) &&
           group <= kMmaDecodeHeads;
}

// Shared memory of a block of `heads` heads: the warps' partial values, maxima and sums, then
// the combine's weights, in the same place.
inline size_t decode_mma_shared_bytes(int dim, int heads, int n_chunks) {
    const int merge = kWarps * heads * (dim + 2), weights = heads * n_chunks;
    return sizeof(float) * (merge > weights ? merge : weights);
}

// Four halves' words of a 16-byte load.
__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Positions a decode chunk holds at least: one 16-key pass of the block's warps. A context of
// up to this many positions is one chunk (where the chunks are sized per query), whose block
// writes the output itself.
constexpr int kMinDecodeChunk = 16 * kWarps;

// The chunk's partial result into the scratch, or with `lone` (the query's only chunk) the
// heads' output itself, as combine_chunks would make it of the one chunk (its weight 1, its sum
// the total: the same bits), rounded for the next product where a.rounding asks.
template <int kDim>
__device__ __forceinline__ void decode_mma_chunk(const AttentionArgs& a, TokenPlace place,
                                                 HeadRange heads, int tq, ChunkSpan span,
                                                 int64_t slot0, float* shared, bool lone) {
    const int t = a.token0 + tq;
    constexpr int kSteps = kDim / 16;    // k-steps of a score
    constexpr int kGroups = kDim / 32;   // a lane's 16-byte pieces of a key row
    constexpr int kPieces = kDim / 64;   // and of a value row
    constexpr int kDimTiles = kDim / 8;  // n-tiles of the output
    constexpr int kKeys = 16;            // keys a warp takes at a time
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quad = lane / 4, pair = lane % 4;
    const int n = heads.count;

    // The queries' a fragments, rows quad and quad + 8, in the dims' order of the keys' loads.
    uint32_t qf[kSteps][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = quad + 8 * r;
        const float* q =
            a.q + t * a.q_stride + static_cast<int64_t>(heads.first + row) * kDim + 8 * pair;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
            float v[8] = {};
            if (row < n) {
#pragma unroll
                for (int e = 0; e < 8; ++e) v[e] = q[32 * g + e];
            }
            qf[2 * g][r] = half2_bits(v[0], v[1]);
            qf[2 * g][2 + r] = half2_bits(v[2], v[3]);
            qf[2 * g + 1][r] = half2_bits(v[4], v[5]);
            qf[2 * g + 1][2 + r] = half2_bits(v[6], v[7]);
        }
    }

    const int kvh = heads.first / a.group;
    const int64_t seq_base = static_cast<int64_t>(place.seq) * a.positions;
    const int64_t k_row = static_cast<int64_t>(a.n_kv) * kDim;
    const __half* K = static_cast<const __half*>(a.k) + static_cast<int64_t>(kvh) * kDim;
    const __half* V = static_cast<const __half*>(a.v) + static_cast<int64_t>(kvh) * a.v_head_stride;
    float o[kDimTiles][4];
#pragma unroll
    for (int nt = 0; nt < kDimTiles; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int j0 = span.j0 + warp * kKeys; j0 < span.j1; j0 += kWarps * kKeys) {
        const int keys = min(kKeys, span.j1 - j0);
        // This warp's 16 keys and values, every load in flight at once (zeros past the chunk).
        uint4 kr[2][kGroups], vr[4][kPieces];
#pragma unroll
        for (int kt = 0; kt < 2; ++kt) {
            const int key = 8 * kt + quad;
            const int64_t at = (seq_base + ring_slot(j0 + key, a.positions)) * k_row + 8 * pair;
#pragma unroll
            for (int g = 0; g < kGroups; ++g)
                kr[kt][g] = key < keys ? *reinterpret_cast<const uint4*>(K + at + 32 * g)
                                       : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int key = 2 * pair + e % 2 + 8 * (e / 2);
            const int64_t at =
                (seq_base + ring_slot(j0 + key, a.positions)) * a.v_pos_stride + 8 * quad;
#pragma unroll
            for (int h = 0; h < kPieces; ++h)
                vr[e][h] = key < keys ? *reinterpret_cast<const uint4*>(V + at + 64 * h)
                                      : make_uint4(0, 0, 0, 0);
        }

        float s[2][4] = {};
#pragma unroll
        for (int kt = 0; kt < 2; ++kt) {
#pragma unroll
            for (int g = 0; g < kGroups; ++g) {
                mma_f16(s[kt], qf[2 * g], word(kr[kt][g], 0), word(kr[kt][g], 1));
                mma_f16(s[kt], qf[2 * g + 1], word(kr[kt][g], 2), word(kr[kt][g], 3));
            }
        }
        // The online softmax of rows quad (e < 2) and quad + 8 over the quad's lanes.
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int kt = 0; kt < 2; ++kt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = 8 * kt + 2 * pair + e % 2;
                s[kt][e] = key < keys ? s[kt][e] * a.scale : -INFINITY;
                tile_max[e / 2] = fmaxf(tile_max[e / 2], s[kt][e]);
            }
        }
        float rescale[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
            const float m_new = fmaxf(m[r], tile_max[r]);  // finite: the tile has a key
            rescale[r] = expf(m[r] - m_new);
            m[r] = m_new;
        }
#pragma unroll
        for (int kt = 0; kt < 2; ++kt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[kt][e] = expf(s[kt][e] - m[e / 2]);
                sum[e / 2] += s[kt][e];
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
            l[r] = l[r] * rescale[r] + sum[r];
        }
        const uint32_t pf[4] = {half2_bits(s[0][0], s[0][1]), half2_bits(s[0][2], s[0][3]),
                                half2_bits(s[1][0], s[1][1]), half2_bits(s[1][2], s[1][3])};
#pragma unroll
        for (int nt = 0; nt < kDimTiles; ++nt) {
            o[nt][0] *= rescale[0], o[nt][1] *= rescale[0];
            o[nt][2] *= rescale[1], o[nt][3] *= rescale[1];
            // Column quad of n-tile nt: half nt % 8 of each key's piece nt / 8.
            const int h = nt / 8, half = nt % 8;
            const uint32_t select = half % 2 ? 0x7632u : 0x5410u;
            const uint32_t b0 =
                __byte_perm(word(vr[0][h], half / 2), word(vr[1][h], half / 2), select);
            const uint32_t b1 =
                __byte_perm(word(vr[2][h], half / 2), word(vr[3][h], half / 2), select);
            mma_f16(o[nt], pf, b0, b1);
        }
    }

    // The warps' results merged: each warp's rows of the group into shared memory, then every
    // head's values rescaled to the common max and summed in warp order.
    float* part = shared;                          // [kWarps][n][kDim]
    float* stats = part + kWarps * n * kDim;       // [kWarps][n][2]
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = quad + 8 * r;
        if (row >= n) continue;
        float* dst = part + (warp * n + row) * kDim;
#pragma unroll
        for (int nt = 0; nt < kDimTiles; ++nt) {
            const int base = 64 * (nt / 8) + nt % 8;
            dst[base + 8 * (2 * pair)] = o[nt][2 * r];
            dst[base + 8 * (2 * pair + 1)] = o[nt][2 * r + 1];
        }
        if (pair == 0) {
            stats[2 * (warp * n + row)] = m[r];
            stats[2 * (warp * n + row) + 1] = l[r];
        }
    }
    __syncthreads();
    if (lone) {
        // A thread a run of 8 values of a head, as combine_chunks' threads.
        constexpr int kRuns = kDim / 8;
        for (int job = threadIdx.x; job < n * kRuns; job += kThreads) {
            const int h = job / kRuns, d = 8 * (job % kRuns);
            float top = -INFINITY;
            for (int w = 0; w < kWarps; ++w) top = fmaxf(top, stats[2 * (w * n + h)]);
            float v[8] = {}, total = 0.0f;
            for (int w = 0; w < kWarps; ++w) {
                const float weight = expf(stats[2 * (w * n + h)] - top);
                const float* src = part + (w * n + h) * kDim + d;
#pragma unroll
                for (int k = 0; k < 8; ++k) v[k] += weight * src[k];
                total += weight * stats[2 * (w * n + h) + 1];
            }
#pragma unroll
            for (int k = 0; k < 8; ++k) v[k] = v[k] / total;
            const int64_t col = static_cast<int64_t>(heads.first + h) * kDim + d;
            store_run<8>(a.out + t * a.out_stride + col, v);
            if (a.rounding != gpu::ActivationRounding::kNone) round_combined(a, tq, col, v);
        }
        return;
    }
    for (int job = threadIdx.x; job < n * kDim; job += kThreads) {
        const int h = job / kDim, d = job % kDim;
        float top = -INFINITY;
        for (int w = 0; w < kWarps; ++w) top = fmaxf(top, stats[2 * (w * n + h)]);
        float v = 0.0f, total = 0.0f;
        for (int w = 0; w < kWarps; ++w) {
            const float weight = expf(stats[2 * (w * n + h)] - top);  // 0 for a warp without keys
            v += weight * part[(w * n + h) * kDim + d];
            total += weight * stats[2 * (w * n + h) + 1];
        }
        const int64_t slot = slot0 + static_cast<int64_t>(h) * a.n_chunks;
        a.values[slot * kDim + d] = v;
        if (d == 0) {
            a.stats[2 * slot] = top;
            a.stats[2 * slot + 1] = total;
        }
    }
}

// Block (chunk, kv head, query of the slice), for all the heads of the kv head's group. With
// a.done, the last chunk block to finish combines the heads' chunks (else
// attention_combine_kernel does, a launch later).
template <int kDim>
__global__ void __launch_bounds__(kThreads)
    attention_decode_mma_kernel(const __grid_constant__ AttentionArgs a) {
    extern __shared__ float4 shared4[];
    float* shared = reinterpret_cast<float*>(shared4);
    wait_for_previous_kernel();
    const int c = blockIdx.x, tq = blockIdx.z;
    const HeadRange heads = block_head_range(a, blockIdx.y);
    const TokenPlace place = a.places[a.token0 + tq];
    const int64_t slot0 = (static_cast<int64_t>(tq) * a.n_head + heads.first) * a.n_chunks + c;
    const ChunkSpan span = chunk_span(a, place, c);
    // A context within the first chunk (with a.chunk 0 and several chunks, up to a.min_chunk
    // positions; with one chunk, any): its block writes the output, the others have nothing to
    // do; no scratch, no counter. (With sinks, or a combine kernel to follow, the combine takes
    // it.)
    const bool lone =
        a.done != nullptr && a.sinks == nullptr && chunk_span(a, place, 1).j0 > place.pos;
    if (lone) {
        if (c == 0) decode_mma_chunk<kDim>(a, place, heads, tq, span, slot0, shared, true);
        return;
    }
    if (span.j0 < span.j1) {
        decode_mma_chunk<kDim>(a, place, heads, tq, span, slot0, shared, false);
    } else if (threadIdx.x < heads.count) {
        const int64_t slot = slot0 + static_cast<int64_t>(threadIdx.x) * a.n_chunks;
        a.stats[2 * slot] = -FLT_MAX;
        a.stats[2 * slot + 1] = 0.0f;
    }
    if (a.done != nullptr && last_chunk_block(a, heads, tq)) combine_chunks(a, heads, tq, shared);
}

}  // namespace tandem::cuda::attention_kernels
