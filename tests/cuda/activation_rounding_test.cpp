// The GPU's activation rounding (cuda/activation_rounding.h) on the host, bit for bit against the
// formats' quantizers followed by their dequantizers: the values the CPU's dot products use.
#include "cuda/activation_rounding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "formats/format_table.h"

namespace tandem::gpu {
namespace {

std::vector<float> test_row(int kind, int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    switch (kind) {
        case 1:
            std::fill(x.begin(), x.begin() + n / 2, 0.0f);
            break;  // a zero block
        case 2:     // equal magnitudes
            for (int i = 0; i < n; i += 5) x[i] = i % 2 ? 3.0f : -3.0f;
            break;
        case 3:  // wide range: tiny, subnormal, large
            for (int i = 0; i < n; ++i) x[i] *= std::pow(10.0f, static_cast<float>(i % 13) - 8.0f);
            x[1] = 1e-40f;
            break;
        case 4:  // values on rounding midpoints of the f16 / bf16 grids
            for (int i = 0; i < n; ++i) x[i] = 1.0f + (2 * (i % 64) + 1) * std::ldexp(1.0f, -12);
            break;
        default:
            break;
    }
    return x;
}

TEST(ActivationRounding, MatchesTheFormatsQuantizers) {
    const int n = 1024;
    for (GgmlType dot :
         {GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kF16, GgmlType::kBF16}) {
        const FormatTraits& f = format_of(dot);
        const ActivationRounding r = rounding_for(dot);
        ASSERT_EQ(rounding_block(r), f.block_size) << f.name;
        for (int kind = 0; kind < 5; ++kind) {
            for (uint64_t seed = 1; seed <= 3; ++seed) {
                const std::vector<float> x = test_row(kind, n, seed * 10 + kind);
                std::vector<uint8_t> q(row_bytes(f, n));
                std::vector<float> ref(n), ours(n);
                f.quantize_row(x.data(), q.data(), n);
                f.dequantize_row(q.data(), ref.data(), n);
                for (int b = 0; b < n; b += rounding_block(r))
                    round_block(r, x.data() + b, ours.data() + b);
                for (int i = 0; i < n; ++i) {
                    ASSERT_EQ(std::memcmp(&ours[i], &ref[i], 4), 0)
                        << f.name << " kind " << kind << " value " << i << ": " << ours[i] << " vs "
                        << ref[i];
                }
            }
        }
    }
}

TEST(ActivationRounding, F32IsLeftAlone) {
    EXPECT_EQ(rounding_for(GgmlType::kF32), ActivationRounding::kNone);
    EXPECT_EQ(round_value(ActivationRounding::kNone, 0.1f), 0.1f);
}

}  // namespace
}  // namespace tandem::gpu
