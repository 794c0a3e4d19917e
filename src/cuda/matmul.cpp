// Dispatch of the matrix products to the kernels of the weight's format.
#include "cuda/matmul.h"

#include <array>

#include "base/env_flag.h"
#include "base/error.h"
#include "cuda/activation_rounding.h"
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

// Whether n columns of a product of `rows` weight rows take the matrix-vector kernels (in jobs
// of kSmallBatch columns) rather than tiles: decode, and prefill products whose tiles would
// leave most of the GPU idle (a router's 128 rows: 16 tiles for 512 tokens, 250 µs in f32 on an
// H200, where the matrix-vector jobs spread over every SM).
constexpr int64_t kMinTiles = 64;
bool matvec_columns(int64_t rows, int n) {
    const int64_t tiles =
        (rows + kTileRows - 1) / kTileRows * ((n + kTileTokens - 1) / kTileTokens);
    return n <= kSmallBatch || tiles < kMinTiles;
}

// Matrix-vector launches over n columns: one job per kSmallBatch of them.
void launch_matvec_columns(const MatvecLauncher* launchers, const MatvecParams& p, int n,
                           cudaStream_t stream, int n_targets) {
    launchers[matvec_slot(n)](p, (n + kSmallBatch - 1) / kSmallBatch, stream, n_targets);
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

bool float_products_only() {
    static const bool only = env_flag("TANDEM_GPU_FLOAT_PRODUCTS");
    return only;
}

// Whether k's integer kernels take this product: x given as q8 codes, and kernels for them.
bool use_int_kernels(const FormatKernels& k, const Q8Rows* xq) {
    return xq != nullptr && xq->q != nullptr && k.int_tile != nullptr && !float_products_only();
}

void set_codes(ProductOperands& p, const Q8Rows& xq) {
    p.xq = xq.q;
    p.xq_stride = xq.q_stride;
    p.xd = xq.d;
    p.xd_stride = xq.d_stride;
}

void set_groups(TileParams& p, const ExpertGroups& groups) {
    p.sorted = groups.sorted;
    p.tile_expert = groups.tile_expert;
    p.tile_begin = groups.tile_begin;
    p.tile_end = groups.tile_end;
    p.n_tiles = groups.n_tiles;
}

}  // namespace

bool gpu_supports(GgmlType type) {
    return type_id(type) < kGgmlTypeIdLimit && kernel_table()[type_id(type)] != nullptr;
}

bool gpu_integer_products(GgmlType type) {
    return gpu_supports(type) && kernel_table()[type_id(type)]->int_tile != nullptr &&
           !float_products_only();
}

void matmul(const MatmulContext& ctx, const WeightMatrix& w, const float* x, int64_t x_stride,
            int n, float* y, int64_t y_stride, const Q8Rows* xq) {
    if (n <= 0) return;
    const FormatKernels& k = kernels_for(*w.format);
    ProductOperands operands = dense_operands(ctx, w, x, x_stride, y, y_stride);
    const bool ints = use_int_kernels(k, xq);
    if (ints) set_codes(operands, *xq);
    if (matvec_columns(w.rows, n)) {
        MatvecParams p;
        static_cast<ProductOperands&>(p) = operands;
        p.n_cols = n;
        launch_matvec_columns(ints ? k.int_matvec : k.matvec, p, n, ctx.stream, 1);
        return;
    }
    TileParams p;
    static_cast<ProductOperands&>(p) = operands;
    p.n_tokens = n;
    (ints ? k.int_tile : k.tile)(p, (n + kTileTokens - 1) / kTileTokens, ctx.stream);
}

void matmul_routed(const MatmulContext& ctx, const ExpertMatrix& w, const Route* routes,
                   int n_routes, int x_div, const float* x, int64_t x_stride, float* y,
                   int64_t y_stride, const ExpertGroups* groups, const Q8Rows* xq,
                   bool routes_settled) {
    if (n_routes <= 0) return;
    const FormatKernels& k = kernels_for(*w.matrix.format);
    ProductOperands operands = expert_operands(ctx, w, x_div, x, x_stride, y, y_stride);
    const bool ints = use_int_kernels(k, xq);
    if (ints) set_codes(operands, *xq);
    if (groups == nullptr) {
        MatvecParams p;
        static_cast<ProductOperands&>(p) = operands;
        p.routes = routes;
        p.routes_settled = routes_settled;
        (ints ? k.int_matvec : k.matvec)[0](p, n_routes, ctx.stream, 1);
        return;
    }
    TileParams p;
    static_cast<ProductOperands&>(p) = operands;
    set_groups(p, *groups);
    (ints ? k.int_tile : k.tile)(p, groups->max_tiles, ctx.stream);
}

namespace {

// The q8 block (32 or 256 values) through which w's activations are rounded; 0 without codes.
int code_block(const ExpertMatrix& w) {
    const int block = gpu::rounding_block(gpu::rounding_for(w.matrix.format->dot_type));
    return block >= 32 ? block : 0;
}

}  // namespace

bool routed_glu_fits(const ExpertMatrix& w) {
    // Every block of a route makes the route's activations again: that pays where a block
    // covers many rows, for the short rows of fine-grained experts (Qwen3's 768, gemma4's 704),
    // and not for long ones (gpt-oss's 2880: 4 rows a block, each remaking 2880 values).
    constexpr int64_t kMaxCols = 1024;
    const int block = code_block(w);
    return gpu_integer_products(w.matrix.format->type) && block > 0 && w.matrix.cols % block == 0 &&
           w.matrix.cols <= kMaxCols;
}

void matmul_routed_glu(const MatmulContext& ctx, const ExpertMatrix& w, const Route* routes,
                       int n_routes, GluKind kind, const float* gate, const float* up,
                       int64_t gate_stride, float* y, int64_t y_stride) {
    if (n_routes <= 0) return;
    if (!routed_glu_fits(w))
        fail("matmul_routed_glu: {} weights of {} columns take no activations made in the product",
             w.matrix.format->name, w.matrix.cols);
    MatvecParams p;
    static_cast<ProductOperands&>(p) = expert_operands(ctx, w, 1, nullptr, 0, y, y_stride);
    p.routes = routes;
    p.routes_settled = true;
    p.glu_gate = gate;
    p.glu_up = up;
    p.glu_stride = gate_stride;
    p.glu_kind = kind;
    if (kind == GluKind::kGelu) p.gelu_table = gelu_table_on_device();
    p.glu_block = code_block(w);
    kernels_for(*w.matrix.format).int_matvec[0](p, n_routes, ctx.stream, 1);
}

void matmul_group(const MatmulContext& ctx, std::span<const ProductTarget> targets, const float* x,
                  int64_t x_stride, int n, const Q8Rows* xq) {
    if (n <= 0 || targets.empty()) return;
    const WeightMatrix& w0 = *targets[0].w;
    const FormatKernels& k = kernels_for(*w0.format);
    // One launch for all targets (more blocks in flight: k and v alone fill few SMs).
    bool shared = targets.size() <= 1 + kMaxSiblings && use_int_kernels(k, xq);
    for (const ProductTarget& t : targets)
        shared = shared && t.w->format == w0.format && t.w->cols == w0.cols;
    if (!shared) {
        for (const ProductTarget& t : targets)
            matmul(ctx, *t.w, x, x_stride, n, t.y, t.y_stride, xq);
        return;
    }
    ProductOperands operands =
        dense_operands(ctx, w0, x, x_stride, targets[0].y, targets[0].y_stride);
    set_codes(operands, *xq);
    for (size_t i = 1; i < targets.size(); ++i) {
        const ProductTarget& t = targets[i];
        operands.siblings[i - 1] = {t.w->data, t.w->rows, t.w->scale, t.y, t.y_stride, nullptr,
                                    nullptr};
    }
    const int n_targets = static_cast<int>(targets.size());
    if (matvec_columns(operands.widest_rows(n_targets), n)) {
        MatvecParams p;
        static_cast<ProductOperands&>(p) = operands;
        p.n_cols = n;
        launch_matvec_columns(k.int_matvec, p, n, ctx.stream, n_targets);
        return;
    }
    TileParams p;
    static_cast<ProductOperands&>(p) = operands;
    p.n_tokens = n;
    p.n_targets = n_targets;
    k.int_tile(p, (n + kTileTokens - 1) / kTileTokens, ctx.stream);
}

void matmul_routed_pair(const MatmulContext& ctx, const ExpertMatrix& a, const ExpertMatrix& b,
                        const Route* routes, int n_routes, int x_div, const float* x,
                        int64_t x_stride, float* y_a, float* y_b, int64_t y_stride,
                        const ExpertGroups* groups, const Q8Rows* xq) {
    if (n_routes <= 0) return;
    const FormatKernels& k = kernels_for(*a.matrix.format);
    const bool shared = use_int_kernels(k, xq) && a.matrix.format == b.matrix.format &&
                        a.matrix.cols == b.matrix.cols && a.expert_stride == b.expert_stride &&
                        a.bias_stride == b.bias_stride;
    if (!shared) {
        matmul_routed(ctx, a, routes, n_routes, x_div, x, x_stride, y_a, y_stride, groups, xq);
        matmul_routed(ctx, b, routes, n_routes, x_div, x, x_stride, y_b, y_stride, groups, xq);
        return;
    }
    ProductOperands operands = expert_operands(ctx, a, x_div, x, x_stride, y_a, y_stride);
    set_codes(operands, *xq);
    operands.siblings[0] = {b.matrix.data, b.matrix.rows, 1.0f, y_b, y_stride, b.scales, b.bias};
    if (groups == nullptr) {
        MatvecParams p;
        static_cast<ProductOperands&>(p) = operands;
        p.routes = routes;
        k.int_matvec[0](p, n_routes, ctx.stream, 2);
        return;
    }
    TileParams p;
    static_cast<ProductOperands&>(p) = operands;
    set_groups(p, *groups);
    p.n_targets = 2;
    k.int_tile(p, groups->max_tiles, ctx.stream);
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
