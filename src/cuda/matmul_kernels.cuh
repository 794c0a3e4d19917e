// The matrix kernels, templated on the weight format (BlockFormat<F>::chunk8 dequantizes 8
// values); each family file (matmul_*.cu) instantiates them for its formats.
#pragma once

#include <mma.h>

#include "cuda/check.h"
#include "cuda/early_launch.cuh"
#include "cuda/matmul.h"
#include "cuda/matmul_params.h"

namespace tandem::cuda {

__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// ---------------------------------------------------------------- matrix-vector (decode)

// Block: 128 threads on R rows for up to C columns (rows of x). Thread i takes chunks (pairs of
// chunks for 1-2 columns) i, i + 128, ... of 8 values of every row: a warp reads 256 or 512
// consecutive values of a row per step, every x value a thread loads serves R rows, and the four
// warps split
// the row, so even a matrix of a few hundred rows spreads over the whole GPU. Each chunk's eight
// products are summed in f32 and the chunks in f64, so a row's sum is about as exact as the CPU's
// (whose integer block sums are exact): differences at the f32 rounding of long sums would move
// later activations across their q8 rounding steps. Partial sums meet through shuffles within a
// warp and shared memory across warps.
constexpr int kMatvecThreads = 128;

// Before a matrix-vector block waits for the previous kernel: rows [first, first + count) of its
// weights w (of `rows`; an expert's rows where the routes are settled) into L2 (prefetch_l2).
__device__ __forceinline__ void prefetch_block_rows(const MatvecParams& p, const uint8_t* w,
                                                    int64_t rows, int64_t first, int64_t count) {
    if (p.routes != nullptr) {
        if (!p.routes_settled) return;
        const int e = p.routes[blockIdx.y].expert;
        if (e < 0) return;
        w += static_cast<size_t>(e) * p.expert_stride;
    }
    count = min(count, rows - first);
    if (count > 0) prefetch_l2(w + first * static_cast<int64_t>(p.row_bytes), count * p.row_bytes);
}

template <GgmlType F, int C, int R>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_kernel(const __grid_constant__ MatvecParams p) {
    using B = gpu::BlockFormat<F>;
    constexpr int kChunks = B::kValues / 8;  // chunks per block
    constexpr int kWarps = kMatvecThreads / 32;
    __shared__ double partial[kWarps][R][C];
    const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
    if (p.prefetch) prefetch_block_rows(p, p.w, p.rows, row0, R);
    wait_for_previous_kernel();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint8_t* w = p.w;
    const float* x = p.x;
    float* y = p.y;
    float scale = p.scale;
    const float* bias = nullptr;
    int n_cols = p.n_cols;
    if (p.routes != nullptr) {
        const int j = blockIdx.y;
        const int e = p.routes[j].expert;
        if (e < 0) return;
        w += static_cast<size_t>(e) * p.expert_stride;
        if (p.expert_scales != nullptr) scale = p.expert_scales[e];
        if (p.expert_bias != nullptr) bias = p.expert_bias + e * p.bias_stride;
        x += static_cast<int64_t>(j / p.x_div) * p.x_stride;
        y += static_cast<int64_t>(j) * p.y_stride;
        n_cols = 1;
    } else {
        // Dense: columns blockIdx.y · C .. of the n_cols (a prefill product of few rows).
        const int c0 = static_cast<int>(blockIdx.y) * C;
        x += static_cast<int64_t>(c0) * p.x_stride;
        y += static_cast<int64_t>(c0) * p.y_stride;
        n_cols = min(C, n_cols - c0);
    }
    double acc[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) acc[r][c] = 0.0;

    // A thread takes kPair adjacent chunks of a block at once: they share the block's scales,
    // which the compiler then decodes once for both.
    // (With more columns the extra registers cost more than the decoding saves.)
    constexpr int kPair = kChunks >= 2 && C <= 2 ? 2 : 1;
    const int64_t n_pairs = p.cols / (8 * kPair);
    for (int64_t g = threadIdx.x; g < n_pairs; g += kMatvecThreads) {
        const int64_t ch0 = g * kPair;
        const int64_t blk = ch0 / kChunks;
        const int sub0 = static_cast<int>(ch0 % kChunks);
#pragma unroll
        for (int u = 0; u < kPair; ++u) {
            float wv[R][8];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (row0 + r < p.rows) {
                    B::chunk8(w + (row0 + r) * p.row_bytes + blk * B::kBytes, sub0 + u, wv[r],
                              p.tables);
                } else {
#pragma unroll
                    for (int i = 0; i < 8; ++i) wv[r][i] = 0.0f;
                }
            }
#pragma unroll
            for (int c = 0; c < C; ++c) {
                if (c >= n_cols) break;
                const float4* src =
                    reinterpret_cast<const float4*>(x + c * p.x_stride + (ch0 + u) * 8);
                const float4 a = src[0], b = src[1];
                const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    float chunk = 0.0f;
#pragma unroll
                    for (int i = 0; i < 8; ++i) chunk = fmaf(wv[r][i], xv[i], chunk);
                    acc[r][c] += chunk;
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const double v = warp_sum(acc[r][c]);
            if (lane == 0) partial[warp][r][c] = v;
        }
    __syncthreads();
    if (threadIdx.x < R * C) {
        const int r = threadIdx.x / C, c = threadIdx.x % C;
        const int64_t row = row0 + r;
        if (row < p.rows && c < n_cols) {
            double v = 0.0;
#pragma unroll
            for (int k = 0; k < kWarps; ++k) v += partial[k][r][c];
            y[c * p.y_stride + row] =
                static_cast<float>(v) * scale + (bias != nullptr ? bias[row] : 0.0f);
        }
    }
}

template <GgmlType F, int C>
void launch_matvec(const MatvecParams& p, int n_jobs, cudaStream_t stream, int /*n_targets: 1*/) {
    constexpr int R = C <= 2 ? 2 : 1;  // rows per block: x registers reused R times
    const dim3 grid(static_cast<unsigned>((p.rows + R - 1) / R), static_cast<unsigned>(n_jobs));
    MatvecParams q = p;
    q.prefetch = weight_prefetch_enabled();
    launch_early(matvec_kernel<F, C, R>, grid, kMatvecThreads, 0, stream, "matvec_kernel", q);
}

// ---------------------------------------------------------------- tensor-core tiles (prefill)

// Block: 4 warps over a tile of 64 weight rows × 64 token rows, k in steps of 32. Each step
// dequantizes the weight tile into shared memory and stages the activations beside it, each
// value split into a TF32 part and the TF32 rest (3xTF32: a·b ≈ a_hi·b_hi + a_hi·b_lo +
// a_lo·b_hi, about f32 accuracy, where plain TF32 would lose 2^-11 of every product and move
// the next layers' activations across their q8 rounding steps); warp w multiplies its 32 × 32
// quarter with 2 × 2 WMMA fragments (m16n16k8). The result goes through shared memory so that
// rows and columns past the edges are never written.
constexpr int kTileK = 32;
constexpr int kTilePad = 4;  // floats of padding per shared row (bank conflicts)

// The weights, scale, bias, output and token rows of tile (blockIdx.x, blockIdx.y) of target
// blockIdx.z: an expert group's tile (false past the groups' tiles, or past the target's rows:
// the block has nothing to do) or a dense tile of tokens.
// token_row[i]: the row of x of tile row i (-1: none); out_row[i]: its row of y.
struct TileSource {
    const uint8_t* w;
    float scale;
    const float* bias;
    int64_t rows;
    float* y;
    int64_t y_stride;
};
__device__ __forceinline__ bool tile_source(const TileParams& p, int32_t* token_row,
                                            int32_t* out_row, TileSource& src) {
    src = {p.w, p.scale, nullptr, p.rows, p.y, p.y_stride};
    const float* expert_scales = p.expert_scales;
    const float* expert_bias = p.expert_bias;
    if (blockIdx.z > 0) {
        const SiblingTarget& s = p.siblings[blockIdx.z - 1];
        src = {s.w, s.scale, nullptr, s.rows, s.y, s.y_stride};
        expert_scales = s.expert_scales;
        expert_bias = s.expert_bias;
    }
    if (static_cast<int64_t>(blockIdx.x) * kTileRows >= src.rows) return false;
    if (p.sorted != nullptr) {
        const int j = blockIdx.y;
        if (j >= *p.n_tiles) return false;
        const int e = p.tile_expert[j];
        const int begin = p.tile_begin[j], end = p.tile_end[j];
        src.w += static_cast<size_t>(e) * p.expert_stride;
        if (expert_scales != nullptr) src.scale = expert_scales[e];
        if (expert_bias != nullptr) src.bias = expert_bias + e * p.bias_stride;
        for (int i = threadIdx.x; i < kTileTokens; i += blockDim.x) {
            const int r = begin + i < end ? p.sorted[begin + i] : -1;
            token_row[i] = r < 0 ? -1 : r / p.x_div;
            out_row[i] = r;
        }
    } else {
        const int t0 = blockIdx.y * kTileTokens;
        for (int i = threadIdx.x; i < kTileTokens; i += blockDim.x) {
            const int t = t0 + i < p.n_tokens ? t0 + i : -1;
            token_row[i] = t;
            out_row[i] = t;
        }
    }
    return true;
}

// The tiles of a launch: row tiles of its widest target × token tiles × targets (blocks past a
// narrower target's rows return at once).
inline dim3 tile_grid(const TileParams& p, int token_tiles) {
    const int64_t rows = p.widest_rows(p.n_targets);
    return dim3(static_cast<unsigned>((rows + kTileRows - 1) / kTileRows),
                static_cast<unsigned>(token_tiles), static_cast<unsigned>(p.n_targets));
}

template <GgmlType F>
__global__ void __launch_bounds__(128) tile_kernel(const __grid_constant__ TileParams p) {
    namespace wmma = nvcuda::wmma;
    using B = gpu::BlockFormat<F>;
    constexpr int kChunks = B::kValues / 8;
    constexpr int kLd = kTileK + kTilePad;
    constexpr int kCLd = kTileTokens + kTilePad;
    __shared__ __align__(32) float smem[2 * (kTileRows + kTileTokens) * kLd > kTileRows * kCLd
                                            ? 2 * (kTileRows + kTileTokens) * kLd
                                            : kTileRows * kCLd];
    __shared__ int32_t token_row[kTileTokens];  // row of x per tile row (-1: past the end)
    __shared__ int32_t out_row[kTileTokens];    // row of y per tile row
    float* As = smem;                           // [kTileRows][kLd] weights, TF32 part
    float* Bs = smem + kTileRows * kLd;         // [kTileTokens][kLd] activations
    float* As_lo = smem + (kTileRows + kTileTokens) * kLd;  // the rests
    float* Bs_lo = As_lo + kTileRows * kLd;

    const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
    TileSource src;
    if (!tile_source(p, token_row, out_row, src)) return;
    const uint8_t* w = src.w;
    const float scale = src.scale;
    const float* bias = src.bias;
    __syncthreads();

    const int warp = threadIdx.x / 32;
    const int wr = warp / 2, wc = warp % 2;
    // Each MMA's eight products accumulate in f32 fragments, the MMAs in f64 (as the chunks of
    // the matrix-vector kernel): fragments' elements are the same positions in every fragment of
    // a type, so element e of acc[i][j] always adds to total[i][j][e].
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
    using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
    double total[2][2][Accumulator::num_elements];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < Accumulator::num_elements; ++e) total[i][j][e] = 0.0;

    for (int64_t k0 = 0; k0 < p.cols; k0 += kTileK) {
        // Weights: 64 rows × 4 chunks of 8, two chunks a thread.
        for (int job = threadIdx.x; job < kTileRows * (kTileK / 8); job += blockDim.x) {
            const int i = job / (kTileK / 8), c = job % (kTileK / 8);
            const int64_t row = row0 + i;
            const int64_t ch = k0 / 8 + c;
            float v[8];
            if (row < src.rows && ch * 8 < p.cols) {
                B::chunk8(w + row * p.row_bytes + (ch / kChunks) * B::kBytes,
                          static_cast<int>(ch % kChunks), v, p.tables);
            } else {
#pragma unroll
                for (int q = 0; q < 8; ++q) v[q] = 0.0f;
            }
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const float hi = wmma::__float_to_tf32(v[q]);
                As[i * kLd + c * 8 + q] = hi;
                As_lo[i * kLd + c * 8 + q] = wmma::__float_to_tf32(v[q] - hi);
            }
        }
        // Activations: 64 token rows × 32 values, 16 values (four float4) a thread.
        for (int job = threadIdx.x; job < kTileTokens * 2; job += blockDim.x) {
            const int i = job / 2, h = job % 2;
            const int t = token_row[i];
            float* dst = Bs + i * kLd + h * 16;
            float* dst_lo = Bs_lo + i * kLd + h * 16;
            const float4* src = reinterpret_cast<const float4*>(p.x + t * p.x_stride + k0 + h * 16);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                // Rows are multiples of 8 values, so a float4 lies wholly inside or outside.
                const bool inside = t >= 0 && k0 + h * 16 + 4 * q < p.cols;
                const float4 a = inside ? src[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                const float v[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float hi = wmma::__float_to_tf32(v[e]);
                    dst[4 * q + e] = hi;
                    dst_lo[4 * q + e] = wmma::__float_to_tf32(v[e] - hi);
                }
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTileK; kk += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a[2],
                a_lo[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> b[2],
                b_lo[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(a[i], As + (32 * wr + 16 * i) * kLd + kk, kLd);
                wmma::load_matrix_sync(a_lo[i], As_lo + (32 * wr + 16 * i) * kLd + kk, kLd);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                wmma::load_matrix_sync(b[j], Bs + (32 * wc + 16 * j) * kLd + kk, kLd);
                wmma::load_matrix_sync(b_lo[j], Bs_lo + (32 * wc + 16 * j) * kLd + kk, kLd);
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    // Eight products a step in f32 (the small terms first, so they are not lost
                    // against the large one), the steps in f64.
                    wmma::fill_fragment(acc[i][j], 0.0f);
                    wmma::mma_sync(acc[i][j], a_lo[i], b[j], acc[i][j]);
                    wmma::mma_sync(acc[i][j], a[i], b_lo[j], acc[i][j]);
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
#pragma unroll
                    for (int e = 0; e < Accumulator::num_elements; ++e)
                        total[i][j][e] += acc[i][j].x[e];
                }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < Accumulator::num_elements; ++e)
                acc[i][j].x[e] = static_cast<float>(total[i][j][e]);
    // The tile [row][token] through shared memory, then to y[token][row] within bounds.
    float* Cs = smem;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(Cs + (32 * wr + 16 * i) * kCLd + 32 * wc + 16 * j, acc[i][j],
                                    kCLd, wmma::mem_row_major);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTileRows * kTileTokens; idx += blockDim.x) {
        const int t = idx / kTileRows, i = idx % kTileRows;
        const int64_t row = row0 + i;
        const int o = out_row[t];
        if (o < 0 || row >= src.rows) continue;
        src.y[o * src.y_stride + row] = Cs[i * kCLd + t] * scale + (bias != nullptr ? bias[row] : 0.0f);
    }
}

template <GgmlType F>
void launch_tile(const TileParams& p, int token_tiles, cudaStream_t stream) {
    tile_kernel<F><<<tile_grid(p, token_tiles), 128, 0, stream>>>(p);
    check_launch("tile_kernel");
}

// ---------------------------------------------------------------- embedding rows

template <GgmlType F>
__global__ void embed_kernel(const __grid_constant__ EmbedParams p) {
    using B = gpu::BlockFormat<F>;
    constexpr int kChunks = B::kValues / 8;
    const int t = blockIdx.x;
    const uint8_t* row = p.table + static_cast<int64_t>(p.tokens[t]) * p.row_bytes;
    float* out = p.out + t * p.out_stride;
    for (int64_t ch = threadIdx.x; ch < p.cols / 8; ch += blockDim.x) {
        float v[8];
        B::chunk8(row + (ch / kChunks) * B::kBytes, static_cast<int>(ch % kChunks), v, p.tables);
#pragma unroll
        for (int q = 0; q < 8; ++q) out[ch * 8 + q] = v[q];
    }
}

template <GgmlType F>
void launch_embed(const EmbedParams& p, int n_tokens, cudaStream_t stream) {
    embed_kernel<F><<<n_tokens, 128, 0, stream>>>(p);
    check_launch("embed_kernel");
}

// The kernels of one format, for the dispatch table.
template <GgmlType F>
constexpr FormatKernels format_kernels_of() {
    return {F,
            {launch_matvec<F, 1>, launch_matvec<F, 2>, launch_matvec<F, 4>, launch_matvec<F, 8>},
            launch_tile<F>,
            launch_embed<F>};
}

}  // namespace tandem::cuda
