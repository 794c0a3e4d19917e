// The integer view of the weight formats whose values are small integers times a per-group
// scale (plus a per-group offset): chunk c of a block as eight signed 8-bit codes q with a scale
// and a min such that value i = scale · q[i] + min, rounded as BlockFormat<T>::chunk8 rounds it
// (mul_rn, then add_rn). The integer kernels (matmul_int_kernels.cuh) multiply these codes with
// the q8 codes of the activations in integer arithmetic — exact, as the CPU's dot products are —
// and apply the scales once per group of 8 (vector) or 16 (tensor-core tiles) values.
//
// Every format here has groups of at least 16 values that start at multiples of 16, so chunks
// 2h and 2h + 1 of a block always share their scale and min. Formats without an integer view
// (float formats, the 1-bit and ternary ones, the lattice formats other than iq2_xxs and
// iq3_xxs) keep the float kernels.
#pragma once

#include "cuda/block_dequant.h"

namespace tandem::gpu {

struct IntChunk {
    uint32_t lo = 0, hi = 0;  // q[0..3], q[4..7] as signed bytes, little-endian
    float scale = 0.0f;
    float min = 0.0f;  // 0 for the formats without a min

    TANDEM_HD int code(int i) const {
        return static_cast<int8_t>(((i < 4 ? lo : hi) >> (8 * (i & 3))) & 0xff);
    }
};

// BlockInt<T>::kDefined says whether format T has an integer view; kHasMin whether its chunks
// carry a min (the kernels then need the sum of the activations' codes); kGroup how many values
// (16 or 32, from a multiple of it) share a scale and min.
template <GgmlType T>
struct BlockInt {
    static constexpr bool kDefined = false;
};

namespace int_detail {

using namespace block_detail;

// Bytes b[i] in 0..255 minus v, as signed bytes (no borrow crosses a byte as long as every
// b[i] + 128 - v lies in 0..255).
TANDEM_HD Bytes8 minus(Bytes8 b, uint32_t v) {
    const uint32_t add = (128u - v) * 0x01010101u;
    return {(b.lo + add) ^ 0x80808080u, (b.hi + add) ^ 0x80808080u};
}

// Bit i of `bits` moved to bit `to` of byte i.
TANDEM_HD Bytes8 spread_bits(uint32_t bits, int to) {
    uint32_t lo = 0, hi = 0;
    TANDEM_UNROLL
    for (int i = 0; i < 4; ++i) {
        lo |= ((bits >> i) & 1u) << (8 * i + to);
        hi |= ((bits >> (i + 4)) & 1u) << (8 * i + to);
    }
    return {lo, hi};
}

TANDEM_HD Bytes8 bytes_or(Bytes8 a, Bytes8 b) {
    return {a.lo | b.lo, a.hi | b.hi};
}

// Codes (0..15) through a table of signed levels (iq4_nl, E2M1), four at a time.
TANDEM_HD Bytes8 levels(Bytes8 q, const Table16& table) {
    return {table.lookup4(q.lo), table.lookup4(q.hi)};
}

// Grid magnitudes (at most 62) with bit i of `signs` negating value i.
TANDEM_HD Bytes8 signed_grid(Bytes8 grid, uint32_t signs) {
    Bytes8 out{0, 0};
    TANDEM_UNROLL
    for (int i = 0; i < 8; ++i) {
        const int g = static_cast<int>(grid.byte(i));
        const uint32_t v = static_cast<uint32_t>((signs >> i) & 1 ? -g : g) & 0xff;
        if (i < 4) {
            out.lo |= v << (8 * i);
        } else {
            out.hi |= v << (8 * (i - 4));
        }
    }
    return out;
}

TANDEM_HD IntChunk chunk_of(Bytes8 q, float scale, float min = 0.0f) {
    return {q.lo, q.hi, scale, min};
}

}  // namespace int_detail

template <>
struct BlockInt<GgmlType::kQ4_0> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const Bytes8 q = load8<2>(block + 2 + 8 * (c & 1)).field(4 * (c >> 1), 15);
        return chunk_of(minus(q, 8), half_to_float(load_u16(block)));
    }
};

template <>
struct BlockInt<GgmlType::kQ4_1> {
    static constexpr bool kDefined = true, kHasMin = true;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const uint32_t dm = load_u32(block);
        const Bytes8 q = load8<4>(block + 4 + 8 * (c & 1)).field(4 * (c >> 1), 15);
        return chunk_of(q, half_to_float(dm & 0xffff), half_to_float(dm >> 16));
    }
};

template <>
struct BlockInt<GgmlType::kQ5_0> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const Bytes8 q = load8<2>(block + 6 + 8 * (c & 1)).field(4 * (c >> 1), 15);
        return chunk_of(minus(bytes_or(q, spread_bits(block[2 + c], 4)), 16),
                        half_to_float(load_u16(block)));
    }
};

template <>
struct BlockInt<GgmlType::kQ5_1> {
    static constexpr bool kDefined = true, kHasMin = true;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const Bytes8 head = load8<8>(block);
        const Bytes8 q = load8<8>(block + 8 + 8 * (c & 1)).field(4 * (c >> 1), 15);
        return chunk_of(bytes_or(q, spread_bits(head.hi >> (8 * c), 4)),
                        half_to_float(head.lo & 0xffff), half_to_float(head.lo >> 16));
    }
};

template <>
struct BlockInt<GgmlType::kQ8_0> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        return chunk_of(load8<2>(block + 2 + 8 * c), half_to_float(load_u16(block)));
    }
};

template <>
struct BlockInt<GgmlType::kQ2_K> {
    static constexpr bool kDefined = true, kHasMin = true;
    static constexpr int kGroup = 16;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const uint32_t dd = load_u32(block + 80);
        const uint32_t sc = block[c >> 1];
        const Bytes8 q =
            load8<4>(block + 16 + 32 * (c >> 4) + 8 * (c & 3)).field(2 * ((c >> 2) & 3), 3);
        return chunk_of(q, mul_rn(half_to_float(dd & 0xffff), static_cast<float>(sc & 15)),
                        -mul_rn(half_to_float(dd >> 16), static_cast<float>(sc >> 4)));
    }
};

template <>
struct BlockInt<GgmlType::kQ3_K> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 16;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const int k = c >> 1;
        const uint32_t low = (block[96 + (k & 7)] >> (4 * (k >> 3))) & 15;
        const uint32_t high = (block[104 + (k & 3)] >> (2 * (k >> 2))) & 3;
        const int sc = static_cast<int>(low | high << 4) - 32;
        const int l0 = 8 * (c & 3);
        const Bytes8 hm = load8<2>(block + l0).field(c >> 2, 1);
        const Bytes8 q = load8<2>(block + 32 + 32 * (c >> 4) + l0).field(2 * ((c >> 2) & 3), 3);
        // code = q - (hm ? 0 : 4) = (q | hm << 2) - 4
        const Bytes8 code = minus({q.lo | hm.lo << 2, q.hi | hm.hi << 2}, 4);
        return chunk_of(code, mul_rn(half_to_float(load_u16(block + 108)), static_cast<float>(sc)));
    }
};

template <>
struct BlockInt<GgmlType::kQ4_K> {
    static constexpr bool kDefined = true, kHasMin = true;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const uint32_t dd = load_u32(block);
        float sc, m;
        k4_scale_min(block + 4, c >> 2, &sc, &m);
        const Bytes8 q =
            load8<8>(block + 16 + 32 * (c >> 3) + 8 * (c & 3)).field(4 * ((c >> 2) & 1), 15);
        return chunk_of(q, mul_rn(half_to_float(dd & 0xffff), sc),
                        -mul_rn(half_to_float(dd >> 16), m));
    }
};

template <>
struct BlockInt<GgmlType::kQ5_K> {
    static constexpr bool kDefined = true, kHasMin = true;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const uint32_t dd = load_u32(block);
        float sc, m;
        k4_scale_min(block + 4, c >> 2, &sc, &m);
        const Bytes8 qh = load8<8>(block + 16 + 8 * (c & 3)).field(c >> 2, 1);
        const Bytes8 q =
            load8<8>(block + 48 + 32 * (c >> 3) + 8 * (c & 3)).field(4 * ((c >> 2) & 1), 15);
        return chunk_of({q.lo | qh.lo << 4, q.hi | qh.hi << 4},
                        mul_rn(half_to_float(dd & 0xffff), sc),
                        -mul_rn(half_to_float(dd >> 16), m));
    }
};

template <>
struct BlockInt<GgmlType::kQ6_K> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 16;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const int n = c >> 4, g = (c >> 2) & 3, l0 = 8 * (c & 3);
        const float dl = mul_rn(half_to_float(load_u16(block + 208)),
                                static_cast<float>(static_cast<int8_t>(block[192 + (c >> 1)])));
        const Bytes8 ql = load8<2>(block + 64 * n + 32 * (g & 1) + l0).field(4 * (g >> 1), 15);
        const Bytes8 qh = load8<2>(block + 128 + 32 * n + l0).field(2 * g, 3);
        return chunk_of(minus({ql.lo | qh.lo << 4, ql.hi | qh.hi << 4}, 32), dl);
    }
};

template <>
struct BlockInt<GgmlType::kIQ4_NL> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const Bytes8 q = load8<2>(block + 2 + 8 * (c & 1)).field(4 * (c >> 1), 15);
        return chunk_of(levels(q, iq4nl_levels()), half_to_float(load_u16(block)));
    }
};

template <>
struct BlockInt<GgmlType::kIQ4_XS> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const int b = c >> 2;
        const Bytes8 head = load8<8>(block);
        const uint32_t ls = ((head.hi >> (4 * b)) & 15) | ((head.lo >> (16 + 2 * b)) & 3) << 4;
        const float dl =
            mul_rn(half_to_float(head.lo & 0xffff), static_cast<float>(static_cast<int>(ls) - 32));
        const Bytes8 q = load8<8>(block + 8 + 16 * b + 8 * (c & 1)).field(4 * ((c >> 1) & 1), 15);
        return chunk_of(levels(q, iq4nl_levels()), dl);
    }
};

template <>
struct BlockInt<GgmlType::kMXFP4> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const Bytes8 q = load8<1>(block + 1 + 8 * (c & 1)).field(4 * (c >> 1), 15);
        return chunk_of(levels(q, e2m1_doubled_levels()), e8m0_half_to_float(block[0]));
    }
};

template <>
struct BlockInt<GgmlType::kNVFP4> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 16;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables&) {
        using namespace int_detail;
        const Bytes8 q = load8<4>(block + 4 + 8 * (c >> 1)).field(4 * (c & 1), 15);
        return chunk_of(levels(q, e2m1_doubled_levels()), ue4m3_half_to_float(block[c >> 1]));
    }
};

template <>
struct BlockInt<GgmlType::kIQ2_XXS> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables& tables) {
        using namespace int_detail;
        const uint8_t* sub = block + 2 + 8 * (c >> 2);
        const uint32_t aux = load4<2>(sub + 4);
        const float db = half_step_scale(half_to_float(load_u16(block)), aux >> 28, 0.25f);
        return chunk_of(
            signed_grid(iq2_point(tables.iq2xxs_grid, sub[c & 3]), iq_signs(aux >> (7 * (c & 3)))),
            db);
    }
};

template <>
struct BlockInt<GgmlType::kIQ3_XXS> {
    static constexpr bool kDefined = true, kHasMin = false;
    static constexpr int kGroup = 32;  // values per scale
    TANDEM_HD static IntChunk chunk(const uint8_t* block, int c, const DequantTables& tables) {
        using namespace int_detail;
        const uint32_t points = load_u16(block + 2 + 2 * c);
        const uint32_t aux = load4<2>(block + 66 + 4 * (c >> 2));
        const float db = half_step_scale(half_to_float(load_u16(block)), aux >> 28, 0.5f);
        const Bytes8 grid = {load_u32(tables.iq3xxs_grid + 4 * (points & 255)),
                             load_u32(tables.iq3xxs_grid + 4 * (points >> 8))};
        return chunk_of(signed_grid(grid, iq_signs(aux >> (7 * (c & 3)))), db);
    }
};

}  // namespace tandem::gpu
