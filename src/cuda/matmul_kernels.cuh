// The matrix kernels, templated on the weight format (BlockFormat<F>::chunk8 dequantizes 8
// values); each family file (matmul_*.cu) instantiates them for its formats.
#pragma once

#include <mma.h>

#include "cuda/check.h"
#include "cuda/matmul.h"
#include "cuda/matmul_params.h"

namespace tandem::cuda {

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// ---------------------------------------------------------------- matrix-vector (decode)

// Block: 4 warps; warp w computes R consecutive rows for up to C columns (rows of x). Lane l
// takes chunks l, l + 32, ... of 8 values: a warp reads 256 consecutive values of each of its
// rows per step (one k-quant block), and each x value it loads serves R rows.
template <GgmlType F, int C, int R>
__global__ void __launch_bounds__(128) matvec_kernel(const __grid_constant__ MatvecParams p) {
    using B = gpu::BlockFormat<F>;
    constexpr int kChunks = B::kValues / 8;  // chunks per block
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * 4 + warp) * R;
    if (row0 >= p.rows) return;
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
    }
    float acc[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) acc[r][c] = 0.0f;

    const int64_t n_chunks = p.cols / 8;
    for (int64_t ch = lane; ch < n_chunks; ch += 32) {
        const int64_t blk = ch / kChunks;
        const int sub = static_cast<int>(ch % kChunks);
        float xv[C][8];
#pragma unroll
        for (int c = 0; c < C; ++c) {
            if (c < n_cols) {
                const float4* src = reinterpret_cast<const float4*>(x + c * p.x_stride + ch * 8);
                const float4 a = src[0], b = src[1];
                xv[c][0] = a.x, xv[c][1] = a.y, xv[c][2] = a.z, xv[c][3] = a.w;
                xv[c][4] = b.x, xv[c][5] = b.y, xv[c][6] = b.z, xv[c][7] = b.w;
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) xv[c][i] = 0.0f;
            }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int64_t row = row0 + r;
            if (row >= p.rows) break;
            float wv[8];
            B::chunk8(w + row * p.row_bytes + blk * B::kBytes, sub, wv, p.tables);
#pragma unroll
            for (int c = 0; c < C; ++c)
#pragma unroll
                for (int i = 0; i < 8; ++i) acc[r][c] = fmaf(wv[i], xv[c][i], acc[r][c]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const float v = warp_sum(acc[r][c]);
            const int64_t row = row0 + r;
            if (lane == 0 && row < p.rows && c < n_cols) {
                y[c * p.y_stride + row] = v * scale + (bias != nullptr ? bias[row] : 0.0f);
            }
        }
    }
}

template <GgmlType F, int C>
void launch_matvec(const MatvecParams& p, int n_jobs, cudaStream_t stream) {
    constexpr int R = C <= 2 ? 4 : 2;  // rows per warp: x registers reused R times
    const dim3 grid(static_cast<unsigned>((p.rows + 4 * R - 1) / (4 * R)), static_cast<unsigned>(n_jobs));
    matvec_kernel<F, C, R><<<grid, 128, 0, stream>>>(p);
    check_launch("matvec_kernel");
}

// ---------------------------------------------------------------- tensor-core tiles (prefill)

// Block: 4 warps over a tile of 64 weight rows × 64 token rows, k in steps of 32. Each step
// dequantizes the weight tile into shared memory as TF32 and stages the activations beside it;
// warp w multiplies its 32 × 32 quarter with 2 × 2 WMMA fragments (m16n16k8). The result goes
// through shared memory so that rows and columns past the edges are never written.
constexpr int kTileRows = 64;
constexpr int kTileK = 32;
constexpr int kTilePad = 4;  // floats of padding per shared row (bank conflicts)

template <GgmlType F>
__global__ void __launch_bounds__(128) tile_kernel(const __grid_constant__ TileParams p) {
    namespace wmma = nvcuda::wmma;
    using B = gpu::BlockFormat<F>;
    constexpr int kChunks = B::kValues / 8;
    constexpr int kLd = kTileK + kTilePad;
    constexpr int kCLd = kTileTokens + kTilePad;
    __shared__ __align__(32) float smem[(kTileRows + kTileTokens) * kLd > kTileRows * kCLd
                                            ? (kTileRows + kTileTokens) * kLd
                                            : kTileRows * kCLd];
    __shared__ int32_t token_row[kTileTokens];  // row of x per tile row (-1: past the end)
    __shared__ int32_t out_row[kTileTokens];    // row of y per tile row
    float* As = smem;                      // [kTileRows][kLd] weights
    float* Bs = smem + kTileRows * kLd;    // [kTileTokens][kLd] activations

    const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
    const uint8_t* w = p.w;
    float scale = p.scale;
    const float* bias = nullptr;
    if (p.sorted != nullptr) {
        const int j = blockIdx.y;
        if (j >= *p.n_tiles) return;
        const int e = p.tile_expert[j];
        const int begin = p.tile_begin[j], end = p.tile_end[j];
        w += static_cast<size_t>(e) * p.expert_stride;
        if (p.expert_scales != nullptr) scale = p.expert_scales[e];
        if (p.expert_bias != nullptr) bias = p.expert_bias + e * p.bias_stride;
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
    __syncthreads();

    const int warp = threadIdx.x / 32;
    const int wr = warp / 2, wc = warp % 2;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int64_t k0 = 0; k0 < p.cols; k0 += kTileK) {
        // Weights: 64 rows × 4 chunks of 8, two chunks a thread.
        for (int job = threadIdx.x; job < kTileRows * (kTileK / 8); job += blockDim.x) {
            const int i = job / (kTileK / 8), c = job % (kTileK / 8);
            const int64_t row = row0 + i;
            const int64_t ch = k0 / 8 + c;
            float v[8];
            if (row < p.rows && ch * 8 < p.cols) {
                B::chunk8(w + row * p.row_bytes + (ch / kChunks) * B::kBytes, static_cast<int>(ch % kChunks), v,
                          p.tables);
            } else {
#pragma unroll
                for (int q = 0; q < 8; ++q) v[q] = 0.0f;
            }
#pragma unroll
            for (int q = 0; q < 8; ++q) As[i * kLd + c * 8 + q] = wmma::__float_to_tf32(v[q]);
        }
        // Activations: 64 token rows × 32 values, 16 values (four float4) a thread.
        for (int job = threadIdx.x; job < kTileTokens * 2; job += blockDim.x) {
            const int i = job / 2, h = job % 2;
            const int t = token_row[i];
            float* dst = Bs + i * kLd + h * 16;
            if (t >= 0 && k0 + h * 16 < p.cols) {
                const float4* src = reinterpret_cast<const float4*>(p.x + t * p.x_stride + k0 + h * 16);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float4 a = src[q];
                    dst[4 * q + 0] = wmma::__float_to_tf32(a.x);
                    dst[4 * q + 1] = wmma::__float_to_tf32(a.y);
                    dst[4 * q + 2] = wmma::__float_to_tf32(a.z);
                    dst[4 * q + 3] = wmma::__float_to_tf32(a.w);
                }
            } else {
#pragma unroll
                for (int q = 0; q < 16; ++q) dst[q] = 0.0f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTileK; kk += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], As + (32 * wr + 16 * i) * kLd + kk, kLd);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], Bs + (32 * wc + 16 * j) * kLd + kk, kLd);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    // The tile [row][token] through shared memory, then to y[token][row] within bounds.
    float* Cs = smem;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(Cs + (32 * wr + 16 * i) * kCLd + 32 * wc + 16 * j, acc[i][j], kCLd,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTileRows * kTileTokens; idx += blockDim.x) {
        const int t = idx / kTileRows, i = idx % kTileRows;
        const int64_t row = row0 + i;
        const int o = out_row[t];
        if (o < 0 || row >= p.rows) continue;
        p.y[o * p.y_stride + row] = Cs[i * kCLd + t] * scale + (bias != nullptr ? bias[row] : 0.0f);
    }
}

template <GgmlType F>
void launch_tile(const TileParams& p, int token_tiles, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((p.rows + kTileRows - 1) / kTileRows), static_cast<unsigned>(token_tiles));
    tile_kernel<F><<<grid, 128, 0, stream>>>(p);
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
