// Chunk decoders of the i-quants: the lattice formats iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq1_s, iq1_m and the non-linear iq4_nl, iq4_xs (layouts and float order:
// formats/quants_iq.cpp). In the 256-value formats chunk c is group c of 8 values, the unit of
// their grid indices and sign bytes; sub-block c / 4 holds its scale.
#pragma once

#include "cuda/block_dequant_common.h"

namespace tandem::gpu {
namespace block_detail {

// iq2/iq3 values: db * (sign * grid), where bit i of `signs` negates value i. The grid
// magnitudes are never 0, so this equals formats' db * (float(q) + 0).
TANDEM_HD void signed_grid8(Bytes8 grid, uint32_t signs, float db, float out[8]) {
    TANDEM_UNROLL
    for (int i = 0; i < 8; ++i) {
        const int g = static_cast<int>(grid.byte(i));
        out[i] = mul_rn(db, static_cast<float>((signs >> i) & 1 ? -g : g));
    }
}
// An iq2 grid point (8 bytes, 8-aligned in the table).
TANDEM_HD Bytes8 iq2_point(const uint8_t* grid, uint32_t index) {
    return load8<8>(grid + 8 * index);
}
// ggml's iq2/iq3_xxs sub-block scale: (d * (0.5 + s)) * step.
TANDEM_HD float half_step_scale(float d, uint32_t s, float step) {
    return mul_rn(mul_rn(d, add_rn(0.5f, static_cast<float>(s))), step);
}
// iq1 values: db * (grid + delta), grid read from the eighths table (byte = 8 * (value + 1)).
TANDEM_HD void iq1_grid8(const uint8_t* grid, uint32_t index, float delta, float db, float out[8]) {
    const Bytes8 g = load8<8>(grid + 8 * index);
    TANDEM_UNROLL
    for (int i = 0; i < 8; ++i) {
        const int q = static_cast<int>(g.byte(i) >> 3) - 1;
        out[i] = mul_rn(db, add_rn(static_cast<float>(q), delta));
    }
}

}  // namespace block_detail

// iq2_xxs, 66 bytes (2-aligned): d fp16 @0, qs[64] @2. Sub-block b: bytes 8b..8b+3 of qs = grid
// indices of groups 0-3; bytes 8b+4..8b+7 a little-endian word: bits 7l..7l+6 = sign index of
// group l, bits 28-31 = s. x = ((d * (0.5 + s)) * 0.25) * grid * sign. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kIQ2_XXS> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 66;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& tables) {
        using namespace block_detail;
        const uint8_t* sub = block + 2 + 8 * (chunk >> 2);
        const uint32_t aux = load4<2>(sub + 4);
        const float db = half_step_scale(half_to_float(load_u16(block)), aux >> 28, 0.25f);
        signed_grid8(iq2_point(tables.iq2xxs_grid, sub[chunk & 3]),
                     iq_signs(aux >> (7 * (chunk & 3))), db, out);
    }
};

// iq2_xs, 74 bytes (2-aligned): d fp16 @0, qs[32] uint16 @2 (bits 0-8 grid index, 9-15 sign
// index of group c), scales[8] @66 (sub-block b: low nibble = s of groups 0-1, high = 2-3).
// x = ((d * (0.5 + s)) * 0.25) * grid * sign. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kIQ2_XS> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 74;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& tables) {
        using namespace block_detail;
        const uint32_t word = load_u16(block + 2 + 2 * chunk);
        const uint32_t s = (block[66 + (chunk >> 2)] >> (4 * ((chunk >> 1) & 1))) & 15;
        const float db = half_step_scale(half_to_float(load_u16(block)), s, 0.25f);
        signed_grid8(iq2_point(tables.iq2xs_grid, word & 511), iq_signs(word >> 9), db, out);
    }
};

// iq2_s, 82 bytes (2-aligned): d fp16 @0, qs[32] @2 (low 8 bits of group c's index),
// signs[32] @34 (sign byte of group c), qh[8] @66 (bits 2l..2l+1 of qh[b] = index bits 8-9 of
// group l of sub-block b), scales[8] @74 (as iq2_xs). Byte loads.
template <>
struct BlockFormat<GgmlType::kIQ2_S> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 82;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& tables) {
        using namespace block_detail;
        const uint32_t index =
            block[2 + chunk] | ((block[66 + (chunk >> 2)] >> (2 * (chunk & 3))) & 3) << 8;
        const uint32_t s = (block[74 + (chunk >> 2)] >> (4 * ((chunk >> 1) & 1))) & 15;
        const float db = half_step_scale(half_to_float(load_u16(block)), s, 0.25f);
        signed_grid8(iq2_point(tables.iq2s_grid, index), block[34 + chunk], db, out);
    }
};

// iq3_xxs, 98 bytes (2-aligned): d fp16 @0, qs[64] @2 (grid index of each 4 values: group c
// uses qs[2c], qs[2c + 1]), aux[32] @66 (sub-block b: a little-endian word, bits 7l..7l+6 =
// sign index of group l, bits 28-31 = s). x = ((d * (0.5 + s)) * 0.5) * grid * sign.
// 2-byte loads.
template <>
struct BlockFormat<GgmlType::kIQ3_XXS> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 98;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& tables) {
        using namespace block_detail;
        const uint32_t points = load_u16(block + 2 + 2 * chunk);
        const uint32_t aux = load4<2>(block + 66 + 4 * (chunk >> 2));
        const float db = half_step_scale(half_to_float(load_u16(block)), aux >> 28, 0.5f);
        const Bytes8 grid = {load_u32(tables.iq3xxs_grid + 4 * (points & 255)),
                             load_u32(tables.iq3xxs_grid + 4 * (points >> 8))};
        signed_grid8(grid, iq_signs(aux >> (7 * (chunk & 3))), db, out);
    }
};

// iq3_s, 110 bytes (2-aligned): d fp16 @0, qs[64] @2 (low 8 bits of each point's index: group
// c uses qs[2c], qs[2c + 1]), qh[8] @66 (bit k of qh[b] = bit 8 of point k of sub-block b),
// signs[32] @74, scales[4] @106 (s of sub-block b = nibble b % 2 of scales[b / 2]).
// x = (d * (2s + 1)) * grid * sign. 2-byte loads.
template <>
struct BlockFormat<GgmlType::kIQ3_S> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 110;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& tables) {
        using namespace block_detail;
        const int b = chunk >> 2;
        const uint32_t points = load_u16(block + 2 + 2 * chunk);
        const uint32_t high = block[66 + b] >> (2 * (chunk & 3));
        const uint32_t s = (block[106 + (b >> 1)] >> (4 * (b & 1))) & 15;
        const float db = mul_rn(half_to_float(load_u16(block)), static_cast<float>(2 * s + 1));
        const Bytes8 grid = {load_u32(tables.iq3s_grid + 4 * ((points & 255) | (high & 1) << 8)),
                             load_u32(tables.iq3s_grid + 4 * ((points >> 8) | (high & 2) << 7))};
        signed_grid8(grid, block[74 + chunk], db, out);
    }
};

// iq1_s, 50 bytes (2-aligned): d fp16 @0, qs[32] @2 (low 8 bits of group c's index), qh[8]
// uint16 @34 (sub-block b: bits 3l..3l+2 = index bits 8-10 of group l, bits 12-14 = s, bit 15
// set -> delta = -1/8, else +1/8). x = (d * (2s + 1)) * (grid + delta). 2-byte loads.
template <>
struct BlockFormat<GgmlType::kIQ1_S> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 50;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& tables) {
        using namespace block_detail;
        const uint32_t qh = load_u16(block + 34 + 2 * (chunk >> 2));
        const uint32_t index = block[2 + chunk] | ((qh >> (3 * (chunk & 3))) & 7) << 8;
        const float db =
            mul_rn(half_to_float(load_u16(block)), static_cast<float>(2 * ((qh >> 12) & 7) + 1));
        iq1_grid8(tables.iq1s_grid, index, qh & 0x8000 ? -0.125f : 0.125f, db, out);
    }
};

// iq1_m, 56 bytes (8-aligned): qs[32] @0 (low 8 bits of group c's index), qh[16] @32 (group c:
// nibble c % 2 of qh[c / 2], bits 0-2 = index bits 8-10, bit 3 set -> delta = -1/8), scales[8]
// @48 = four little-endian words w: sub-block b's s for groups 0-1 at bits 6 (b % 2).. of
// w[b / 2], for groups 2-3 three bits higher; the fp16 d is the top nibbles of w[0..3] (w[0]
// lowest). x = (d * (2s + 1)) * (grid + delta). 8-byte load of the scales.
template <>
struct BlockFormat<GgmlType::kIQ1_M> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 56;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& tables) {
        using namespace block_detail;
        const Bytes8 w = load8<8>(block + 48);  // w[0] | w[1] << 16, w[2] | w[3] << 16
        const uint32_t d_bits = ((w.lo >> 12) & 0x000f) | ((w.lo >> 24) & 0x00f0) |
                                ((w.hi >> 4) & 0x0f00) | ((w.hi >> 16) & 0xf000);
        const int shift = 16 * ((chunk >> 3) & 1) + 6 * ((chunk >> 2) & 1) + 3 * ((chunk >> 1) & 1);
        const uint32_t s = ((chunk >> 4 ? w.hi : w.lo) >> shift) & 7;
        const uint32_t nib = block[32 + (chunk >> 1)] >> (4 * (chunk & 1));
        const uint32_t index = block[chunk] | (nib & 7) << 8;
        const float db = mul_rn(half_to_float(d_bits), static_cast<float>(2 * s + 1));
        iq1_grid8(tables.iq1s_grid, index, nib & 8 ? -0.125f : 0.125f, db, out);
    }
};

// iq4_nl, 18 bytes (2-aligned): d fp16 @0, qs[16] @2 packed as q4_0; x = d * kIq4nlValues[q].
// 2-byte loads.
template <>
struct BlockFormat<GgmlType::kIQ4_NL> {
    static constexpr int kValues = 32;
    static constexpr int kBytes = 18;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const float d = half_to_float(load_u16(block));
        const Bytes8 q = load8<2>(block + 2 + 8 * (chunk & 1)).field(4 * (chunk >> 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = mul_rn(d, static_cast<float>(iq4nl_level(q.byte(i))));
    }
};

// iq4_xs, 136 bytes (8-aligned): d fp16 @0, scales_h uint16 @2 (bits 2b..2b+1 = bits 4-5 of
// sub-block b's ls), scales_l[4] @4 (nibble b % 2 of scales_l[b / 2] = bits 0-3), qs[128] @8
// (sub-block b: qs[16b..16b+15] packed as iq4_nl). x = (d * (ls - 32)) * kIq4nlValues[q].
// 8-byte loads.
template <>
struct BlockFormat<GgmlType::kIQ4_XS> {
    static constexpr int kValues = 256;
    static constexpr int kBytes = 136;
    TANDEM_HD static void chunk8(const uint8_t* block, int chunk, float out[8],
                                 const DequantTables& /*tables*/) {
        using namespace block_detail;
        const int b = chunk >> 2;
        const Bytes8 head = load8<8>(block);  // d | scales_h << 16, scales_l
        const uint32_t ls = ((head.hi >> (4 * b)) & 15) | ((head.lo >> (16 + 2 * b)) & 3) << 4;
        const float dl =
            mul_rn(half_to_float(head.lo & 0xffff), static_cast<float>(static_cast<int>(ls) - 32));
        const Bytes8 q =
            load8<8>(block + 8 + 16 * b + 8 * (chunk & 1)).field(4 * ((chunk >> 1) & 1), 15);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) out[i] = mul_rn(dl, static_cast<float>(iq4nl_level(q.byte(i))));
    }
};

}  // namespace tandem::gpu
