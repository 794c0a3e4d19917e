// Every kernel variant this CPU can run against the reference variant (the format table's
// scalar functions): dot tiles for every weight type, both shapes (matvec and C = 2..8), several
// row lengths; activation quantizers byte for byte. Variants the CPU lacks are skipped by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "formats/format_table.h"
#include "kernels/kernel_table.h"
#include "kernels/variant_reference.h"

namespace tandem {
namespace {

// Float rounding bound: integer sums are exact, so the kernels differ from the reference
// (products and sums in double) only by the float scaling and accumulation of per-block terms.
// |kernel - reference| <= kTolerance * sum |w_i * a_i| (values as dequantized); measured worst
// case is about 1e-7.
constexpr double kTolerance = 2e-6;

std::vector<float> random_floats(int64_t n, uint64_t seed, float scale = 1.0f) {
    std::vector<float> v(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& x : v) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        const double u = static_cast<double>(s >> 11) * 0x1p-53;  // [0, 1)
        x = static_cast<float>((u * 2 - 1) * scale);
    }
    return v;
}

std::vector<std::string> variant_names() {
    std::vector<std::string> names;
    for (const KernelVariant& v : kernel_variants()) {
        if (v.name != "reference") names.emplace_back(v.name);
    }
    return names;
}

class KernelVariantTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        variant_ = find_kernel_variant(GetParam());
        ASSERT_NE(variant_, nullptr);
        if (variant_->score(cpu_features()) <= 0) {
            GTEST_SKIP() << "variant " << GetParam() << " skipped: this CPU cannot run it";
        }
        table_ = variant_->table();
    }
    const KernelVariant* variant_ = nullptr;
    const KernelTable* table_ = nullptr;
};

// The weight types with kernels of their own in this round (the rest use the reference).
const char* const kKernelTypes[] = {
    "f32",   "f16",    "bf16",   "q4_0",    "q4_1",    "q5_0",   "q5_1",  "q8_0",
    "q2_K",  "q3_K",   "q4_K",   "q5_K",    "q6_K",    "iq4_nl", "iq4_xs", "mxfp4",
    "nvfp4", "iq2_xxs", "iq2_xs", "iq2_s",  "iq3_xxs", "iq3_s",  "iq1_s", "iq1_m",  "tq1_0",  "tq2_0",
    "q1_0",  "q2_0"};

// Row lengths for a block size: one block, an odd count (the last half-step of 32-value
// types), a few hundred, a few thousand, and more than the kernels prepare per chunk of the
// activation (16384 values); float types also get ragged tails, and a length of whole groups
// of steps (4096: no padded tail, as in the models).
std::vector<int64_t> row_lengths(int64_t block) {
    if (block == 1) return {1, 7, 16, 33, 100, 4096, 4099};
    return {block, 3 * block, (640 / block + 1) * block, (4096 / block + 1) * block,
            (16384 / block + 1) * block};
}

struct Case {
    const FormatTraits* f;
    const FormatTraits* act;
    int64_t k;
    int n_rows;
    size_t w_stride, a_stride;
    std::vector<uint8_t> w, a;
    std::vector<double> abs_terms;  // per (col, row): sum |w_i * a_i|
};

// with_terms: also sum |w_i * a_i| per (column, row) for the error bound (slow for long rows).
Case make_case(const FormatTraits& f, int64_t k, int n_rows, int n_cols, uint64_t seed,
               bool with_terms = true) {
    Case c;
    c.f = &f;
    c.act = &format_of(f.dot_type);
    c.k = k;
    c.n_rows = n_rows;
    // Strides with some slack: the kernels must follow them, not assume packed rows.
    c.w_stride = row_bytes(f, k) + 8;
    c.a_stride = row_bytes(*c.act, k) + 4;
    c.w.assign(c.w_stride * n_rows, 0);
    c.a.assign(c.a_stride * n_cols, 0);
    for (int r = 0; r < n_rows; ++r) {
        uint8_t* row = c.w.data() + r * c.w_stride;
        if (f.random_blocks != nullptr) {
            f.random_blocks(row, k / f.block_size, seed * 1000 + r, 0.5f);
        } else {
            const auto x = random_floats(k, seed * 1000 + r, 2.0f);
            f.quantize_row(x.data(), row, k);
        }
    }
    for (int col = 0; col < n_cols; ++col) {
        const auto x = random_floats(k, seed * 7777 + col, 3.0f);
        c.act->quantize_row(x.data(), c.a.data() + col * c.a_stride, k);
    }
    if (!with_terms) return c;
    std::vector<float> wv(k), av(k);
    for (int col = 0; col < n_cols; ++col) {
        c.act->dequantize_row(c.a.data() + col * c.a_stride, av.data(), k);
        for (int r = 0; r < n_rows; ++r) {
            f.dequantize_row(c.w.data() + r * c.w_stride, wv.data(), k);
            double s = 0;
            for (int64_t i = 0; i < k; ++i) s += std::fabs(static_cast<double>(wv[i]) * av[i]);
            c.abs_terms.push_back(s);
        }
    }
    return c;
}

TEST_P(KernelVariantTest, DotTilesMatchReference) {
    const KernelTable& ref = *reference_kernel_table();
    double worst = 0;
    std::string worst_where;
    for (const char* name : kKernelTypes) {
        const FormatTraits* f = find_format(name);
        ASSERT_NE(f, nullptr) << name;
        const DotTileFn dot = table_->dot[type_id(f->type)];
        ASSERT_NE(dot, nullptr) << variant_->name << " has no kernel for " << name;
        uint64_t seed = 1;
        for (int64_t k : row_lengths(f->block_size)) {
            // 37 rows: several row groups and tiles (16 rows side by side at most), not a
            // multiple of any, so the padded last group is exercised too.
            constexpr int kRows = 37;
            const Case c = make_case(*f, k, kRows, kMaxTileCols, seed++);
            const size_t out_stride = kRows + 3;
            std::vector<float> want(out_stride * kMaxTileCols), got(out_stride * kMaxTileCols);
            ref.dot[type_id(f->type)](k, c.w.data(), c.w_stride, kRows, c.a.data(), c.a_stride,
                                      kMaxTileCols, want.data(), out_stride);
            for (int n_cols = 1; n_cols <= kMaxTileCols; ++n_cols) {
                for (int n_rows : {1, 7, kRows}) {
                    std::fill(got.begin(), got.end(), NAN);
                    dot(k, c.w.data(), c.w_stride, n_rows, c.a.data(), c.a_stride, n_cols,
                        got.data(), out_stride);
                    for (int col = 0; col < n_cols; ++col) {
                        for (int r = 0; r < n_rows; ++r) {
                            const double diff =
                                std::fabs(static_cast<double>(got[col * out_stride + r]) -
                                          want[col * out_stride + r]);
                            const double scale = c.abs_terms[col * kRows + r];
                            const double rel = diff / (scale + 1e-30);
                            if (rel > worst) {
                                worst = rel;
                                worst_where = std::string(name) + " k=" + std::to_string(k);
                            }
                            ASSERT_LE(diff, kTolerance * scale + 1e-30)
                                << variant_->name << " " << name << " k=" << k
                                << " n_cols=" << n_cols << " n_rows=" << n_rows << " row " << r
                                << " col " << col << ": got " << got[col * out_stride + r]
                                << " want " << want[col * out_stride + r];
                        }
                    }
                    // Nothing written outside the tile.
                    for (size_t i = 0; i < got.size(); ++i) {
                        const bool inside = static_cast<int>(i / out_stride) < n_cols &&
                                            static_cast<int>(i % out_stride) < n_rows;
                        if (!inside) {
                            ASSERT_TRUE(std::isnan(got[i])) << name << " wrote out of tile";
                        }
                    }
                }
            }
        }
    }
    std::printf("[ %s ] worst |d| / sum|terms| = %.2e (%s)\n", variant_->name.data(), worst,
                worst_where.c_str());
}

// Batch invariance: a column's result is bit for bit the same whatever tile it is computed in
// (C = 1..8, any position in the tile), so batched decode gives each sequence exactly what it
// would get alone. Integer work may be shared between columns; the float steps of one column
// may not depend on the others.
// The first column whose result in some tile differs from its result alone, or "".
std::string first_tile_dependence(const DotTileFn dot, const FormatTraits& f) {
    uint64_t seed = 100;
    for (int64_t k : row_lengths(f.block_size)) {
        // At k of about 4096 more rows than a tile's row block (128): the tiles that carry
        // their sums across chunks of k go through two row blocks.
        const int kRows = k > 4096 && k < 16384 ? 131 : 37;
        constexpr int kCols = 2 * kMaxTileCols;
        const Case c = make_case(f, k, kRows, kCols, seed++, /*with_terms=*/false);
        const size_t out_stride = kRows;
        for (int n_rows : {1, 5, kRows}) {
            std::vector<float> solo(out_stride * kCols);
            for (int col = 0; col < kCols; ++col) {
                dot(k, c.w.data(), c.w_stride, n_rows, c.a.data() + col * c.a_stride, c.a_stride,
                    1, solo.data() + col * out_stride, out_stride);
            }
            for (int n_cols = 2; n_cols <= kMaxTileCols; ++n_cols) {
                for (int first : {0, 3, kCols - n_cols}) {
                    std::vector<float> got(out_stride * n_cols);
                    dot(k, c.w.data(), c.w_stride, n_rows, c.a.data() + first * c.a_stride,
                        c.a_stride, n_cols, got.data(), out_stride);
                    for (int col = 0; col < n_cols; ++col) {
                        for (int r = 0; r < n_rows; ++r) {
                            const float alone = solo[(first + col) * out_stride + r];
                            const float tiled = got[col * out_stride + r];
                            if (std::memcmp(&alone, &tiled, sizeof(float)) != 0) {
                                return fmt::format(
                                    "{} k={} n_rows={}: column {} row {} alone {:.9g}, in a "
                                    "tile of {} from column {} {:.9g}",
                                    f.name, k, n_rows, first + col, r, alone, n_cols, first,
                                    tiled);
                            }
                        }
                    }
                }
            }
        }
    }
    return "";
}

// Batch invariance: a column's result is bit for bit the same whatever tile it is computed in
// (C = 1..8, any position in the tile), so batched decode gives each sequence exactly what it
// would get alone. Integer work may be shared between columns; the float steps of one column
// may not depend on the others.
TEST_P(KernelVariantTest, ColumnsAreIndependentOfTheirTile) {
    std::string failures;
    for (const FormatTraits& f : all_formats()) {
        if (f.ref_dot == nullptr) continue;
        const DotTileFn dot = table_->dot[type_id(f.type)];
        ASSERT_NE(dot, nullptr) << f.name;
        const std::string failure = first_tile_dependence(dot, f);
        if (!failure.empty()) failures += "\n  " + failure;
    }
    EXPECT_TRUE(failures.empty()) << variant_->name << ":" << failures;
}

// Inputs that exercise rounding and edge cases: random values of several magnitudes, an
// all-zero block, exact halves (rounding ties), repeated maxima of both signs, huge and tiny.
std::vector<float> quantizer_input(int64_t k, uint64_t seed) {
    auto x = random_floats(k, seed, seed % 3 == 0 ? 1e-3f : (seed % 3 == 1 ? 1.0f : 300.0f));
    for (int64_t i = 0; i < k && i < 32; ++i) x[i] = 0.0f;  // zero block
    for (int64_t i = 32; i < k && i < 64; ++i) x[i] = static_cast<float>(i % 9 - 4) * 0.5f;  // ties
    if (k >= 256) {
        x[100] = 5.0f;
        x[101] = -5.0f;  // two maxima: the first one sets the sign of q8_K's scale
        // tiny values (a block below ~4e-37 would overflow 127 / amax: undefined in ggml too)
        for (int64_t i = 256; i < k && i < 288; ++i) x[i] = static_cast<float>(i) * 1e-35f;
    }
    return x;
}

TEST_P(KernelVariantTest, QuantizersMatchReferenceBytes) {
    for (const char* name : {"q8_0", "q8_1", "q8_K", "f16", "bf16", "f32"}) {
        const FormatTraits* f = find_format(name);
        ASSERT_NE(f, nullptr);
        const ActQuantizeFn quantize = table_->quantize[type_id(f->type)];
        ASSERT_NE(quantize, nullptr) << variant_->name << " has no quantizer for " << name;
        uint64_t seed = 1;
        for (int64_t k : {f->block_size == 1 ? int64_t{1} : f->block_size, int64_t{256},
                          int64_t{4096}, int64_t{4096 + 256}, int64_t{12288}}) {
            if (k % f->block_size != 0) continue;
            for (int rep = 0; rep < 3; ++rep) {
                const auto x = quantizer_input(k, seed++);
                std::vector<uint8_t> want(row_bytes(*f, k)), got(row_bytes(*f, k), 0xAB);
                f->quantize_row(x.data(), want.data(), k);
                quantize(x.data(), got.data(), k);
                size_t first = 0;
                while (first < want.size() && want[first] == got[first]) ++first;
                ASSERT_EQ(first, want.size())
                    << variant_->name << " " << name << " k=" << k << " seed " << seed - 1
                    << ": first difference at byte " << first << " (want " << int(want[first])
                    << ", got " << int(got[first]) << ")";
            }
        }
    }
    // Float conversions of special values (NaN, infinities, overflow, subnormals, -0).
    std::vector<float> special = {NAN,      -NAN,     INFINITY,         -INFINITY, 1e6f,  -70000.0f,
                                  65519.0f, 65520.0f, 1e-40f,           -3e-8f,    6e-8f, -0.0f,
                                  1.0f / 3, 3.0e38f,  -1.17549435e-38f, 2.5f};
    for (const char* name : {"f16", "bf16"}) {
        const FormatTraits* f = find_format(name);
        std::vector<uint8_t> want(2 * special.size()), got(2 * special.size());
        f->quantize_row(special.data(), want.data(), static_cast<int64_t>(special.size()));
        table_->quantize[type_id(f->type)](special.data(), got.data(),
                                           static_cast<int64_t>(special.size()));
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size()))
            << variant_->name << " " << name;
    }
}

// The gated delta rule's step (qwen3.5's linear attention): a few tokens of one head against the
// same steps in double from the state's definition, for heads of whole vectors and of a ragged
// length; the state's decay, its rank-1 update and the read-out each within float rounding.
TEST_P(KernelVariantTest, DeltaRuleStepsMatchTheRuleInDouble) {
    ASSERT_NE(table_->delta_rule_step, nullptr) << variant_->name;
    for (const int S : {128, 64, 100}) {
        const size_t n = static_cast<size_t>(S) * S;
        std::vector<float> M = random_floats(static_cast<int64_t>(n), 90 + S, 0.5f);
        std::vector<double> ref(M.begin(), M.end());  // ref[j·S + i] = state[i][j]
        std::vector<float> out(S), delta(S);
        const float scale = 1.0f / std::sqrt(static_cast<float>(S));
        double worst = 0.0;
        for (int t = 0; t < 3; ++t) {
            const auto q = random_floats(S, 200 + t, 1.0f), k = random_floats(S, 300 + t, 1.0f),
                       v = random_floats(S, 400 + t, 2.0f);
            const float decay = 0.9f - 0.1f * t, beta = 0.25f + 0.25f * t;
            table_->delta_rule_step(M.data(), S, q.data(), k.data(), v.data(), decay, beta, scale,
                                    out.data(), delta.data());
            for (double& x : ref) x *= decay;
            std::vector<double> d(S);
            for (int j = 0; j < S; ++j) {
                double kv = 0.0;
                for (int i = 0; i < S; ++i) kv += ref[static_cast<size_t>(j) * S + i] * k[i];
                d[j] = (v[j] - kv) * beta;
            }
            for (int j = 0; j < S; ++j)
                for (int i = 0; i < S; ++i) ref[static_cast<size_t>(j) * S + i] += k[i] * d[j];
            for (int j = 0; j < S; ++j) {
                double o = 0.0, mag = 0.0;
                for (int i = 0; i < S; ++i) {
                    o += ref[static_cast<size_t>(j) * S + i] * q[i];
                    mag += std::fabs(ref[static_cast<size_t>(j) * S + i] * q[i]);
                }
                worst = std::max(worst, std::fabs(out[j] - o * scale) / (mag * scale + 1e-30));
            }
        }
        EXPECT_LE(worst, 1e-5) << variant_->name << ", heads of " << S;
        double state_worst = 0.0;
        for (size_t e = 0; e < n; ++e)
            state_worst =
                std::max(state_worst, std::fabs(M[e] - ref[e]) / (std::fabs(ref[e]) + 1.0));
        EXPECT_LE(state_worst, 1e-5) << variant_->name << ", heads of " << S;
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, KernelVariantTest, ::testing::ValuesIn(variant_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param;
                         });

// Every variant's table, whether or not this CPU runs it, has a kernel for every weight type
// of the format table and a quantizer for every activation format they use.
TEST(KernelTables, EveryVariantCoversEveryType) {
    for (const KernelVariant& v : kernel_variants()) {
        const KernelTable* t = v.table();
        ASSERT_NE(t, nullptr) << v.name;
        EXPECT_EQ(t->name, v.name);
        for (const FormatTraits& f : all_formats()) {
            if (f.ref_dot == nullptr) continue;
            EXPECT_NE(t->dot[type_id(f.type)], nullptr) << v.name << ": no dot for " << f.name;
            EXPECT_NE(t->quantize[type_id(f.dot_type)], nullptr)
                << v.name << ": no quantizer for " << format_of(f.dot_type).name;
        }
    }
}

TEST(KernelTables, ChosenVariantRunsHere) {
    const KernelVariant& chosen = chosen_kernel_variant();
    EXPECT_GT(chosen.score(cpu_features()), 0);
    // Which variants this run tested (the others are skipped by KernelVariantTest).
    std::printf("[ variants ] cpu: %s\n", cpu_features().summary().c_str());
    for (const KernelVariant& v : kernel_variants()) {
        const int score = v.score(cpu_features());
        std::printf("[ variants ] %-12s score %2d  %s%s\n", v.name.data(), score,
                    score > 0 ? "runs here" : "skipped (CPU lacks it)",
                    &v == &chosen ? ", chosen" : "");
    }
#if defined(__aarch64__)
    // Every aarch64 CPU that has sdot gets the NEON kernels (the qemu "max" CPU included).
    if (cpu_features().dotprod) {
        const KernelVariant* neon = find_kernel_variant("neon_dotprod");
        ASSERT_NE(neon, nullptr) << "neon_dotprod not built";
        EXPECT_GT(neon->score(cpu_features()), 0);
        EXPECT_GE(chosen.score(cpu_features()), neon->score(cpu_features()));
    }
    if (cpu_features().i8mm) {
        const KernelVariant* i8mm = find_kernel_variant("neon_i8mm");
        ASSERT_NE(i8mm, nullptr) << "neon_i8mm not built";
        EXPECT_GT(i8mm->score(cpu_features()), 0);
    }
#endif
    for (const KernelVariant& v : kernel_variants()) {
        if (v.score(cpu_features()) > chosen.score(cpu_features())) {
            EXPECT_NE(std::getenv("TANDEM_CPU_VARIANT"), nullptr)
                << v.name << " outscores " << chosen.name;
        }
    }
}

}  // namespace
}  // namespace tandem
