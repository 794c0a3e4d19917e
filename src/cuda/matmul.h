// Matrix products of f32 activations with weights of any GGUF format, read in place (the file's
// blocks, as uploaded) in device memory. Small batches (decode, 1..8 rows) take one pass over the
// weight rows for all rows at once, dequantizing in registers; larger batches (prefill) dequantize
// tiles into shared memory and multiply them on the tensor cores (TF32, f32 accumulation: f32
// range for activations, so NVFP4's small `.scale` needs no special care).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "cpu/moe_layer.h"
#include "cpu/weight_matrix.h"
#include "cuda/block_dequant.h"
#include "cuda/elementwise.h"

namespace tandem::cuda {

// Rows of a batch up to which products take the matrix-vector path (and larger batches too
// where a matrix has too few rows for tiles: matmul.cpp).
constexpr int kSmallBatch = 8;
// Token rows and weight rows of one tensor-core tile (and of one expert group's tile).
constexpr int kTileTokens = 64;
constexpr int kTileRows = 64;

struct MatmulContext {
    cudaStream_t stream = nullptr;
    gpu::DequantTables tables;  // device copies of the i-quant grids
};

// True when there are GPU kernels for weights of this type.
bool gpu_supports(GgmlType type);
// True when products of weights of this type run on integer kernels (given activations as q8
// codes): the format has them and TANDEM_GPU_FLOAT_PRODUCTS=1 is not set.
bool gpu_integer_products(GgmlType type);

// y[t] = (W · x[t]) · w.scale for t < n; w's data is a device pointer, x and y device rows.
// With xq (x's q8 codes, from round_activations) formats with an integer view multiply the
// codes in integer arithmetic (cuda/matmul_int_kernels.cuh); the others, and every format when
// TANDEM_GPU_FLOAT_PRODUCTS=1 is set, read x.
void matmul(const MatmulContext& ctx, const WeightMatrix& w, const float* x, int64_t x_stride,
            int n, float* y, int64_t y_stride, const Q8Rows* xq = nullptr);

// Several matrices over one input (q, k and v): y_i = (W_i · x) · W_i.scale. Matrices of one
// format and width that take the integer kernels share one launch (matrix-vector or tiles); the
// others run one by one, as matmul.
struct ProductTarget {
    const WeightMatrix* w;
    float* y;
    int64_t y_stride;
};
void matmul_group(const MatmulContext& ctx, std::span<const ProductTarget> targets, const float* x,
                  int64_t x_stride, int n, const Q8Rows* xq);

// The routes of an MoE layer grouped by expert (made on the device by group_routes): for the
// tensor-core path, tile j covers sorted[begin[j] .. end[j]) (at most kTileTokens routes of
// expert[j]); n_tiles[0] tiles are valid out of max_tiles.
struct ExpertGroups {
    const int32_t* sorted = nullptr;
    const int32_t* tile_expert = nullptr;
    const int32_t* tile_begin = nullptr;
    const int32_t* tile_end = nullptr;
    const int32_t* n_tiles = nullptr;
    int max_tiles = 0;
};

// Routed products: for route j < n_routes with e = routes[j].expert >= 0,
// y[j] = (W_e · x[j / x_div]) · s_e + b_e (s_e, b_e: the expert's scale and bias, if any).
// Routes with e < 0 leave y[j] unwritten. With groups == nullptr every route is its own
// matrix-vector product (decode); with groups, each expert's routes share tiles (prefill).
// xq as for matmul. routes_settled: the routes were written before the previous kernel on the
// stream began, so that a decode product's blocks may read them to prefetch their experts' rows
// while it runs (MatvecParams::routes_settled).
void matmul_routed(const MatmulContext& ctx, const ExpertMatrix& w, const Route* routes,
                   int n_routes, int x_div, const float* x, int64_t x_stride, float* y,
                   int64_t y_stride, const ExpertGroups* groups, const Q8Rows* xq = nullptr,
                   bool routes_settled = false);

// The down projection of decode's routes taking act(gate) · up itself: y[j] = W_e · a_j with
// a_j = act(gate[j]) · up[j] (rows gate_stride floats apart) rounded through w's q8 activation
// type, as glu_round_activations() then matmul_routed() on its codes compute it, in one launch
// (each block makes its route's codes). The routes must be settled (matmul_routed); GELU needs
// upload_gelu_table() first. Only where routed_glu_fits(w): integer kernels for w's format and
// rows of at most 1024 values.
bool routed_glu_fits(const ExpertMatrix& w);
void matmul_routed_glu(const MatmulContext& ctx, const ExpertMatrix& w, const Route* routes,
                       int n_routes, GluKind kind, const float* gate, const float* up,
                       int64_t gate_stride, float* y, int64_t y_stride);

// Two expert stacks over the same routes and input (gate and up), into y_a and y_b: one launch
// where the integer kernels take them (decode and prefill), else matmul_routed twice.
void matmul_routed_pair(const MatmulContext& ctx, const ExpertMatrix& a, const ExpertMatrix& b,
                        const Route* routes, int n_routes, int x_div, const float* x,
                        int64_t x_stride, float* y_a, float* y_b, int64_t y_stride,
                        const ExpertGroups* groups, const Q8Rows* xq);

// out[t] = row tokens[t] of the table, as f32 (the embedding).
void embed_rows(const MatmulContext& ctx, const WeightMatrix& table, const int32_t* tokens, int n,
                float* out, int64_t out_stride);

}  // namespace tandem::cuda
