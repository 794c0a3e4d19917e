// Chunk decoders of the 32-value formats q4_0, q4_1, q5_0, q5_1 and q8_0 (layouts and float
// order: formats/quants_legacy.cpp). A block has 4 chunks; chunk c is values 8c..8c+7.
#pragma once

#include "cuda/block_dequant_common.h"

namespace tandem::gpu {

// q4_0, 18 bytes (blocks 2-aligned): d fp16 @0, qs[16] @2; x = (q - 8) * d, value j is the low
// nibble of qs[j] (j < 16) or the high nibble of qs[j - 16]. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kQ4_0> {
    static constexpr int kValues = 32;
    static constexpr int kBytes = 18;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block));
        const Bytes8 q = load8<2>(block + 2 + 8 * (chunk & 1)).field(4 * (chunk >> 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i)
            out[i] = mul_rn(static_cast<float>(static_cast<int>(q.byte(i)) - 8), d);
    }
};

// q4_1, 20 bytes (4-aligned): d, m fp16 @0, @2; qs[16] @4 as in q4_0; x = q * d + m.
// 4-byte loads.
template <>
struct BlockFormat<GgmlType::kQ4_1> {
    static constexpr int kValues = 32;
    static constexpr int kBytes = 20;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const uint32_t dm = load_u32(block);
        const float d = half_to_float(dm & 0xffff), m = half_to_float(dm >> 16);
        const Bytes8 q = load8<4>(block + 4 + 8 * (chunk & 1)).field(4 * (chunk >> 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = add_rn(mul_rn(static_cast<float>(q.byte(i)), d), m);
    }
};

// q5_0, 22 bytes (2-aligned): d fp16 @0, qh[4] @2, qs[16] @6; x = (q - 16) * d, bit 4 of
// value j's q is bit j of the little-endian qh, i.e. bit j % 8 of qh[j / 8]: chunk c's high bits
// are the byte qh[c]. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kQ5_0> {
    static constexpr int kValues = 32;
    static constexpr int kBytes = 22;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block));
        const uint32_t qh = block[2 + chunk];
        const Bytes8 q = load8<2>(block + 6 + 8 * (chunk & 1)).field(4 * (chunk >> 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const int code = static_cast<int>(q.byte(i) | ((qh >> i) & 1) << 4);
            out[i] = mul_rn(static_cast<float>(code - 16), d);
        }
    }
};

// q5_1, 24 bytes (8-aligned): d, m fp16 @0, @2, qh[4] @4, qs[16] @8; x = q * d + m, q as in
// q5_0. 8-byte loads.
template <>
struct BlockFormat<GgmlType::kQ5_1> {
    static constexpr int kValues = 32;
    static constexpr int kBytes = 24;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const Bytes8 head = load8<8>(block);
        const float d = half_to_float(head.lo & 0xffff), m = half_to_float(head.lo >> 16);
        const uint32_t qh = head.hi >> (8 * chunk);
        const Bytes8 q = load8<8>(block + 8 + 8 * (chunk & 1)).field(4 * (chunk >> 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t code = q.byte(i) | ((qh >> i) & 1) << 4;
            out[i] = add_rn(mul_rn(static_cast<float>(code), d), m);
        }
    }
};

// q8_0, 34 bytes (2-aligned): d fp16 @0, qs[32] int8 @2; x = q * d. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kQ8_0> {
    static constexpr int kValues = 32;
    static constexpr int kBytes = 34;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block));
        const Bytes8 q = load8<2>(block + 2 + 8 * chunk);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i)
            out[i] = mul_rn(static_cast<float>(static_cast<int8_t>(q.byte(i))), d);
    }
};

}  // namespace tandem::gpu
