// Chunk decoders of the ternary (tq1_0, tq2_0), 1- and 2-bit (q1_0, q2_0) and 4-bit float
// (mxfp4, nvfp4) formats (layouts and float order: formats/quants_lowbit.cpp).
#pragma once

#include "cuda/block_dequant_common.h"

namespace tandem::gpu {

// tq1_0, 54 bytes (2-aligned): qs[48] @0, qh[4] @48, d fp16 @52; x = (t - 1) * d. Five trits
// share a byte; trit k of byte B is (uint8(B * 3^k) * 3) >> 8. Values 0..159: trit v / 32 of
// qs[v % 32]; 160..239: trit (v - 160) / 16 of qs[32 + (v - 160) % 16]; 240..255: trit
// (v - 240) / 4 of qh[(v - 240) % 4]. So chunks 0..29 read 8 bytes at one power of 3, chunks 30
// and 31 the 4 bytes of qh at two powers. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kTQ1_0> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 54;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block + 52));
        Bytes8 bytes;
        uint32_t k_lo, k_hi;  // the trit of bytes 0-3 and of bytes 4-7
        if (chunk < 20) {
            bytes = load8<2>(block + 8 * (chunk & 3));
            k_lo = k_hi = chunk >> 2;
        } else if (chunk < 30) {
            bytes = load8<2>(block + 32 + 8 * ((chunk - 20) & 1));
            k_lo = k_hi = (chunk - 20) >> 1;
        } else {
            const uint32_t qh = load4<2>(block + 48);
            bytes = {qh, qh};
            k_lo = 2 * (chunk - 30);
            k_hi = k_lo + 1;
        }
        // 3^k for k = 0..4, from the bytes of a constant.
        const uint32_t pow_lo = k_lo < 4 ? (0x1b090301u >> (8 * k_lo)) & 0xff : 81;
        const uint32_t pow_hi = k_hi < 4 ? (0x1b090301u >> (8 * k_hi)) & 0xff : 81;
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {
            const uint32_t q = (bytes.byte(i) * (i < 4 ? pow_lo : pow_hi)) & 0xff;
            const int trit = static_cast<int>((q * 3) >> 8);
            out[i] = mul_rn(static_cast<float>(trit - 1), d);
        }
    }
};

// tq2_0, 66 bytes (2-aligned): qs[64] @0, d fp16 @64; x = (q - 1) * d, value
// v = 128 n + 32 k + m is bits 2k..2k+1 of qs[32 n + m]. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kTQ2_0> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 66;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block + 64));
        const Bytes8 q =
            load8<2>(block + 32 * (chunk >> 4) + 8 * (chunk & 3)).field(2 * ((chunk >> 2) & 3), 3);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i)
            out[i] = mul_rn(static_cast<float>(static_cast<int>(q.byte(i)) - 1), d);
    }
};

// q1_0, 18 bytes (2-aligned), 128 values: d fp16 @0, qs[16] @2; value j = bit j % 8 of
// qs[j / 8] ? d : -d. Byte loads.
template <>
struct BlockFormat<GgmlType::kQ1_0> {
    static constexpr int kValues = 128;
    static constexpr int kBytes = 18;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block));
        const uint32_t bits = block[2 + chunk];
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = (bits >> i) & 1 ? d : -d;
    }
};

// q2_0, 18 bytes (2-aligned), 64 values: d fp16 @0, qs[16] @2; x = (q - 1) * d, value j is bits
// 2 (j % 4).. of qs[j / 4]: chunk c is the little-endian uint16 at qs[2c]. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kQ2_0> {
    static constexpr int kValues = 64;
    static constexpr int kBytes = 18;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block));
        const uint32_t q = load_u16(block + 2 + 2 * chunk);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {
            out[i] = mul_rn(static_cast<float>(static_cast<int>((q >> (2 * i)) & 3) - 1), d);
        }
    }
};

// mxfp4, 17 bytes (byte-aligned): e E8M0 @0, qs[16] @1 packed as q4_0 (value j: low nibble of
// qs[j], j < 16, else high nibble of qs[j - 16]); x = kE2m1DoubledValues[code] * (2^(e-127) / 2).
// Byte loads.
template <>
struct BlockFormat<GgmlType::kMXFP4> {
    static constexpr int kValues = 32;
    static constexpr int kBytes = 17;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = e8m0_half_to_float(block[0]);
        const Bytes8 q = load8<1>(block + 1 + 8 * (chunk & 1)).field(4 * (chunk >> 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = mul_rn(static_cast<float>(e2m1_doubled(q.byte(i))), d);
    }
};

// nvfp4, 36 bytes (4-aligned), 64 values in sub-blocks of 16: d[4] UE4M3 @0, qs[32] @4
// (sub-block s: low nibble of qs[8s + j] = value 16s + j, high nibble = value 16s + j + 8);
// x = kE2m1DoubledValues[code] * (UE4M3(d[s]) / 2). Chunk c: sub-block c / 2, nibble c % 2.
// 4-byte loads.
template <>
struct BlockFormat<GgmlType::kNVFP4> {
    static constexpr int kValues = 64;
    static constexpr int kBytes = 36;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = ue4m3_half_to_float(block[chunk >> 1]);
        const Bytes8 q = load8<4>(block + 4 + 8 * (chunk >> 1)).field(4 * (chunk & 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = mul_rn(static_cast<float>(e2m1_doubled(q.byte(i))), d);
    }
};

}  // namespace tandem::gpu
