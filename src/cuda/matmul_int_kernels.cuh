// The integer matrix kernels: weights of a format with an integer view (cuda/block_int.h) times
// activations given as q8 codes and scales (Q8Rows), as the CPU's dot products take them. The
// codes multiply in integer arithmetic — dp4a for matrix-vector products, int8 tensor-core MMAs
// for tiles — which is exact, so a row's sum is as close to the CPU's as the float kernels' f64
// sums made it, at a fraction of the instructions and of the activation bytes; the weights' and
// activations' scales apply once per group of 8 (dp4a) or 16 (MMA) values.
#pragma once

#include "cuda/async_copy.cuh"
#include "cuda/block_int.h"
#include "cuda/glu_value.cuh"
#include "cuda/matmul_kernels.cuh"
#include "cuda/q8_round.cuh"

namespace tandem::cuda {

// Group sums to floats (they are far below 2^22): an add and a subtract, where a conversion
// instruction would issue at an eighth of the float rate.
using gpu::block_detail::small_int_to_float;

// acc + the dot product of a chunk's eight codes with eight activation codes.
__device__ __forceinline__ int dot8(const gpu::IntChunk& w, uint2 a, int acc = 0) {
    return __dp4a(static_cast<int>(w.lo), static_cast<int>(a.x),
                  __dp4a(static_cast<int>(w.hi), static_cast<int>(a.y), acc));
}

// acc + the sum of eight activation codes.
__device__ __forceinline__ int sum8(uint2 a, int acc = 0) {
    return __dp4a(static_cast<int>(a.x), 0x01010101,
                  __dp4a(static_cast<int>(a.y), 0x01010101, acc));
}

// ---------------------------------------------------------------- matrix-vector (decode)

// Chunks a lane takes at once: whole groups (kGroup values sharing a scale), at least 32
// values, and for q4_K and q5_K 64 (the two groups whose codes share 32 bytes, low and high
// nibbles), so that a lane decodes each group's scale once and reads its codes in wide loads.
template <GgmlType F>
constexpr int kSpanChunks = (F == GgmlType::kQ4_K || F == GgmlType::kQ5_K) ? 8 : 4;

// How the lanes of a block share rows, so that a row of n spans keeps about one span per lane:
// long rows split over 2 or 4 warps, short rows (an expert's down projection: 12 spans of q4_K)
// take 16 or 8 lanes each, a warp then holding 2 or 4 row groups.
struct MatvecLanes {
    int warps_per_row;  // 1, 2 or 4
    int lanes_per_row;  // 32, 16 or 8 (below 32 only with one warp per row)
};
inline MatvecLanes matvec_lanes(int64_t n_spans) {
    if (n_spans > 32) return {n_spans <= 64 ? 2 : 4, 32};
    return {1, n_spans <= 8 ? 8 : n_spans <= 16 ? 16 : 32};
}

// The block's share of MatvecParams::glu_gate: route j's act(gate) · up rounded through q8 blocks
// of kValues values into codes (p.cols of them) and scales (p.cols / 32), a warp per q8 block,
// as glu_round_activations()'s kernel rounds them.
template <int kValues>
__device__ __forceinline__ void round_glu_codes(const MatvecParams& p, int j, int8_t* codes,
                                                float* scales) {
    constexpr int kPerLane = kValues / 32;
    const float* gate = p.glu_gate + static_cast<int64_t>(j) * p.glu_stride;
    const float* up = p.glu_up + static_cast<int64_t>(j) * p.glu_stride;
    const int lane = threadIdx.x % 32;
    const int n_blocks = static_cast<int>(p.cols / kValues);
    for (int b = threadIdx.x / 32; b < n_blocks; b += kMatvecThreads / 32) {
        const int col0 = b * kValues + lane * kPerLane;
        float v[kPerLane];
#pragma unroll
        for (int i = 0; i < kPerLane; ++i)
            v[i] = glu_value(p.glu_kind, gate[col0 + i], up[col0 + i], p.gelu_table);
        round_q8_lanes<kPerLane, 32>(v, lane, nullptr, codes + col0, scales + b * (kValues / 32));
    }
}

// The dynamic shared memory of a matvec_int_kernel launch: MatvecParams::glu_gate's codes and
// scales.
inline size_t glu_codes_bytes(const MatvecParams& p) {
    return p.glu_gate != nullptr ? static_cast<size_t>(p.cols) + p.cols / 32 * sizeof(float) : 0;
}

// Block: 128 threads; lanes_per_row L lanes of warps w .. w + S - 1 (S = warps_per_row) share R
// rows (of target blockIdx.z: the operands' matrix or a sibling) for up to C columns. Lane i of
// a row group takes spans i, i + L S, ... of every row: kSpanChunks chunks, whose codes multiply
// the activations' in integer arithmetic (dp4a) group by group, each group's integer sum scaled
// once by the weights' scale (plus its min times the activations' code sum) and the
// activations'. A lane's groups add in f32, the lanes' and warps' sums in f64.
template <GgmlType F, int C, int R>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_int_kernel(const __grid_constant__ MatvecParams p) {
    using B = gpu::BlockFormat<F>;
    using I = gpu::BlockInt<F>;
    constexpr int kSpan = kSpanChunks<F>;
    constexpr int kGroupChunks = I::kGroup / 8;
    constexpr int kSpansPerBlock = B::kValues / (8 * kSpan);
    static_assert(kSpan % kGroupChunks == 0 && B::kValues % (8 * kSpan) == 0,
                  "a span holds whole groups and a block whole spans");
    constexpr int kWarps = kMatvecThreads / 32;
    constexpr int kMaxGroups = 4;  // row groups per warp (lanes_per_row 8)
    __shared__ double partial[kWarps][kMaxGroups][R][C];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int S = p.warps_per_row, L = p.lanes_per_row, G = 32 / L;
    const int part = warp % S, sub = lane / L, sub_lane = lane % L;
    const int64_t group0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / S) + warp / S) * G;
    const int64_t row0 = (group0 + sub) * R;
    const uint8_t* w = p.w;
    const int8_t* xq = p.xq;
    const float* xd = p.xd;
    float* y = p.y;
    float scale = p.scale;
    int64_t rows = p.rows, y_stride = p.y_stride;
    const float* expert_scales = p.expert_scales;
    const float* expert_bias = p.expert_bias;
    if (blockIdx.z > 0) {
        const SiblingTarget& s = p.siblings[blockIdx.z - 1];
        w = s.w;
        y = s.y;
        y_stride = s.y_stride;
        scale = s.scale;
        rows = s.rows;
        expert_scales = s.expert_scales;
        expert_bias = s.expert_bias;
    }
    if (p.prefetch) {
        const int64_t block_rows = static_cast<int64_t>(kWarps / S) * G * R;
        prefetch_block_rows(p, w, rows, static_cast<int64_t>(blockIdx.x) * block_rows, block_rows);
    }
    wait_for_previous_kernel();
    const float* bias = nullptr;
    int n_cols = p.n_cols;
    if (p.routes != nullptr) {
        const int j = blockIdx.y;
        const int e = p.routes[j].expert;
        if (e < 0) return;  // the whole block: no barrier is skipped by some threads only
        w += static_cast<size_t>(e) * p.expert_stride;
        if (expert_scales != nullptr) scale = expert_scales[e];
        if (expert_bias != nullptr) bias = expert_bias + e * p.bias_stride;
        xq += static_cast<int64_t>(j / p.x_div) * p.xq_stride;
        xd += static_cast<int64_t>(j / p.x_div) * p.xd_stride;
        y += static_cast<int64_t>(j) * y_stride;
        n_cols = 1;
        if constexpr (C == 1) {
            if (p.glu_gate != nullptr) {
                extern __shared__ __align__(16) int8_t glu_codes[];  // glu_codes_bytes(p)
                float* glu_scales = reinterpret_cast<float*>(glu_codes + p.cols);
                if (p.glu_block == 256) {
                    round_glu_codes<256>(p, j, glu_codes, glu_scales);
                } else {
                    round_glu_codes<32>(p, j, glu_codes, glu_scales);
                }
                __syncthreads();
                xq = glu_codes;
                xd = glu_scales;
            }
        }
    } else {
        // Dense: columns blockIdx.y · C .. of the n_cols (a prefill product of few rows).
        const int c0 = static_cast<int>(blockIdx.y) * C;
        xq += static_cast<int64_t>(c0) * p.xq_stride;
        xd += static_cast<int64_t>(c0) * p.xd_stride;
        y += static_cast<int64_t>(c0) * y_stride;
        n_cols = min(C, n_cols - c0);
    }
    float acc[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) acc[r][c] = 0.0f;

    // Rows past the end read row 0 again (valid memory) and are never written.
    const uint8_t* wrow[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
        wrow[r] = w + (row0 + r < rows ? row0 + r : 0) * static_cast<int64_t>(p.row_bytes);
    const int n_spans = row0 < rows ? static_cast<int>(p.cols / (8 * kSpan)) : 0;
    for (int s = part * L + sub_lane; s < n_spans; s += S * L) {
        const int blk = s / kSpansPerBlock;
        const int first = (s % kSpansPerBlock) * kSpan;  // the span's first chunk in its block
        const int64_t col0 = static_cast<int64_t>(s) * kSpan * 8;
#pragma unroll
        for (int g = 0; g < kSpan / kGroupChunks; ++g) {
            int dot[R][C];
            int code_sum[C];
            float wscale[R], wmin[R];
#pragma unroll
            for (int c = 0; c < C; ++c) {
                code_sum[c] = 0;
#pragma unroll
                for (int r = 0; r < R; ++r) dot[r][c] = 0;
            }
#pragma unroll
            for (int k = 0; k < kGroupChunks; ++k) {
                const int chunk = g * kGroupChunks + k;
                gpu::IntChunk wc[R];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    wc[r] = I::chunk(wrow[r] + blk * B::kBytes, first + chunk, p.tables);
                    if (k == 0) wscale[r] = wc[r].scale, wmin[r] = wc[r].min;
                }
#pragma unroll
                for (int c = 0; c < C; ++c) {
                    if (c >= n_cols) break;
                    const uint2 a =
                        *reinterpret_cast<const uint2*>(xq + c * p.xq_stride + col0 + chunk * 8);
                    if constexpr (I::kHasMin) code_sum[c] = sum8(a, code_sum[c]);
#pragma unroll
                    for (int r = 0; r < R; ++r) dot[r][c] = dot8(wc[r], a, dot[r][c]);
                }
            }
            // The activations' scale covers 32 values: a group of 16 or 32 lies within one.
            const int64_t act_block = (col0 + g * I::kGroup) / 32;
#pragma unroll
            for (int c = 0; c < C; ++c) {
                if (c >= n_cols) break;
                const float da = xd[c * p.xd_stride + act_block];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    float v = wscale[r] * small_int_to_float(dot[r][c]);
                    if constexpr (I::kHasMin)
                        v = fmaf(wmin[r], small_int_to_float(code_sum[c]), v);
                    acc[r][c] = fmaf(da, v, acc[r][c]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) {
            // The sum over the row group's L lanes (xor partners stay within the group).
            double v = static_cast<double>(acc[r][c]);
            for (int o = L / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (sub_lane == 0) partial[warp][sub][r][c] = v;
        }
    __syncthreads();
    // The first warp of each row group writes the group's rows.
    if (part == 0) {
        for (int i = lane; i < G * R * C; i += 32) {
            const int gi = i / (R * C), r = i / C % R, c = i % C;
            const int64_t row = (group0 + gi) * R + r;
            if (row >= rows || c >= n_cols) continue;
            double v = 0.0;
            for (int k = 0; k < S; ++k) v += partial[warp + k][gi][r][c];
            y[c * y_stride + row] =
                static_cast<float>(v) * scale + (bias != nullptr ? bias[row] : 0.0f);
        }
    }
}

// R rows a row group: 4 for one column (fewer, longer blocks: a routed gate and up of 8 routes is
// then one wave of an H100's SMs, not 1.2; decode 257 tok/s against 248 with 2, 7 December), 2
// for more columns (their registers).
template <GgmlType F, int C>
void launch_matvec_int(const MatvecParams& p, int n_jobs, cudaStream_t stream, int n_targets) {
    constexpr int R = C == 1 ? 4 : 2;
    const int64_t rows = p.widest_rows(n_targets);
    MatvecParams q = p;
    const MatvecLanes lanes = matvec_lanes(p.cols / (8 * kSpanChunks<F>));
    q.warps_per_row = lanes.warps_per_row;
    q.lanes_per_row = lanes.lanes_per_row;
    q.prefetch = weight_prefetch_enabled();
    const int64_t rows_per_block = static_cast<int64_t>(R) * (32 / lanes.lanes_per_row) *
                                   (kMatvecThreads / 32 / lanes.warps_per_row);
    const dim3 grid(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block),
                    static_cast<unsigned>(n_jobs), static_cast<unsigned>(n_targets));
    launch_early(matvec_int_kernel<F, C, R>, grid, kMatvecThreads, glu_codes_bytes(q), stream,
                 "matvec_int_kernel", q);
}

// ---------------------------------------------------------------- int8 tensor-core tiles

// mma.sync m16n8k16, s8 × s8 → s32 (sm_80 and later). Fragments (PTX ISA, "mma.m16n8k16"):
// a0 = A[g][4t .. 4t+3], a1 = A[g+8][4t ..]; b0 = B[4t .. 4t+3][g]; c0, c1 = C[g][2t, 2t+1],
// c2, c3 = C[g+8][2t, 2t+1], with g = lane / 4 and t = lane % 4.
__device__ __forceinline__ void mma_s8_16x8x16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
}

// Block: 4 warps over 64 weight rows × 64 token rows. The weights' blocks (raw, as in the file)
// and the activations' codes and scales come to shared memory in stages of whole weight blocks
// (at least kIntTileK values) by asynchronous copies, two stages deep: the copies of stage s + 1
// fly while stage s is decoded and multiplied (without them, each step waited for its loads:
// 18 % occupancy, bound by load latency). A stage is taken kIntTileK values at a time: the
// weights' codes (with each row's scale and min per group) are decoded from the raw blocks in
// shared memory, the sums of the activations' codes per group of 16 computed (formats with a
// min), and warp w multiplies its 32 × 32 quarter as 2 × 4 MMAs per 16 values, scales each
// group's integer sums and adds them up in f32 (as llama.cpp's integer tiles do; f64 sums cost a
// third of the registers, and with them the blocks an SM can keep in flight). The result goes
// through shared memory so that rows and columns past the edges are never written.
constexpr int kIntTileK = 128;               // k values decoded and multiplied at a time
constexpr int kIntLd = kIntTileK / 4 + 4;    // words per shared row (padded: no conflicts)
constexpr int kIntSteps16 = kIntTileK / 16;  // MMA k-steps (16 values) per kIntTileK

// The dynamic shared memory of the two stages (which the result tile reuses), for format F.
template <GgmlType F>
struct IntTileLayout {
    using B = gpu::BlockFormat<F>;
    static constexpr int kStageValues = B::kValues > kIntTileK ? B::kValues : kIntTileK;
    static constexpr int kSubSteps = kStageValues / kIntTileK;
    static constexpr int kStageBlocks = kStageValues / B::kValues;
    static constexpr int kRawBytes = kStageBlocks * B::kBytes;  // a row's blocks of a stage
    // A row's raw bytes sit at the offset of their global address mod 16 (so the decoders'
    // aligned loads stay aligned), copied in words from the word below.
    static constexpr int kRawLd = (kRawBytes + 18 + 15) / 16 * 16;
    static constexpr int kActLd = kStageValues + 16;  // bytes per token row (no conflicts)
    static constexpr int kActScales = kStageValues / 32;
    static constexpr size_t kRaw = 2 * kTileRows * kRawLd;
    static constexpr size_t kAct = 2 * kTileTokens * kActLd;
    static constexpr size_t kActD = 2 * kTileTokens * kActScales * sizeof(float);
    static constexpr size_t kStages = kRaw + kAct + kActD;
    static constexpr size_t kCs = kTileRows * (kTileTokens + kTilePad) * sizeof(float);
    static_assert(kCs <= kStages, "the result tile reuses the stages' memory");
};

// Issues the copies of stage s into buffer `buf`: each row's raw blocks (in 16-byte pieces where
// every block is 16-byte aligned, else in words), each token's codes (16 bytes a piece)
// and scales; codes and scales past the end or of absent tokens are zeros.
template <GgmlType F>
__device__ __forceinline__ void issue_int_stage(const TileParams& p, const uint8_t* w,
                                                int64_t src_rows, int64_t row0,
                                                const int32_t* token_row, int64_t s, int buf,
                                                uint8_t* raw, uint8_t* act, float* act_d,
                                                bool wide) {
    using L = IntTileLayout<F>;
    using B = gpu::BlockFormat<F>;
    const int64_t blocks_per_row = p.cols / B::kValues;
    const int64_t first_block = s * L::kStageBlocks;
    const int stage_blocks =
        static_cast<int>(min(static_cast<int64_t>(L::kStageBlocks), blocks_per_row - first_block));
    const int stage_bytes = stage_blocks * B::kBytes;
    uint8_t* raw_buf = raw + static_cast<size_t>(buf) * kTileRows * L::kRawLd;
    if (wide) {
        constexpr int kPieces = L::kRawBytes / 16;
        for (int job = threadIdx.x; job < kTileRows * kPieces; job += blockDim.x) {
            const int i = job / kPieces, c = job % kPieces;
            if (row0 + i >= src_rows || 16 * c >= stage_bytes) continue;
            const uint8_t* g = w + (row0 + i) * p.row_bytes + first_block * B::kBytes + 16 * c;
            copy_async<16>(raw_buf + i * L::kRawLd + 16 * c, g);
        }
    } else {
        constexpr int kWords = (L::kRawBytes + 6) / 4 + 1;
        for (int job = threadIdx.x; job < kTileRows * kWords; job += blockDim.x) {
            const int i = job / kWords, c = job % kWords;
            if (row0 + i >= src_rows) continue;
            const uint8_t* g = w + (row0 + i) * p.row_bytes + first_block * B::kBytes;
            const uintptr_t a = reinterpret_cast<uintptr_t>(g);
            const uintptr_t from = a & ~uintptr_t{3}, to = (a + stage_bytes + 3) & ~uintptr_t{3};
            if (from + 4 * c >= to) continue;
            copy_async<4>(raw_buf + i * L::kRawLd + (a & 15) - (a & 3) + 4 * c,
                          reinterpret_cast<const void*>(from + 4 * c));
        }
    }
    const int64_t col0 = s * L::kStageValues;
    uint8_t* act_buf = act + static_cast<size_t>(buf) * kTileTokens * L::kActLd;
    constexpr int kPieces = L::kStageValues / 16;
    for (int job = threadIdx.x; job < kTileTokens * kPieces; job += blockDim.x) {
        const int i = job / kPieces, c = job % kPieces;
        const int tok = token_row[i];
        const int64_t col = col0 + 16 * c;
        const bool absent = tok < 0 || col >= p.cols;
        copy_async<16>(act_buf + i * L::kActLd + 16 * c,
                       absent ? p.xq : p.xq + tok * p.xq_stride + col, absent);
    }
    float* d_buf = act_d + static_cast<size_t>(buf) * kTileTokens * L::kActScales;
    for (int job = threadIdx.x; job < kTileTokens * L::kActScales; job += blockDim.x) {
        const int i = job / L::kActScales, c = job % L::kActScales;
        const int tok = token_row[i];
        const int64_t col = col0 + 32 * c;
        const bool absent = tok < 0 || col >= p.cols;
        copy_async<4>(d_buf + job, absent ? p.xd : p.xd + tok * p.xd_stride + col / 32, absent);
    }
}

// Three blocks an SM where shared memory allows (the 4-bit formats): registers capped at 168
// (200 uncapped, two blocks an SM; four blocks' 128 would spill). With two, Nsight Compute saw the
// tiles stalled on latency; with three, 48-layer q4_K prompts of 512 and 4096 tokens ran 15 and
// 13 % faster (H100, 7 December: 6690 to 7721 and 8424 to 9550 tok/s), issue slots 67 % busy.
template <GgmlType F>
__global__ void __launch_bounds__(128, 3) tile_int_kernel(const __grid_constant__ TileParams p) {
    using B = gpu::BlockFormat<F>;
    using I = gpu::BlockInt<F>;
    using L = IntTileLayout<F>;
    constexpr int kChunks = B::kValues / 8;
    constexpr int kGroups = kIntTileK / I::kGroup;  // weight scales per row and step
    constexpr int kCLd = kTileTokens + kTilePad;
    constexpr int kWeightJobs = kTileRows * (kIntTileK / 8) / 128;  // chunks per thread
    constexpr int kSumJobs = kTileTokens * kGroups / 128;           // group code sums per thread
    static_assert(kTileTokens * kGroups % 128 == 0, "the threads share the group sums evenly");
    constexpr int kActWords = L::kActLd / 4;
    static_assert(I::kGroup == 16 || I::kGroup == 32, "groups of 16 or 32 values");
    extern __shared__ __align__(16) uint8_t stage_memory[];
    uint8_t* raw = stage_memory;
    uint8_t* act = raw + L::kRaw;
    float* act_d = reinterpret_cast<float*>(act + L::kAct);
    __shared__ uint32_t Wq[kTileRows * kIntLd];
    __shared__ float Ws[kTileRows][kGroups], Wm[kTileRows][kGroups];
    __shared__ float Asum[kTileTokens][kGroups];
    __shared__ int32_t token_row[kTileTokens];
    __shared__ int32_t out_row[kTileTokens];

    const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
    TileSource src;
    if (!tile_source(p, token_row, out_row, src)) return;
    const uint8_t* w = src.w;
    const float scale = src.scale;
    const float* bias = src.bias;
    __syncthreads();
    // 16-byte pieces where every block starts 16-byte aligned (one answer per block): else a
    // partial last stage's pieces would reach past the row.
    const bool wide =
        B::kBytes % 16 == 0 && p.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int wr = warp / 2, wc = warp % 2;
    // Which of the warp's four 8-token column blocks hold a token: a routed tile holds an
    // expert's routes only (a prefill of 512 tokens routes about 32 to each of 128 experts), and
    // the MMAs and scaling of empty column blocks are skipped.
    const uint32_t present = __ballot_sync(0xffffffffu, token_row[32 * wc + lane] >= 0);
    const auto column_block_empty = [present](int j) {
        return ((present >> (8 * j)) & 0xffu) == 0;
    };
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    const int64_t n_stages = (p.cols + L::kStageValues - 1) / L::kStageValues;
    issue_int_stage<F>(p, w, src.rows, row0, token_row, 0, 0, raw, act, act_d, wide);
    commit_copies();
    for (int64_t s = 0; s < n_stages; ++s) {
        const int buf = static_cast<int>(s & 1);
        if (s + 1 < n_stages) {
            issue_int_stage<F>(p, w, src.rows, row0, token_row, s + 1, buf ^ 1, raw, act, act_d,
                               wide);
            commit_copies();
            wait_copies<1>();
        } else {
            wait_copies<0>();
        }
        __syncthreads();
        const uint8_t* raw_buf = raw + static_cast<size_t>(buf) * kTileRows * L::kRawLd;
        const uint8_t* act_buf = act + static_cast<size_t>(buf) * kTileTokens * L::kActLd;
        const uint32_t* act_words = reinterpret_cast<const uint32_t*>(act_buf);
        const float* d_buf = act_d + static_cast<size_t>(buf) * kTileTokens * L::kActScales;
#pragma unroll 1
        for (int sub = 0; sub < L::kSubSteps; ++sub) {
            const int64_t k0 = s * L::kStageValues + sub * kIntTileK;
            // Weights: 64 rows × kIntTileK / 8 chunks from the raw blocks; past the row's end,
            // zero codes and scales.
#pragma unroll
            for (int n = 0; n < kWeightJobs; ++n) {
                const int job = threadIdx.x + 128 * n;
                const int i = job / (kIntTileK / 8), c = job % (kIntTileK / 8);
                const int64_t row = row0 + i;
                const int ch = sub * (kIntTileK / 8) + c;  // chunk of the stage
                gpu::IntChunk v;
                if (row < src.rows && k0 + 8 * c < p.cols) {
                    const uintptr_t a = reinterpret_cast<uintptr_t>(w + row * p.row_bytes) +
                                        static_cast<uintptr_t>(s) * L::kRawBytes;
                    v = I::chunk(raw_buf + i * L::kRawLd + (a & 15) + (ch / kChunks) * B::kBytes,
                                 ch % kChunks, p.tables);
                }
                Wq[i * kIntLd + 2 * c] = v.lo;
                Wq[i * kIntLd + 2 * c + 1] = v.hi;
                if ((8 * c) % I::kGroup == 0) {
                    Ws[i][8 * c / I::kGroup] = v.scale;
                    Wm[i][8 * c / I::kGroup] = v.min;
                }
            }
            if constexpr (I::kHasMin) {
#pragma unroll
                for (int n = 0; n < kSumJobs; ++n) {
                    const int job = threadIdx.x + 128 * n;
                    const int i = job / kGroups, grp = job % kGroups;
                    const uint4* codes = reinterpret_cast<const uint4*>(
                        act_buf + i * L::kActLd + sub * kIntTileK + I::kGroup * grp);
                    int sum = 0;
#pragma unroll
                    for (int q = 0; q < I::kGroup / 16; ++q) {
                        const uint4 a = codes[q];
                        sum = sum8(make_uint2(a.z, a.w), sum8(make_uint2(a.x, a.y), sum));
                    }
                    Asum[i][grp] = small_int_to_float(sum);
                }
            }
            __syncthreads();
            int sums[2][4][4];
#pragma unroll
            for (int h = 0; h < kIntSteps16; ++h) {
                // A group of 32 values spans two MMA steps: its sums start at the even one.
                if (I::kGroup == 16 || h % 2 == 0) {
#pragma unroll
                    for (int i = 0; i < 2; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j)
#pragma unroll
                            for (int e = 0; e < 4; ++e) sums[i][j][e] = 0;
                }
                uint32_t a[2][2], b[4];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int r = 32 * wr + 16 * i + g;
                    a[i][0] = Wq[r * kIntLd + 4 * h + t];
                    a[i][1] = Wq[(r + 8) * kIntLd + 4 * h + t];
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (column_block_empty(j)) continue;
                    b[j] = act_words[(32 * wc + 8 * j + g) * kActWords + sub * (kIntTileK / 4) +
                                     4 * h + t];
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma_s8_16x8x16(sums[i][j], a[i][0], a[i][1], b[j]);
                }
                if (I::kGroup == 32 && h % 2 == 0) continue;
                // The group's integer sums, scaled: d_token · (scale_row · sum + min_row ·
                // the token's code sum). A lane's four rows' scales and mins are loaded once for
                // its column blocks, each column block's two tokens' scales and sums once.
                const int grp = I::kGroup == 16 ? h : h / 2;
                const int d_col = sub * (kIntTileK / 32) + h / 2;
                float ws[2][2], wm[2][2];
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int half = 0; half < 2; ++half) {
                        const int r = 32 * wr + 16 * i + g + 8 * half;
                        ws[i][half] = Ws[r][grp];
                        if constexpr (I::kHasMin) wm[i][half] = Wm[r][grp];
                    }
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (column_block_empty(j)) continue;
                    float da[2], sa[2];
#pragma unroll
                    for (int u = 0; u < 2; ++u) {
                        const int tk = 32 * wc + 8 * j + 2 * t + u;
                        da[u] = d_buf[tk * L::kActScales + d_col];
                        if constexpr (I::kHasMin) sa[u] = Asum[tk][grp];
                    }
#pragma unroll
                    for (int i = 0; i < 2; ++i)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            float v = ws[i][e >> 1] * small_int_to_float(sums[i][j][e]);
                            if constexpr (I::kHasMin) v = fmaf(wm[i][e >> 1], sa[e & 1], v);
                            acc[i][j][e] = fmaf(da[e & 1], v, acc[i][j][e]);
                        }
                }
            }
            __syncthreads();
        }
    }
    // The tile [row][token] through shared memory (the stages' memory: every copy has landed
    // and been read), then to y[token][row] within bounds.
    float* Cs = reinterpret_cast<float*>(stage_memory);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = 32 * wr + 16 * i + g + 8 * (e >> 1);
                const int tk = 32 * wc + 8 * j + 2 * t + (e & 1);
                Cs[r * kCLd + tk] = acc[i][j][e];
            }
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTileRows * kTileTokens; idx += blockDim.x) {
        const int tk = idx / kTileRows, i = idx % kTileRows;
        const int64_t row = row0 + i;
        const int o = out_row[tk];
        if (o < 0 || row >= src.rows) continue;
        src.y[o * src.y_stride + row] =
            Cs[i * kCLd + tk] * scale + (bias != nullptr ? bias[row] : 0.0f);
    }
}

template <GgmlType F>
void launch_tile_int(const TileParams& p, int token_tiles, cudaStream_t stream) {
    constexpr size_t kShared = IntTileLayout<F>::kStages;
    // Past 48 KiB a block's dynamic shared memory must be asked for, once per kernel.
    static const bool sized = [] {
        check(cudaFuncSetAttribute(tile_int_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kShared)),
              "cudaFuncSetAttribute(tile_int_kernel)");
        // All of L1 as shared memory: the tiles read everything through it, and three blocks of
        // a 4-bit format (74 KiB each) fit an H100's SM only so.
        check(
            cudaFuncSetAttribute(tile_int_kernel<F>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared),
            "cudaFuncSetAttribute(tile_int_kernel carveout)");
        return true;
    }();
    (void)sized;
    tile_int_kernel<F><<<tile_grid(p, token_tiles), 128, kShared, stream>>>(p);
    check_launch("tile_int_kernel");
}

// The kernels of one format, for the dispatch table, with the integer ones where it has an
// integer view.
template <GgmlType F>
constexpr FormatKernels all_format_kernels_of() {
    FormatKernels k = format_kernels_of<F>();
    if constexpr (gpu::BlockInt<F>::kDefined) {
        k.int_matvec[0] = launch_matvec_int<F, 1>;
        k.int_matvec[1] = launch_matvec_int<F, 2>;
        k.int_matvec[2] = launch_matvec_int<F, 4>;
        k.int_matvec[3] = launch_matvec_int<F, 8>;
        k.int_tile = launch_tile_int<F>;
    }
    return k;
}

}  // namespace tandem::cuda
