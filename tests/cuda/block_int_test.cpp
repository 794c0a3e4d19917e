// The integer view of the weight formats (cuda/block_int.h), compiled for the host: every chunk's
// codes, scale and min give chunk8's values exactly (scale · q then + min, each rounded), on
// valid, quantized and random blocks; the chunks of a scale group share scale and min; formats
// without a min say so. The integer kernels' exactness rests on this.
#include "cuda/block_int.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/format_table.h"

namespace tandem::gpu {
namespace {

// The formats with an integer view, by type, as a callable; false for the others.
struct IntView {
    int values = 0, bytes = 0, group = 0;
    bool has_min = false;
    IntChunk (*chunk)(const uint8_t*, int, const DequantTables&) = nullptr;
    void (*chunk8)(const uint8_t*, int, float*, const DequantTables&) = nullptr;
};

IntView int_view(GgmlType type) {
    IntView v;
    for_each_weight_format([&](auto tag) {
        using I = BlockInt<decltype(tag)::kType>;
        if constexpr (I::kDefined) {
            if (tag.kType == type) {
                using B = typename decltype(tag)::Format;
                v = {B::kValues, B::kBytes, I::kGroup, I::kHasMin, &I::chunk, &B::chunk8};
            }
        }
    });
    return v;
}

bool same(float a, float b) {
    return a == b || (std::isnan(a) && std::isnan(b));
}
bool same_bits(float a, float b) {
    return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b));
}

std::vector<GgmlType> int_formats() {
    std::vector<GgmlType> out;
    for (GgmlType t : kGpuWeightFormats)
        if (int_view(t).chunk != nullptr) out.push_back(t);
    return out;
}

TEST(BlockIntList, TheFormatsPeopleRun) {
    // The quantized formats the matrix kernels must make fast have an integer view.
    for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                       GgmlType::kQ6_K, GgmlType::kMXFP4, GgmlType::kNVFP4, GgmlType::kIQ4_XS,
                       GgmlType::kIQ2_XXS, GgmlType::kIQ3_XXS})
        EXPECT_NE(int_view(t).chunk, nullptr) << format_of(t).name;
    EXPECT_EQ(int_view(GgmlType::kF16).chunk, nullptr);
    EXPECT_EQ(int_view(GgmlType::kIQ1_S).chunk, nullptr);
}

class BlockIntChunks : public ::testing::TestWithParam<GgmlType> {};

TEST_P(BlockIntChunks, GiveChunk8sValues) {
    const FormatTraits& format = format_of(GetParam());
    const IntView view = int_view(GetParam());
    ASSERT_NE(view.chunk, nullptr);
    const DequantTables tables = host_dequant_tables();
    constexpr int kBlocks = 16;
    const int64_t n = int64_t{kBlocks} * view.values;
    std::vector<uint8_t> storage(row_bytes(format, n) + 256);
    const auto base = reinterpret_cast<uintptr_t>(storage.data());
    uint8_t* row = storage.data() + (256 - base % 256) % 256;
    int checked = 0;
    for (int fill = 0; fill < 3; ++fill) {
        for (uint64_t seed = 1; seed <= 4; ++seed) {
            std::mt19937_64 rng(seed * 31 + fill);
            if (fill == 0 && format.random_blocks != nullptr) {
                const float scales[] = {1.0f, 0.02f, 3e-6f, 250.0f};
                format.random_blocks(row, kBlocks, seed, scales[seed % 4]);
            } else if (fill == 1 && format.quantize_row != nullptr) {
                std::normal_distribution<float> normal(0.0f, 1.0f);
                std::vector<float> x(n);
                for (float& v : x) v = normal(rng);
                format.quantize_row(x.data(), row, n);
            } else {
                for (size_t i = 0; i < row_bytes(format, n); ++i)
                    row[i] = static_cast<uint8_t>(rng());
            }
            for (int b = 0; b < kBlocks; ++b) {
                const uint8_t* block = row + static_cast<size_t>(b) * view.bytes;
                IntChunk first{};
                for (int c = 0; c < view.values / 8; ++c) {
                    const IntChunk ic = view.chunk(block, c, tables);
                    float want[8];
                    view.chunk8(block, c, want, tables);
                    for (int i = 0; i < 8; ++i) {
                        const float got = block_detail::add_rn(
                            block_detail::mul_rn(ic.scale, static_cast<float>(ic.code(i))), ic.min);
                        ASSERT_TRUE(same(got, want[i]))
                            << format.name << " fill " << fill << " seed " << seed << " block " << b
                            << " chunk " << c << " value " << i << ": " << got << " (code "
                            << ic.code(i) << ", scale " << ic.scale << ", min " << ic.min << ") vs "
                            << want[i];
                    }
                    if (!view.has_min) {
                        ASSERT_EQ(ic.min, 0.0f) << format.name;
                    }
                    // The chunks of a group share scale and min.
                    if (c % (view.group / 8) == 0) {
                        first = ic;
                    } else {
                        ASSERT_TRUE(same_bits(ic.scale, first.scale) &&
                                    same_bits(ic.min, first.min))
                            << format.name << " chunk " << c << " of a group of " << view.group;
                    }
                    ++checked;
                }
            }
        }
    }
    EXPECT_EQ(checked, 3 * 4 * kBlocks * (view.values / 8));
}

// The integer kernels' conversion of group sums (below 2^19 in magnitude): the float
// static_cast gives, for every integer of magnitude below 2^22 (where the trick holds).
TEST(SmallIntToFloat, IsTheConversionForEveryIntegerBelowTwoToThe22) {
    constexpr int kLimit = 1 << 22;
    int64_t mismatches = 0;
    for (int i = -kLimit + 1; i < kLimit; ++i) {
        const float a = block_detail::small_int_to_float(i), b = static_cast<float>(i);
        if (std::memcmp(&a, &b, sizeof a) != 0) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0);
    // Past the range the bits run into the exponent: the trick must not be used there.
    EXPECT_NE(block_detail::small_int_to_float(kLimit + 1), static_cast<float>(kLimit + 1));
}

// The 4-bit level tables' lookup of four codes at once (two byte permutes and a select): each
// byte the table's entry for its code, for every combination of four codes, in both tables; and
// the permute itself as the device's prmt defines it (selector nibbles' low three bits, bytes of
// x then y).
TEST(Table16, FourCodesAtOnceAreTheEntries) {
    EXPECT_EQ(block_detail::byte_perm(0x03020100u, 0x07060504u, 0x7531u), 0x07050301u);
    EXPECT_EQ(block_detail::byte_perm(0x03020100u, 0x07060504u, 0xffff8888u), 0x00000000u);
    for (const block_detail::Table16& table :
         {block_detail::iq4nl_levels(), block_detail::e2m1_doubled_levels()}) {
        int64_t mismatches = 0;
        for (uint32_t c = 0; c < (1u << 16); ++c) {
            const uint32_t codes =
                (c & 15) | ((c >> 4) & 15) << 8 | ((c >> 8) & 15) << 16 | ((c >> 12) & 15) << 24;
            const uint32_t got = table.lookup4(codes);
            for (int n = 0; n < 4; ++n) {
                const int want = table[(codes >> (8 * n)) & 15];
                if (static_cast<int8_t>((got >> (8 * n)) & 0xff) != want) ++mismatches;
            }
        }
        EXPECT_EQ(mismatches, 0);
    }
    EXPECT_EQ(block_detail::iq4nl_level(0), -127);
    EXPECT_EQ(block_detail::iq4nl_level(15), 113);
    EXPECT_EQ(block_detail::e2m1_doubled(7), 12);
    EXPECT_EQ(block_detail::e2m1_doubled(15), -12);
}

INSTANTIATE_TEST_SUITE_P(IntFormats, BlockIntChunks, ::testing::ValuesIn(int_formats()),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                             return std::string(format_of(info.param).name);
                         });

}  // namespace
}  // namespace tandem::gpu
