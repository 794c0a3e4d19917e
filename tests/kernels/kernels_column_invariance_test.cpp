// Column invariance of the dot tiles: the float result of one (row, column) pair must be
// bit-identical whatever the number of columns in the call (1..8) and whichever columns share
// the tile, so that a token's logits do not depend on how many others are batched with it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "formats/format_table.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

// The weight types whose kernels are written to the rule (extend as kernels are brought to it).
const char* const kInvariantTypes[] = {"iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
                                       "iq1_s",   "iq1_m",  "tq1_0", "tq2_0"};

std::vector<float> random_floats(int64_t n, uint64_t seed, float scale) {
    std::vector<float> v(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& x : v) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x = static_cast<float>((static_cast<double>(s >> 11) * 0x1p-53 * 2 - 1) * scale);
    }
    return v;
}

std::vector<std::string> runnable_variants() {
    std::vector<std::string> names;
    for (const KernelVariant& v : kernel_variants()) {
        if (v.name != "reference") names.emplace_back(v.name);
    }
    return names;
}

class ColumnInvarianceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ColumnInvarianceTest, ResultDoesNotDependOnColumnCount) {
    const KernelVariant* variant = find_kernel_variant(GetParam());
    ASSERT_NE(variant, nullptr);
    if (variant->score(cpu_features()) <= 0) GTEST_SKIP() << "this CPU cannot run " << GetParam();
    const KernelTable& table = *variant->table();
    constexpr int kRows = 19, kCols = kMaxTileCols;
    for (const char* name : kInvariantTypes) {
        const FormatTraits* f = find_format(name);
        ASSERT_NE(f, nullptr) << name;
        const FormatTraits& act = format_of(f->dot_type);
        const DotTileFn dot = table.dot[type_id(f->type)];
        ASSERT_NE(dot, nullptr) << name;
        uint64_t seed = 11;
        for (int64_t k :
             {f->block_size, 5 * f->block_size, (4096 / f->block_size + 1) * f->block_size}) {
            const size_t w_stride = row_bytes(*f, k) + 8, a_stride = row_bytes(act, k) + 4;
            std::vector<uint8_t> w(w_stride * kRows), a(a_stride * kCols);
            for (int r = 0; r < kRows; ++r) {
                if (f->random_blocks != nullptr) {
                    f->random_blocks(w.data() + r * w_stride, k / f->block_size, seed * 100 + r,
                                     0.5f);
                } else {
                    const auto x = random_floats(k, seed * 100 + r, 2.0f);
                    f->quantize_row(x.data(), w.data() + r * w_stride, k);
                }
            }
            for (int c = 0; c < kCols; ++c) {
                const auto x = random_floats(k, seed * 7777 + c, 3.0f);
                act.quantize_row(x.data(), a.data() + c * a_stride, k);
            }
            ++seed;
            // One column at a time.
            std::vector<float> single(kRows * kCols);
            for (int c = 0; c < kCols; ++c) {
                dot(k, w.data(), w_stride, kRows, a.data() + c * a_stride, a_stride, 1,
                    single.data() + c * kRows, kRows);
            }
            // Every window of n_cols consecutive columns.
            for (int n_cols = 2; n_cols <= kCols; ++n_cols) {
                for (int c0 = 0; c0 + n_cols <= kCols; ++c0) {
                    std::vector<float> got(kRows * n_cols);
                    dot(k, w.data(), w_stride, kRows, a.data() + c0 * a_stride, a_stride, n_cols,
                        got.data(), kRows);
                    for (int c = 0; c < n_cols; ++c) {
                        ASSERT_EQ(
                            0, std::memcmp(got.data() + c * kRows, single.data() + (c0 + c) * kRows,
                                           kRows * sizeof(float)))
                            << variant->name << " " << name << " k=" << k << ": column " << c0 + c
                            << " differs with n_cols=" << n_cols << " starting at column " << c0;
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, ColumnInvarianceTest, ::testing::ValuesIn(runnable_variants()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param;
                         });

}  // namespace
}  // namespace tandem
