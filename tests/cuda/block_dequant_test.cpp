// The GPU block decoders of cuda/block_dequant.h, compiled for the host, against the reference
// dequantizers of formats/: bit for bit, for every weight format, on valid and adversarial
// blocks; also that they load only what the block alignment allows.
//
// Suggested CMake (the lead's test_cuda): a host executable of tests/cuda/*.cpp linked with
// tandem_formats and GTest::gtest_main, compiled with -ffp-contract=off.
#define TANDEM_BLOCK_DEQUANT_CHECK_ALIGNMENT
#include "cuda/block_dequant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "formats/float16.h"
#include "formats/format_table.h"
#include "formats/iq_tables.h"

namespace tandem::gpu {
namespace {

// n bytes at a 256-aligned address, as the lead's uploads are.
class AlignedBytes {
  public:
    explicit AlignedBytes(size_t n) : storage_(n + 256) {}
    uint8_t* get() {
        const auto address = reinterpret_cast<uintptr_t>(storage_.data());
        return storage_.data() + (256 - address % 256) % 256;
    }

  private:
    std::vector<uint8_t> storage_;
};

int values_per_block(GgmlType type) {
    int values = 0;
    for_each_weight_format([&](auto tag) {
        if (tag.kType == type) values = decltype(tag)::Format::kValues;
    });
    return values;
}
int bytes_per_block(GgmlType type) {
    int bytes = 0;
    for_each_weight_format([&](auto tag) {
        if (tag.kType == type) bytes = decltype(tag)::Format::kBytes;
    });
    return bytes;
}

// chunk8 of one format by type.
void chunk8_of(GgmlType type, const uint8_t* block, int chunk, float* out,
               const DequantTables& tables) {
    for_each_weight_format([&](auto tag) {
        if (tag.kType == type) decltype(tag)::Format::chunk8(block, chunk, out, tables);
    });
}

// The first differing float bit pattern, or "".
std::string first_mismatch(const float* ours, const float* ref, int64_t n, int block_values) {
    for (int64_t i = 0; i < n; ++i) {
        if (std::memcmp(&ours[i], &ref[i], sizeof(float)) != 0) {
            uint32_t a, b;
            std::memcpy(&a, &ours[i], 4);
            std::memcpy(&b, &ref[i], 4);
            char note[160];
            std::snprintf(note, sizeof note,
                          "value %lld (block %lld, chunk %lld): ours %.9g (0x%08x), formats %.9g "
                          "(0x%08x)",
                          static_cast<long long>(i), static_cast<long long>(i / block_values),
                          static_cast<long long>(i % block_values / 8), ours[i], a, ref[i], b);
            return note;
        }
    }
    return "";
}

// What fills the blocks of a row.
enum class Fill { kValid, kQuantized, kZeros, kOnes, kRandomBytes };
const char* fill_name(Fill fill) {
    switch (fill) {
        case Fill::kValid:
            return "valid";
        case Fill::kQuantized:
            return "quantized";
        case Fill::kZeros:
            return "zeros";
        case Fill::kOnes:
            return "ones";
        case Fill::kRandomBytes:
            return "random bytes";
    }
    return "?";
}

// Random floats of mixed magnitudes; for the float formats also values past their ranges
// (f16 overflow and subnormals, exact zeros, negative zeros).
std::vector<float> random_floats(int64_t n, uint64_t seed, bool extremes) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-30, 20);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
        x[i] = normal(rng);
        if (extremes) {
            const int kind = static_cast<int>(rng() % 16);
            if (kind == 0) x[i] = std::ldexp(x[i], exponent(rng));
            if (kind == 1) x[i] = 0.0f;
            if (kind == 2) x[i] = -0.0f;
            if (kind == 3) x[i] = std::ldexp(x[i], -20);  // f16 subnormal range
        }
    }
    return x;
}

// Writes n values of `format` into dst according to `fill`; false where the format has no way
// to make them (no quantizer).
bool fill_row(const FormatTraits& format, Fill fill, uint64_t seed, int64_t n, uint8_t* dst) {
    const size_t bytes = row_bytes(format, n);
    const int64_t n_blocks = n / format.block_size;
    std::mt19937_64 rng(seed * 7919 + 17);
    switch (fill) {
        case Fill::kZeros:
            std::memset(dst, 0, bytes);
            return true;
        case Fill::kOnes:
            std::memset(dst, 0xff, bytes);
            return true;
        case Fill::kRandomBytes:
            for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<uint8_t>(rng());
            return true;
        case Fill::kValid:
            if (format.random_blocks != nullptr) {
                // A different block scale per seed, down to f16 subnormal scales.
                const float scales[] = {1.0f, 0.02f, 3e-6f, 250.0f, 1e-8f};
                format.random_blocks(dst, n_blocks, seed, scales[seed % 5]);
                return true;
            }
            [[fallthrough]];  // the float formats: their values are any floats
        case Fill::kQuantized: {
            const std::vector<float> x = random_floats(n, seed, format.kind == FormatKind::kFloat);
            if (format.type == GgmlType::kF64) {
                for (int64_t i = 0; i < n; ++i) {
                    const double v =
                        static_cast<double>(x[i]) * (1.0 + 1e-12 * static_cast<double>(i));
                    std::memcpy(dst + 8 * i, &v, 8);
                }
                return true;
            }
            if (format.quantize_row == nullptr) return false;
            format.quantize_row(x.data(), dst, n);
            return true;
        }
    }
    return false;
}

class BlockDequant : public ::testing::TestWithParam<GgmlType> {};

// Every row decoded through dequantize_row_by_chunks and through single chunk8 calls in a
// shuffled order equals formats' dequantize_row bit for bit; rows lie at multiples of the row
// size from a 256-aligned base, and no load is wider than the block alignment allows.
TEST_P(BlockDequant, BitIdenticalToFormats) {
    const GgmlType type = GetParam();
    const FormatTraits& format = format_of(type);
    const int values = values_per_block(type);
    const DequantTables tables = host_dequant_tables();
    constexpr int kRows = 3;
    constexpr int64_t kBlocksPerRow = 9;  // odd: the rows start at every block alignment
    const int64_t n = kBlocksPerRow * values;
    const size_t row_size = row_bytes(format, n);
    AlignedBytes buffer(kRows * row_size);

    int cases = 0;
    for (Fill fill :
         {Fill::kValid, Fill::kQuantized, Fill::kZeros, Fill::kOnes, Fill::kRandomBytes}) {
        const int seeds = fill == Fill::kZeros || fill == Fill::kOnes ? 1 : 5;
        for (uint64_t seed = 1; seed <= static_cast<uint64_t>(seeds); ++seed) {
            for (int r = 0; r < kRows; ++r) {
                uint8_t* row = buffer.get() + r * row_size;
                if (!fill_row(format, fill, 100 * seed + r, n, row)) continue;
                SCOPED_TRACE(std::string(fill_name(fill)) + ", seed " + std::to_string(seed) +
                             ", row " + std::to_string(r));
                ++cases;

                std::vector<float> ref(n), ours(n, -1.0f), shuffled(n, -1.0f);
                format.dequantize_row(row, ref.data(), n);

                block_detail::misaligned_loads = 0;
                ASSERT_TRUE(dequantize_row_by_chunks(type, row, ours.data(), n, tables));
                ASSERT_EQ(first_mismatch(ours.data(), ref.data(), n, values), "");

                std::vector<int64_t> chunks(n / 8);
                std::iota(chunks.begin(), chunks.end(), 0);
                std::shuffle(chunks.begin(), chunks.end(), std::mt19937_64(seed + 1000 * r));
                for (int64_t c : chunks) {
                    const int64_t block = c / (values / 8);
                    chunk8_of(type, row + block * bytes_per_block(type),
                              static_cast<int>(c % (values / 8)), shuffled.data() + 8 * c, tables);
                }
                ASSERT_EQ(first_mismatch(shuffled.data(), ref.data(), n, values), "");
                ASSERT_EQ(block_detail::misaligned_loads, 0)
                    << "loads wider than the block alignment "
                    << block_detail::block_alignment(bytes_per_block(type));
            }
        }
    }
    // valid or quantized (5 seeds x 3 rows at least once), zeros, ones, random bytes
    EXPECT_GE(cases, kRows * (5 + 1 + 1 + 5));
}

// The traits agree with the format table.
TEST_P(BlockDequant, TraitsMatchFormatTable) {
    const FormatTraits& format = format_of(GetParam());
    const int values = values_per_block(GetParam());
    const int bytes = bytes_per_block(GetParam());
    if (format.kind == FormatKind::kFloat) {
        EXPECT_EQ(format.block_size, 1);
        EXPECT_EQ(values, 8);
        EXPECT_EQ(static_cast<size_t>(bytes), 8 * format.block_bytes);
    } else {
        EXPECT_EQ(values, format.block_size);
        EXPECT_EQ(static_cast<size_t>(bytes), format.block_bytes);
    }
    EXPECT_EQ(values % 8, 0);
}

INSTANTIATE_TEST_SUITE_P(WeightFormats, BlockDequant, ::testing::ValuesIn(kGpuWeightFormats),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                             return std::string(format_of(info.param).name);
                         });

// kGpuWeightFormats is exactly the weight formats of the format table.
TEST(BlockDequantList, EveryWeightFormat) {
    std::set<uint32_t> table, ours;
    for (const FormatTraits& f : all_formats()) {
        if (f.kind == FormatKind::kFloat || f.kind == FormatKind::kQuantized) {
            table.insert(type_id(f.type));
        }
    }
    for (GgmlType t : kGpuWeightFormats) EXPECT_TRUE(ours.insert(type_id(t)).second);
    EXPECT_EQ(ours, table);
    EXPECT_TRUE(std::is_sorted(std::begin(kGpuWeightFormats), std::end(kGpuWeightFormats)));
}

TEST(BlockDequantList, RejectsOtherTypesAndPartialBlocks) {
    const DequantTables tables = host_dequant_tables();
    uint8_t row[1024] = {};
    float out[256];
    EXPECT_FALSE(dequantize_row_by_chunks(GgmlType::kQ8_K, row, out, 256, tables));
    EXPECT_FALSE(dequantize_row_by_chunks(GgmlType::kQ8_1, row, out, 32, tables));
    EXPECT_FALSE(dequantize_row_by_chunks(GgmlType::kI32, row, out, 8, tables));
    EXPECT_FALSE(dequantize_row_by_chunks(GgmlType::kQ4_0, row, out, 16, tables));
    EXPECT_FALSE(dequantize_row_by_chunks(GgmlType::kF16, row, out, 12, tables));
    EXPECT_TRUE(dequantize_row_by_chunks(GgmlType::kF16, row, out, 16, tables));
}

// The small decoders against float16.h and iq_tables.h, over every input.
TEST(BlockDequantHelpers, ScalarDecodersMatchFormats) {
    using namespace block_detail;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float a = half_to_float(h), b = fp16_to_f32(static_cast<uint16_t>(h));
        ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "half " << h;
        const float c = bf16_to_float(h), e = bf16_to_f32(static_cast<uint16_t>(h));
        ASSERT_EQ(std::memcmp(&c, &e, 4), 0) << "bf16 " << h;
    }
    for (uint32_t x = 0; x < 256; ++x) {
        const float a = e8m0_half_to_float(x), b = e8m0_to_f32_half(static_cast<uint8_t>(x));
        EXPECT_EQ(std::memcmp(&a, &b, 4), 0) << "e8m0 " << x;
        const float c = ue4m3_half_to_float(x), e = ue4m3_to_f32_half(static_cast<uint8_t>(x));
        EXPECT_EQ(std::memcmp(&c, &e, 4), 0) << "ue4m3 " << x;
    }
    for (uint32_t q = 0; q < 16; ++q) {
        EXPECT_EQ(iq4nl_level(q), kIq4nlValues[q]) << q;
        EXPECT_EQ(e2m1_doubled(q), kE2m1DoubledValues[q]) << q;
    }
    for (uint32_t s = 0; s < 1024; ++s) EXPECT_EQ(iq_signs(s), iq_sign_byte(s)) << s;
}

// A plain copy of every table part, as the device gets, decodes as the host tables do.
TEST(BlockDequantTables, PartsCopyToWorkingTables) {
    size_t total = 0;
    for (const DequantTablePart& part : dequant_table_parts()) total += (part.bytes + 7) / 8 * 8;
    AlignedBytes copy(total);
    DequantTables copied{};
    size_t offset = 0;
    for (const DequantTablePart& part : dequant_table_parts()) {
        ASSERT_NE(part.host, nullptr);
        std::memcpy(copy.get() + offset, part.host, part.bytes);
        copied.*part.member = copy.get() + offset;
        offset += (part.bytes + 7) / 8 * 8;
    }
    const DequantTables host = host_dequant_tables();
    for (const DequantTablePart& part : dequant_table_parts()) {
        EXPECT_EQ(host.*part.member, part.host);
        EXPECT_EQ(std::memcmp(copied.*part.member, host.*part.member, part.bytes), 0);
    }
    for (GgmlType type :
         {GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ2_S, GgmlType::kIQ3_XXS,
          GgmlType::kIQ3_S, GgmlType::kIQ1_S, GgmlType::kIQ1_M}) {
        const FormatTraits& format = format_of(type);
        const int64_t n = 4 * format.block_size;
        std::vector<uint8_t> row(row_bytes(format, n));
        format.random_blocks(row.data(), 4, 7, 1.0f);
        std::vector<float> ref(n), ours(n);
        format.dequantize_row(row.data(), ref.data(), n);
        ASSERT_TRUE(dequantize_row_by_chunks(type, row.data(), ours.data(), n, copied));
        EXPECT_EQ(first_mismatch(ours.data(), ref.data(), n, 256), "") << format.name;
    }
}

}  // namespace
}  // namespace tandem::gpu
