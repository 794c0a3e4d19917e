// Dispatch of the matrix products to the kernels of the weight's format.
#include "cuda/matmul.h"

#include <array>

#include "base/error.h"
#include "cuda/matmul_params.h"

namespace tandem::cuda {
namespace {

// Every format's kernels, indexed by type id (nullptr: no GPU kernels).
const std::array<const FormatKernels*, kGgmlTypeIdLimit>& kernel_table() {
    static const std::array<const FormatKernels*, kGgmlTypeIdLimit> table = [] {
        std::array<const FormatKernels*, kGgmlTypeIdLimit> t{};
        for (FormatKernelList list : {float_format_kernels(), legacy_format_kernels(),
                                      kquant_format_kernels(), iquant_format_kernels()}) {
            for (int i = 0; i < list.count; ++i)
                t[type_id(list.entries[i].type)] = &list.entries[i];
        }
        return t;
    }();
    return table;
}

const FormatKernels& kernels_for(const FormatTraits& format) {
    const FormatKernels* k = kernel_table()[type_id(format.type)];
    if (k == nullptr) fail("no GPU kernels for weights of type {}", format.name);
    return *k;
}

// The matvec variant for n columns: 1, 2, 4 or 8 (the kernel masks the columns past n).
int matvec_slot(int n) {
    return n <= 1 ? 0 : n <= 2 ? 1 : n <= 4 ? 2 : 3;
}

ProductOperands dense_operands(const MatmulContext& ctx, const WeightMatrix& w, const float* x,
                               int64_t x_stride, float* y, int64_t y_stride) {
    ProductOperands p;
    p.w = w.data;
    p.row_bytes = w.row_bytes;
    p.rows = w.rows;
    p.cols = w.cols;
    p.scale = w.scale;
    p.x = x;
    p.x_stride = x_stride;
    p.y = y;
    p.y_stride = y_stride;
    p.tables = ctx.tables;
    return p;
}

ProductOperands expert_operands(const MatmulContext& ctx, const ExpertMatrix& w, int x_div,
                                const float* x, int64_t x_stride, float* y, int64_t y_stride) {
    ProductOperands p = dense_operands(ctx, w.matrix, x, x_stride, y, y_stride);
    p.scale = 1.0f;
    p.x_div = x_div;
    p.expert_stride = w.expert_stride;
    p.expert_scales = w.scales;
    p.expert_bias = w.bias;
    p.bias_stride = w.bias_stride;
    return p;
}

}  // namespace

bool gpu_supports(GgmlType type) {
    return type_id(type) < kGgmlTypeIdLimit && kernel_table()[type_id(type)] != nullptr;
}

void matmul(const MatmulContext& ctx, const WeightMatrix& w, const float* x, int64_t x_stride,
            int n, float* y, int64_t y_stride) {
    if (n <= 0) return;
    const FormatKernels& k = kernels_for(*w.format);
    const ProductOperands operands = dense_operands(ctx, w, x, x_stride, y, y_stride);
    if (n <= kSmallBatch) {
        MatvecParams p;
        static_cast<ProductOperands&>(p) = operands;
        p.n_cols = n;
        k.matvec[matvec_slot(n)](p, 1, ctx.stream);
        return;
    }
    TileParams p;
    static_cast<ProductOperands&>(p) = operands;
    p.n_tokens = n;
    k.tile(p, (n + kTileTokens - 1) / kTileTokens, ctx.stream);
}

void matmul_routed(const MatmulContext& ctx, const ExpertMatrix& w, const Route* routes,
                   int n_routes, int x_div, const float* x, int64_t x_stride, float* y,
                   int64_t y_stride, const ExpertGroups* groups) {
    if (n_routes <= 0) return;
    const FormatKernels& k = kernels_for(*w.matrix.format);
    const ProductOperands operands = expert_operands(ctx, w, x_div, x, x_stride, y, y_stride);
    if (groups == nullptr) {
        MatvecParams p;
        static_cast<ProductOperands&>(p) = operands;
        p.routes = routes;
        k.matvec[0](p, n_routes, ctx.stream);
        return;
    }
    TileParams p;
    static_cast<ProductOperands&>(p) = operands;
    p.sorted = groups->sorted;
    p.tile_expert = groups->tile_expert;
    p.tile_begin = groups->tile_begin;
    p.tile_end = groups->tile_end;
    p.n_tiles = groups->n_tiles;
    k.tile(p, groups->max_tiles, ctx.stream);
}

void embed_rows(const MatmulContext& ctx, const WeightMatrix& table, const int32_t* tokens, int n,
                float* out, int64_t out_stride) {
    if (n <= 0) return;
    EmbedParams p;
    p.table = table.data;
    p.row_bytes = table.row_bytes;
    p.cols = table.cols;
    p.tokens = tokens;
    p.out = out;
    p.out_stride = out_stride;
    p.tables = ctx.tables;
    kernels_for(*table.format).embed(p, n, ctx.stream);
}

}  // namespace tandem::cuda
