// Chunk decoders of the 256-value k-quants q2_K, q3_K, q4_K, q5_K and q6_K (layouts and float
// order: formats/quants_k.cpp). A block has 32 chunks; chunk c is values 8c..8c+7, so a chunk
// never straddles a sub-block of 16 or 32 values and decodes one scale (and min).
#pragma once

#include "cuda/block_dequant_common.h"

namespace tandem::gpu {

// q2_K, 84 bytes (4-aligned): scales[16] @0, qs[64] @16, d @80, dmin @82 (fp16).
// x = (d * sc) * q - dmin * m with scales[v / 16] = sc | m << 4; value v = 128 n + 32 j + l is
// bits 2j..2j+1 of qs[32 n + l]: chunk c reads qs[32 (c / 16) + 8 (c % 4) ..] at shift
// 2 ((c / 4) % 4). 4-byte loads.
template <>
struct BlockFormat<GgmlType::kQ2_K> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 84;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const uint32_t dd = load_u32(block + 80);
        const uint32_t sc = block[chunk >> 1];
        const float dl = mul_rn(half_to_float(dd & 0xffff), static_cast<float>(sc & 15));
        const float ml = mul_rn(half_to_float(dd >> 16), static_cast<float>(sc >> 4));
        const Bytes8 q = load8<4>(block + 16 + 32 * (chunk >> 4) + 8 * (chunk & 3))
                             .field(2 * ((chunk >> 2) & 3), 3);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = sub_rn(mul_rn(dl, static_cast<float>(q.byte(i))), ml);
    }
};

// q3_K, 110 bytes (2-aligned): hmask[32] @0, qs[64] @32, scales[12] @96, d fp16 @108.
// x = (d * (sc - 32)) * q, q = low 2 bits (placed as q2_K's) - (hmask bit ? 0 : 4); value
// v = 128 n + 32 j + l has hmask bit 4n + j = c / 4 of hmask[l]. Sub-block k's 6-bit sc: low
// 4 bits = nibble k / 8 of scales[k % 8], high 2 bits = bits 2 (k / 4).. of scales[8 + k % 4].
// 2-byte loads.
template <>
struct BlockFormat<GgmlType::kQ3_K> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 110;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const int k = chunk >> 1;
        const uint32_t low = (block[96 + (k & 7)] >> (4 * (k >> 3))) & 15;
        const uint32_t high = (block[104 + (k & 3)] >> (2 * (k >> 2))) & 3;
        const int sc = static_cast<int>(low | high << 4) - 32;
        const float dl = mul_rn(half_to_float(load_u16(block + 108)), static_cast<float>(sc));
        const int l0 = 8 * (chunk & 3);
        const Bytes8 hm = load8<2>(block + l0).field(chunk >> 2, 1);
        const Bytes8 q =
            load8<2>(block + 32 + 32 * (chunk >> 4) + l0).field(2 * ((chunk >> 2) & 3), 3);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const int code = static_cast<int>(q.byte(i)) - (hm.byte(i) != 0 ? 0 : 4);
            out[i] = mul_rn(dl, static_cast<float>(code));
        }
    }
};

namespace block_detail {

// The 6-bit scale and min of sub-block k (of 32 values) of q4_K / q5_K from scales[12]:
// k < 4: sc = scales[k] & 63, m = scales[k + 4] & 63; k >= 4: the low 4 bits from the nibbles
// of scales[k + 4], the high 2 from the top bits of scales[k - 4] (sc) and scales[k] (m).
TANDEM_HD void k4_scale_min(const uint8_t* scales, int k, float* sc, float* m) {
    const uint32_t a = scales[k & 3], b = scales[(k & 3) + 4];
    uint32_t s, n;
    if (k < 4) {
        s = a & 63;
        n = b & 63;
    } else {
        const uint32_t e = scales[(k & 3) + 8];
        s = (e & 15) | (a >> 6) << 4;
        n = (e >> 4) | (b >> 6) << 4;
    }
    *sc = static_cast<float>(s);
    *m = static_cast<float>(n);
}

}  // namespace block_detail

// q4_K, 144 bytes (16-aligned): d, dmin fp16 @0, @2, scales[12] @4, qs[128] @16.
// x = (d * sc) * q - dmin * m per sub-block of 32 (k4_scale_min); value v = 64 c + 32 h + l is
// nibble h of qs[32 c + l]: chunk c reads qs[32 (c / 8) + 8 (c % 4) ..], nibble (c / 4) % 2.
// 4-byte load of d and dmin, 8-byte loads of qs.
template <>
struct BlockFormat<GgmlType::kQ4_K> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 144;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const uint32_t dd = load_u32(block);
        float sc, m;
        k4_scale_min(block + 4, chunk >> 2, &sc, &m);
        const float dl = mul_rn(half_to_float(dd & 0xffff), sc);
        const float ml = mul_rn(half_to_float(dd >> 16), m);
        const Bytes8 q = load8<8>(block + 16 + 32 * (chunk >> 3) + 8 * (chunk & 3))
                             .field(4 * ((chunk >> 2) & 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = sub_rn(mul_rn(dl, static_cast<float>(q.byte(i))), ml);
    }
};

// q5_K, 176 bytes (16-aligned): d, dmin @0, @2, scales[12] @4, qh[32] @16, qs[128] @48.
// As q4_K with q in 0..31: bit 4 of value v = 64 c + 32 h + l is bit 2c + h (= chunk / 4) of
// qh[l]. 8-byte loads.
template <>
struct BlockFormat<GgmlType::kQ5_K> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 176;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const uint32_t dd = load_u32(block);
        float sc, m;
        k4_scale_min(block + 4, chunk >> 2, &sc, &m);
        const float dl = mul_rn(half_to_float(dd & 0xffff), sc);
        const float ml = mul_rn(half_to_float(dd >> 16), m);
        const Bytes8 qh = load8<8>(block + 16 + 8 * (chunk & 3)).field(chunk >> 2, 1);
        const Bytes8 q = load8<8>(block + 48 + 32 * (chunk >> 3) + 8 * (chunk & 3))
                             .field(4 * ((chunk >> 2) & 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t code = q.byte(i) | qh.byte(i) << 4;
            out[i] = sub_rn(mul_rn(dl, static_cast<float>(code)), ml);
        }
    }
};

// q6_K, 210 bytes (2-aligned): ql[128] @0, qh[64] @128, scales[16] int8 @192, d fp16 @208.
// x = (d * sc) * (q - 32); value v = 128 n + 32 g + l: low 4 bits = nibble g / 2 of
// ql[64 n + 32 (g % 2) + l], high 2 bits = bits 2g..2g+1 of qh[32 n + l]. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kQ6_K> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 210;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const int n = chunk >> 4, g = (chunk >> 2) & 3, l0 = 8 * (chunk & 3);
        const float d = half_to_float(load_u16(block + 208));
        const float dl =
            mul_rn(d, static_cast<float>(static_cast<int8_t>(block[192 + (chunk >> 1)])));
        const Bytes8 ql = load8<2>(block + 64 * n + 32 * (g & 1) + l0).field(4 * (g >> 1), 15);
        const Bytes8 qh = load8<2>(block + 128 + 32 * n + l0).field(2 * g, 3);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const int code = static_cast<int>(ql.byte(i) | qh.byte(i) << 4) - 32;
            out[i] = mul_rn(dl, static_cast<float>(code));
        }
    }
};

}  // namespace tandem::gpu
