// Chunk decoders of the float formats f32, f16, bf16 and f64 (layouts: formats/quants_float.cpp).
// A "block" is 8 elements, so these rows must hold a multiple of 8 values; a block then starts
// at a multiple of its own size (32, 16, 16, 64 bytes), which the 16-byte loads below rely on.
#pragma once

#include "cuda/block_dequant_common.h"

namespace tandem::gpu {

// f32: 8 little-endian binary32, copied bit for bit.
template <>
struct BlockFormat<GgmlType::kF32> {
    static constexpr int kValues = 8;
    static constexpr int kBytes = 32;
    TANDEM_HD static void chunk8(const uint8_t* block, int /*chunk*/, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const Bytes16 w0 = load16<32>(block), w1 = load16<16>(block + 16);
        const uint32_t bits[8] = {w0.a.lo, w0.a.hi, w0.b.lo, w0.b.hi,
                                  w1.a.lo, w1.a.hi, w1.b.lo, w1.b.hi};
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = float_from_bits(bits[i]);
    }
};

// f16: 8 IEEE halves.
template <>
struct BlockFormat<GgmlType::kF16> {
    static constexpr int kValues = 8;
    static constexpr int kBytes = 16;
    TANDEM_HD static void chunk8(const uint8_t* block, int /*chunk*/, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const Bytes16 w = load16<16>(block);
        const uint32_t pairs[4] = {w.a.lo, w.a.hi, w.b.lo, w.b.hi};
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i)
            out[i] = half_to_float((pairs[i / 2] >> (16 * (i % 2))) & 0xffff);
    }
};

// bf16: 8 bfloat16, the top halves of binary32.
template <>
struct BlockFormat<GgmlType::kBF16> {
    static constexpr int kValues = 8;
    static constexpr int kBytes = 16;
    TANDEM_HD static void chunk8(const uint8_t* block, int /*chunk*/, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const Bytes16 w = load16<16>(block);
        const uint32_t pairs[4] = {w.a.lo, w.a.hi, w.b.lo, w.b.hi};
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i)
            out[i] = bf16_to_float((pairs[i / 2] >> (16 * (i % 2))) & 0xffff);
    }
};

// f64: 8 binary64, rounded to float to nearest even (as static_cast on the host).
template <>
struct BlockFormat<GgmlType::kF64> {
    static constexpr int kValues = 8;
    static constexpr int kBytes = 64;
    TANDEM_HD static void chunk8(const uint8_t* block, int /*chunk*/, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        TANDEM_UNROLL
        for (int i = 0; i < 4; ++i) {
            const Bytes16 w = load16<16>(block + 16 * i);
            out[2 * i] = static_cast<float>(double_from_bits(w.a.lo, w.a.hi));
            out[2 * i + 1] = static_cast<float>(double_from_bits(w.b.lo, w.b.hi));
        }
    }
};

}  // namespace tandem::gpu
