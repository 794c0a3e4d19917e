// The GPU's matrix products for every weight format against the format table's dequantization on
// the host, in double: decode shapes (1..8 rows of activations, the matrix-vector path) within
// float rounding, prefill shapes (tensor-core tiles, 3xTF32) about as close; the
// routed products of MoE layers per route and grouped by expert; and the embedding rows bit for
// bit. The formats with an integer view run each product twice: on f32 activations (the float
// kernels) and on activations rounded through their q8 type with the codes (the integer kernels),
// whose reference multiplies the rounded values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/block_dequant.h"
#include "cuda/dequant_tables.h"
#include "cuda/elementwise.h"
#include "cuda/gpu_test_util.h"
#include "cuda/matmul.h"
#include "cuda/moe_routing.h"
#include "cuda/stream.h"

namespace tandem {
namespace {

using testing::DeviceArray;

struct Bound {
    double worst = 0.0;  // max |gpu - ref| / (sum |terms| + 1e-30)
};

// y[t][r] against Σ_k w[r][k] x[t][k] in double; returns the worst error relative to Σ|terms|.
double worst_relative(const std::vector<float>& y, int64_t y_stride, const std::vector<float>& w,
                      const std::vector<float>& x, int64_t rows, int64_t cols, int n, float scale,
                      const std::vector<int>* out_rows = nullptr) {
    double worst = 0.0;
    for (int t = 0; t < n; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
            double ref = 0.0, mag = 0.0;
            for (int64_t k = 0; k < cols; ++k) {
                const double term = static_cast<double>(w[r * cols + k]) * x[t * cols + k];
                ref += term;
                mag += std::fabs(term);
            }
            const int o = out_rows != nullptr ? (*out_rows)[t] : t;
            const double got = y[o * y_stride + r];
            const double err = std::fabs(got - ref * scale) / (mag * std::fabs(scale) + 1e-30);
            if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
        }
    }
    return worst;
}

// The activations of a test product: x on the device, or with `codes` x rounded on the device
// through the format's activation type, with the q8 codes the integer kernels read. `host` is
// what the reference multiplies.
class TestInput {
  public:
    TestInput(const FormatTraits& f, const std::vector<float>& x, int n, int64_t cols, bool codes)
        : x_(x), rounded_(x.size()), q_(x.size()), d_(x.size() / 32 + 1), host_(x) {
        if (!codes) return;
        q8_ = {q_.get(), d_.get(), cols, cols / 32};
        cuda::round_activations({x_.get(), n, cols, cols}, f.dot_type,
                                {rounded_.get(), n, cols, cols}, nullptr, &q8_);
        host_ = rounded_.download();
    }
    const float* x() const { return q8_.q != nullptr ? rounded_.get() : x_.get(); }
    const cuda::Q8Rows* codes() const { return q8_.q != nullptr ? &q8_ : nullptr; }
    const std::vector<float>& host() const { return host_; }

  private:
    DeviceArray<float> x_, rounded_;
    DeviceArray<int8_t> q_;
    DeviceArray<float> d_;
    cuda::Q8Rows q8_;
    std::vector<float> host_;
};

// The activation modes a format is tested in: f32, and q8 codes where it has integer kernels.
std::vector<bool> code_modes(const FormatTraits& f) {
    if (!cuda::gpu_integer_products(f.type)) return {false};
    return {false, true};
}

TEST(GpuMatmulList, IntegerKernelsForTheIntegerFormats) {
    for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                       GgmlType::kMXFP4, GgmlType::kNVFP4, GgmlType::kIQ4_XS, GgmlType::kIQ2_XXS})
        EXPECT_TRUE(cuda::gpu_integer_products(t)) << format_of(t).name;
    EXPECT_FALSE(cuda::gpu_integer_products(GgmlType::kBF16));
}

class GpuMatmul : public ::testing::TestWithParam<GgmlType> {};

TEST_P(GpuMatmul, DenseProductsMatchTheReference) {
    TANDEM_REQUIRE_GPU();
    const FormatTraits& f = format_of(GetParam());
    ASSERT_TRUE(cuda::gpu_supports(f.type));
    const int64_t rows = 67, cols = 512;  // rows past a tile and a warp's rows
    const std::vector<uint8_t> wbytes = testing::random_weights(f, rows, cols, 11);
    const std::vector<float> w = testing::dequantize(f, wbytes, rows, cols);
    cuda::DeviceDequantTables tables;
    cuda::Stream stream;
    const cuda::MatmulContext ctx{stream.get(), tables.tables()};
    DeviceArray<uint8_t> dw(wbytes);
    WeightMatrix m{&f, dw.get(), cols, rows, row_bytes(f, cols), 0.37f};
    for (bool codes : code_modes(f)) {
        // Up to 8 rows: matrix-vector; 9 to 100: matrix-vector jobs of 8 columns (67 rows make
        // too few tiles); 2100: tiles.
        for (int n : {1, 2, 3, 5, 8, 9, 64, 100, 2100}) {
            const TestInput in(f, testing::random_floats(static_cast<size_t>(n) * cols, 100 + n), n,
                               cols, codes);
            const int64_t y_stride = rows + 5;
            DeviceArray<float> dy(std::vector<float>(static_cast<size_t>(n) * y_stride, NAN));
            cuda::matmul(ctx, m, in.x(), cols, n, dy.get(), y_stride, in.codes());
            const double worst =
                worst_relative(dy.download(), y_stride, w, in.host(), rows, cols, n, m.scale);
            // f32 accumulation (matrix-vector) or TF32 operands (tiles: 2^-11 relative each).
            const double bound = n <= 100 ? 2e-6 : 1e-5;
            EXPECT_LE(worst, bound)
                << f.name << ", " << n << " rows" << (codes ? ", q8 codes" : "");
        }
    }
}

TEST_P(GpuMatmul, RoutedProductsMatchTheReference) {
    TANDEM_REQUIRE_GPU();
    const FormatTraits& f = format_of(GetParam());
    const int n_expert = 6, k = 2;
    const int64_t rows = 40, cols = 256;
    const size_t rb = row_bytes(f, cols), stride = rb * rows;
    std::vector<uint8_t> wbytes;
    std::vector<std::vector<float>> w(n_expert);
    for (int e = 0; e < n_expert; ++e) {
        std::vector<uint8_t> part = testing::random_weights(f, rows, cols, 50 + e);
        w[e] = testing::dequantize(f, part, rows, cols);
        wbytes.insert(wbytes.end(), part.begin(), part.end());
    }
    std::vector<float> scales(n_expert), bias(n_expert * rows);
    for (int e = 0; e < n_expert; ++e) scales[e] = 0.5f + 0.25f * e;
    bias = testing::random_floats(bias.size(), 9);
    cuda::DeviceDequantTables tables;
    cuda::Stream stream;
    const cuda::MatmulContext ctx{stream.get(), tables.tables()};
    DeviceArray<uint8_t> dw(wbytes);
    DeviceArray<float> dscales(scales), dbias(bias);
    ExpertMatrix em;
    em.matrix = {&f, dw.get(), cols, rows, rb, 1.0f};
    em.expert_stride = stride;
    em.scales = dscales.get();
    em.bias = dbias.get();
    em.bias_stride = rows;
    // A second stack over the same weights with other scales and biases: the pair of stacks
    // (gate and up) one launch computes, the first the sibling.
    std::vector<float> scales_b(n_expert), bias_b = testing::random_floats(bias.size(), 19);
    for (int e = 0; e < n_expert; ++e) scales_b[e] = 1.5f - 0.125f * e;
    DeviceArray<float> dscales_b(scales_b), dbias_b(bias_b);
    ExpertMatrix em_b = em;
    em_b.scales = dscales_b.get();
    em_b.bias = dbias_b.get();
    for (const bool codes : code_modes(f)) {
        for (int n_tokens : {3, 8, 40, 150}) {
            const int n_routes = n_tokens * k;
            std::vector<Route> routes(n_routes);
            std::mt19937 rng(n_tokens);
            for (int j = 0; j < n_routes; ++j) {
                routes[j].expert = j % 7 == 3 ? -1 : static_cast<int>(rng() % n_expert);
                routes[j].weight = 1.0f;
            }
            const TestInput in(
                f, testing::random_floats(static_cast<size_t>(n_tokens) * cols, 7 + n_tokens),
                n_tokens, cols, codes);
            const std::vector<float>& x = in.host();
            DeviceArray<Route> droutes(routes);
            const bool grouped = n_tokens > cuda::kSmallBatch;
            DeviceArray<int32_t> sorted(n_routes),
                tile_expert(cuda::max_group_tiles(n_routes, n_expert)),
                tile_begin(tile_expert.size()), tile_end(tile_expert.size()), n_tiles(1);
            cuda::GroupBuffers g{sorted.get(),
                                 tile_expert.get(),
                                 tile_begin.get(),
                                 tile_end.get(),
                                 n_tiles.get(),
                                 n_routes,
                                 static_cast<int>(tile_expert.size())};
            cuda::ExpertGroups groups;
            if (grouped)
                groups = cuda::group_routes(droutes.get(), n_routes, n_expert, g, stream.get());
            // The worst error of y (stack with `sc` and `bi`) against the reference.
            const auto worst_of = [&](const std::vector<float>& y, const std::vector<float>& sc,
                                      const std::vector<float>& bi) {
                double worst = 0.0;
                for (int j = 0; j < n_routes; ++j) {
                    const int e = routes[j].expert;
                    if (e < 0) continue;
                    const int t = j / k;
                    for (int64_t r = 0; r < rows; ++r) {
                        double ref = 0.0, mag = 0.0;
                        for (int64_t c = 0; c < cols; ++c) {
                            const double term =
                                static_cast<double>(w[e][r * cols + c]) * x[t * cols + c];
                            ref += term;
                            mag += std::fabs(term);
                        }
                        ref = ref * sc[e] + bi[e * rows + r];
                        const double err = std::fabs(y[j * rows + r] - ref) /
                                           (mag * sc[e] + std::fabs(bi[e * rows + r]) + 1e-30);
                        if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
                    }
                }
                return worst;
            };
            const std::string what = std::string(f.name) + ", " + std::to_string(n_tokens) +
                                     " tokens" + (codes ? ", q8 codes" : "");
            const double bound = grouped ? 1e-5 : 2e-6;
            DeviceArray<float> dy(std::vector<float>(static_cast<size_t>(n_routes) * rows, NAN));
            cuda::matmul_routed(ctx, em, droutes.get(), n_routes, k, in.x(), cols, dy.get(), rows,
                                grouped ? &groups : nullptr, in.codes());
            EXPECT_LE(worst_of(dy.download(), scales, bias), bound) << what;
            DeviceArray<float> dy_a(std::vector<float>(static_cast<size_t>(n_routes) * rows, NAN));
            DeviceArray<float> dy_b(dy_a.size());
            dy_b.upload(std::vector<float>(dy_a.size(), NAN));
            cuda::matmul_routed_pair(ctx, em_b, em, droutes.get(), n_routes, k, in.x(), cols,
                                     dy_a.get(), dy_b.get(), rows, grouped ? &groups : nullptr,
                                     in.codes());
            EXPECT_LE(worst_of(dy_a.download(), scales_b, bias_b), bound) << what << ", pair a";
            EXPECT_LE(worst_of(dy_b.download(), scales, bias), bound) << what << ", pair b";
        }
    }
}

// Decode's down projection that makes its routes' activations itself (matmul_routed_glu): every
// output bit as glu_round_activations() and the routed product on its codes give it, for SiLU,
// gpt-oss's SwiGLU and GELU, with absent routes; refused where it does not fit.
TEST_P(GpuMatmul, DownProjectionFromGateAndUpMatchesTheRoundedCodes) {
    TANDEM_REQUIRE_GPU();
    const FormatTraits& f = format_of(GetParam());
    // 768 values a row: three q8_K blocks, or 24 of q8_0 (six a warp of the block).
    const int n_expert = 5, n_routes = 8;
    const int64_t rows = 70, cols = 768;
    std::vector<uint8_t> wbytes;
    for (int e = 0; e < n_expert; ++e) {
        const std::vector<uint8_t> part = testing::random_weights(f, rows, cols, 80 + e);
        wbytes.insert(wbytes.end(), part.begin(), part.end());
    }
    cuda::DeviceDequantTables tables;
    cuda::Stream stream;
    const cuda::MatmulContext ctx{stream.get(), tables.tables()};
    DeviceArray<uint8_t> dw(wbytes);
    // Per-expert scales (NVFP4's) and biases (gpt-oss's) as well.
    std::vector<float> scales(n_expert);
    for (int e = 0; e < n_expert; ++e) scales[e] = 0.75f + 0.125f * e;
    DeviceArray<float> dscales(scales), dbias(testing::random_floats(n_expert * rows, 93));
    ExpertMatrix em;
    em.matrix = {&f, dw.get(), cols, rows, row_bytes(f, cols), 1.0f};
    em.expert_stride = row_bytes(f, cols) * rows;
    em.scales = dscales.get();
    em.bias = dbias.get();
    em.bias_stride = rows;
    ExpertMatrix wide = em;
    wide.matrix.cols = 2048;  // long rows: each block would remake far more than it multiplies
    EXPECT_FALSE(cuda::routed_glu_fits(wide)) << f.name;
    if (!cuda::routed_glu_fits(em)) {
        EXPECT_FALSE(cuda::gpu_integer_products(f.type) && cuda::has_q8_codes(f.dot_type))
            << f.name;
        return;
    }
    std::vector<Route> routes(n_routes);
    for (int j = 0; j < n_routes; ++j) routes[j] = {j == 5 ? -1 : (3 * j + 1) % n_expert, 1.0f};
    DeviceArray<Route> droutes(routes);
    // Gates and ups up to ±8 (gpt-oss's clamps at 7 take part), rows `stride` apart.
    const int64_t stride = cols + 32;
    DeviceArray<float> gate(testing::random_floats(n_routes * stride, 91, 8.0f)),
        up(testing::random_floats(n_routes * stride, 92, 8.0f));
    cuda::upload_gelu_table();
    for (const GluKind kind : {GluKind::kSilu, GluKind::kSwigluOai, GluKind::kGelu}) {
        // The reference: act(gate) · up rounded into codes by their own launch, then the product.
        DeviceArray<float> rounded(n_routes * cols);
        DeviceArray<int8_t> q(n_routes * cols);
        DeviceArray<float> d(n_routes * cols / 32);
        const cuda::Q8Rows codes{q.get(), d.get(), cols, cols / 32};
        cuda::glu_round_activations(kind, {gate.get(), n_routes, cols, stride},
                                    {up.get(), n_routes, cols, stride}, f.dot_type,
                                    {rounded.get(), n_routes, cols, cols}, codes, stream.get());
        const std::vector<float> unset(static_cast<size_t>(n_routes) * rows, NAN);
        DeviceArray<float> want(unset), got(unset);
        cuda::matmul_routed(ctx, em, droutes.get(), n_routes, 1, rounded.get(), cols, want.get(),
                            rows, nullptr, &codes, true);
        cuda::matmul_routed_glu(ctx, em, droutes.get(), n_routes, kind, gate.get(), up.get(),
                                stride, got.get(), rows);
        const std::vector<float> a = want.download(), b = got.download();
        EXPECT_EQ(std::memcmp(a.data(), b.data(), 4 * a.size()), 0)
            << f.name << ", GLU kind " << static_cast<int>(kind);
        EXPECT_TRUE(std::isnan(b[5 * rows])) << "the absent route's row is left alone";
        EXPECT_FALSE(std::isnan(b[0])) << f.name;
    }
}

// q, k and v as one group (one launch where the integer kernels take it): each target as alone.
TEST_P(GpuMatmul, GroupedProductsMatchTheReference) {
    TANDEM_REQUIRE_GPU();
    const FormatTraits& f = format_of(GetParam());
    const int64_t cols = 256;
    const int64_t target_rows[3] = {70, 9, 33};
    cuda::DeviceDequantTables tables;
    cuda::Stream stream;
    const cuda::MatmulContext ctx{stream.get(), tables.tables()};
    std::vector<std::vector<float>> w(3);
    std::vector<DeviceArray<uint8_t>> dw;
    std::vector<WeightMatrix> m;
    for (int i = 0; i < 3; ++i) {
        const std::vector<uint8_t> bytes = testing::random_weights(f, target_rows[i], cols, 70 + i);
        w[i] = testing::dequantize(f, bytes, target_rows[i], cols);
        dw.emplace_back(bytes);
    }
    for (int i = 0; i < 3; ++i)
        m.push_back({&f, dw[i].get(), cols, target_rows[i], row_bytes(f, cols), 0.5f + i});
    for (bool codes : code_modes(f)) {
        for (int n : {1, 3, 8, 20, 4500}) {  // 20: matrix-vector jobs; 4500: tiles
            const TestInput in(f, testing::random_floats(static_cast<size_t>(n) * cols, 300 + n), n,
                               cols, codes);
            std::vector<DeviceArray<float>> dy;
            std::vector<cuda::ProductTarget> targets;
            for (int i = 0; i < 3; ++i) {
                const int64_t stride = target_rows[i] + 3 * i;
                dy.emplace_back(std::vector<float>(static_cast<size_t>(n) * stride, NAN));
                targets.push_back({&m[i], dy[i].get(), stride});
            }
            cuda::matmul_group(ctx, targets, in.x(), cols, n, in.codes());
            for (int i = 0; i < 3; ++i) {
                const double worst = worst_relative(dy[i].download(), targets[i].y_stride, w[i],
                                                    in.host(), target_rows[i], cols, n, m[i].scale);
                EXPECT_LE(worst, n <= 100 ? 2e-6 : 1e-5)
                    << f.name << ", target " << i << ", " << n << " rows"
                    << (codes ? ", q8 codes" : "");
            }
        }
    }
}

TEST_P(GpuMatmul, EmbeddingRowsBitIdentical) {
    TANDEM_REQUIRE_GPU();
    const FormatTraits& f = format_of(GetParam());
    const int64_t rows = 30, cols = 256;
    const std::vector<uint8_t> wbytes = testing::random_weights(f, rows, cols, 3);
    const std::vector<float> w = testing::dequantize(f, wbytes, rows, cols);
    cuda::DeviceDequantTables tables;
    cuda::Stream stream;
    const cuda::MatmulContext ctx{stream.get(), tables.tables()};
    DeviceArray<uint8_t> dw(wbytes);
    const std::vector<int32_t> tokens = {29, 0, 7, 7, 13};
    DeviceArray<int32_t> dt(tokens);
    DeviceArray<float> out(tokens.size() * cols);
    WeightMatrix m{&f, dw.get(), cols, rows, row_bytes(f, cols), 1.0f};
    cuda::embed_rows(ctx, m, dt.get(), static_cast<int>(tokens.size()), out.get(), cols);
    const std::vector<float> got = out.download();
    for (size_t t = 0; t < tokens.size(); ++t) {
        for (int64_t c = 0; c < cols; ++c) {
            const float ref = w[tokens[t] * cols + c];
            const float g = got[t * cols + c];
            if (std::isnan(ref) && std::isnan(g)) continue;
            ASSERT_EQ(std::memcmp(&ref, &g, 4), 0)
                << f.name << " token " << tokens[t] << " value " << c;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(WeightFormats, GpuMatmul, ::testing::ValuesIn(gpu::kGpuWeightFormats),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                             return std::string(format_of(info.param).name);
                         });

}  // namespace
}  // namespace tandem
