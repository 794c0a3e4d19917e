// The parameter blocks of the matrix kernels (passed by value, so a captured CUDA graph keeps
// them) and the per-format table of launchers that the family files fill.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/elementwise.h"
#include "cpu/moe_layer.h"
#include "cuda/block_dequant.h"

namespace tandem::cuda {

// Another matrix of the same format and width over the same activations, in the same launch
// (blockIdx.z = 1, 2): q, k and v; an expert's gate and up. The integer kernels take them.
struct SiblingTarget {
    const uint8_t* w = nullptr;
    int64_t rows = 0;
    float scale = 1.0f;
    float* y = nullptr;
    int64_t y_stride = 0;
    const float* expert_scales = nullptr;
    const float* expert_bias = nullptr;
};
constexpr int kMaxSiblings = 2;

// What every product kernel reads: the weights (a matrix, or expert 0 of a stack), the
// activations and where the results go.
struct ProductOperands {
    const uint8_t* w = nullptr;
    size_t row_bytes = 0;
    int64_t rows = 0, cols = 0;
    float scale = 1.0f;  // dense: the matrix's second-level scale
    const float* x = nullptr;
    int64_t x_stride = 0;
    // The integer kernels read the activations as q8 codes and scales instead (Q8Rows).
    const int8_t* xq = nullptr;
    int64_t xq_stride = 0;
    const float* xd = nullptr;
    int64_t xd_stride = 0;
    float* y = nullptr;
    int64_t y_stride = 0;
    // Stacked experts: route r reads row r / x_div of x, expert e's rows start
    // e · expert_stride bytes on, with its own scale and bias (when given).
    int x_div = 1;
    size_t expert_stride = 0;
    const float* expert_scales = nullptr;
    const float* expert_bias = nullptr;
    int64_t bias_stride = 0;
    gpu::DequantTables tables;
    // Targets 1.. of the launch (target 0 is the fields above), blockIdx.z choosing.
    SiblingTarget siblings[kMaxSiblings];

    // The rows of the widest of the launch's n_targets targets: what its grid covers.
    int64_t widest_rows(int n_targets) const {
        int64_t widest = rows;
        for (int i = 0; i + 1 < n_targets; ++i) widest = std::max(widest, siblings[i].rows);
        return widest;
    }
};


struct MatvecParams : ProductOperands {
    int n_cols = 1;  // dense: rows of x (columns of the product)
    // Routed (routes != nullptr): job blockIdx.y is route j. Dense: job j takes the columns
    // j · C .. j · C + C - 1 of the kernel's C (a prefill product of few rows: see matmul.cpp).
    const Route* routes = nullptr;
    // The integer kernels: warps of a block that share rows, lanes of a warp on one row (set by
    // the launcher: matvec_lanes).
    int warps_per_row = 1;
    int lanes_per_row = 32;
    // Each block asks for its weight rows in L2 before it waits for the previous kernel
    // (prefetch_l2; set by the launchers). A routed product does so only with routes_settled:
    // its routes were written before the previous kernel began (the down projection's, gate and
    // up having run between), so its blocks may read them before they wait.
    bool prefetch = false;
    bool routes_settled = false;
    // Routed integer kernels of one column, with glu_gate: route j's activations are
    // act(gate) · up of rows j of glu_gate and glu_up (glu_stride floats apart; GELU through
    // gelu_table), rounded through q8 blocks of glu_block values (32 or 256) by each block into
    // its shared memory, in place of xq and xd: the codes glu_round_activations() would write,
    // without its launch (matmul_routed_glu).
    const float* glu_gate = nullptr;
    const float* glu_up = nullptr;
    int64_t glu_stride = 0;
    GluKind glu_kind = GluKind::kSilu;
    const uint16_t* gelu_table = nullptr;
    int glu_block = 0;
};

struct TileParams : ProductOperands {
    int n_tokens = 0;  // dense: rows of x
    int n_targets = 1;  // 1 + the siblings
    // Grouped (sorted != nullptr): tile blockIdx.y of ExpertGroups.
    const int32_t* sorted = nullptr;
    const int32_t* tile_expert = nullptr;
    const int32_t* tile_begin = nullptr;
    const int32_t* tile_end = nullptr;
    const int32_t* n_tiles = nullptr;
};

struct EmbedParams {
    const uint8_t* table = nullptr;
    size_t row_bytes = 0;
    int64_t cols = 0;
    const int32_t* tokens = nullptr;
    float* out = nullptr;
    int64_t out_stride = 0;
    gpu::DequantTables tables;
};

// n_targets: 1 + the siblings the integer kernels take.
using MatvecLauncher = void (*)(const MatvecParams&, int n_jobs, cudaStream_t, int n_targets);
using TileLauncher = void (*)(const TileParams&, int token_tiles, cudaStream_t);
using EmbedLauncher = void (*)(const EmbedParams&, int n_tokens, cudaStream_t);

// The kernels of one weight format: matvec for 1, 2, 4 and 8 columns, tiles, embedding rows;
// for the formats with an integer view (cuda/block_int.h) the same on q8 activations, else
// nullptr.
struct FormatKernels {
    GgmlType type;
    MatvecLauncher matvec[4];
    TileLauncher tile;
    EmbedLauncher embed;
    MatvecLauncher int_matvec[4];
    TileLauncher int_tile;
};

// Each family file's formats (nullptr-terminated lists are avoided: spans of entries).
struct FormatKernelList {
    const FormatKernels* entries;
    int count;
};
FormatKernelList float_format_kernels();
FormatKernelList legacy_format_kernels();
FormatKernelList kquant_format_kernels();
FormatKernelList iquant_format_kernels();

}  // namespace tandem::cuda
