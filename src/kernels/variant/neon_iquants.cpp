// NEON dot-product tiles for the lattice i-quants and the ternary formats against q8_K
// activations (the aarch64 counterpart of simd_iquants.cpp): iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
// iq3_s, iq1_s, iq1_m, tq1_0, tq2_0. sdot multiplies signed bytes by signed bytes, so where the
// x86 tiles keep unsigned magnitudes and move the signs onto every column's activations, here a
// row's super-block is decoded once into the signed weights themselves: grid points looked up
// (formats/iq_tables.h), signs applied, iq1 values in eighths (8 grid + shift), ternary values
// -1, 0, 1; no bias, so no bsums. Then per column, as in neon_kquants.cpp: sdot per 16 values,
// one int32 per sub-block, the odd sub-block scales 2s+1 applied in int32.
//
// Column invariance: per (row, column) and super-block one exact int32 total and one fused
// multiply-add of it times d * factor * dy into that column's float sum, whatever the number of
// columns; only the integer decoding is shared between columns.
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/neon_super_blocks.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

// A row's super-block, decoded for all columns.
struct Decoded {
    int8x16_t q[16];  // signed weights 16i..16i+15 (iq1: in eighths)
    int32x4_t sc[4];  // odd sub-block scales 2s+1, four per register (kSub 16: 16; kSub 32: 8)
    float d;          // fp16 d times the format's factor (a power of two: exact)
};

inline float fp16_of_bits(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}
inline int8x16_t s8(uint8x16_t x) {
    return vreinterpretq_s8_u8(x);
}
// Unsigned bytes 0..7 and 8..15 of x into int32 lanes.
inline void widen_u8_to_s32(uint8x8_t x, int32x4_t& lo, int32x4_t& hi) {
    const uint16x8_t x16 = vmovl_u8(x);
    lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(x16)));
    hi = vreinterpretq_s32_u32(vmovl_high_u16(x16));
}
// 2s+1 of the 4-bit s in the nibbles of x (low nibble of byte j: s of sub-block 2j, high: 2j+1)
// into sc[0..kRegs-1] (iq2_xs, iq2_s: 16 nibbles, iq3_s: 8).
template <int kRegs>
TANDEM_ALWAYS_INLINE void odd_scales_of_nibbles(uint8x8_t x, Decoded& w) {
    const uint8x8_t low = vand_u8(x, vdup_n_u8(15)), high = vshr_n_u8(x, 4);
    const uint8x16_t s = vcombine_u8(vzip1_u8(low, high), vzip2_u8(low, high));
    const uint8x16_t odd = vorrq_u8(vshlq_n_u8(s, 1), vdupq_n_u8(1));
    widen_u8_to_s32(vget_low_u8(odd), w.sc[0], w.sc[1]);
    if constexpr (kRegs == 4) widen_u8_to_s32(vget_high_u8(odd), w.sc[2], w.sc[3]);
}
// 2s+1 of the scales s in bits 28-31 of four aux words (iq2_xxs, iq3_xxs): aux >> 27 is 2s plus
// bit 27 (a sign bit), which the | 1 overwrites.
inline int32x4_t odd_scales_of_aux(uint32x4_t aux) {
    return vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(aux, 27), vdupq_n_u32(1)));
}

// Grid points g[i0], g[i1] of 8 values as one register.
TANDEM_ALWAYS_INLINE uint8x16_t points8x2(const uint64_t* g, uint32_t i0, uint32_t i1) {
    return vreinterpretq_u8_u64(vcombine_u64(vld1_u64(g + i0), vld1_u64(g + i1)));
}
// Grid points g[i0..i3] of 4 values as one register.
TANDEM_ALWAYS_INLINE uint8x16_t points4x4(const uint32_t* g, uint32_t i0, uint32_t i1, uint32_t i2,
                                          uint32_t i3) {
    const uint64_t lo = g[i0] | static_cast<uint64_t>(g[i1]) << 32;
    const uint64_t hi = g[i2] | static_cast<uint64_t>(g[i3]) << 32;
    return vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
}

// Groups of 8 values: bytes 2p and 2p+1 of x (one per group, 16 groups) spread over the 8 values
// of their group each: the 16 values of one register.
TANDEM_ALWAYS_INLINE uint8x16_t spread_pair(uint8x16_t x, int p) {
    const auto lo = static_cast<uint8_t>(2 * p);
    return vqtbl1q_u8(x, vcombine_u8(vdup_n_u8(lo), vdup_n_u8(static_cast<uint8_t>(lo + 1))));
}
// u with value j negated where bit j % 8 of its group's sign byte (spread by spread_pair) is set.
TANDEM_ALWAYS_INLINE int8x16_t apply_signs(uint8x16_t u, uint8x16_t signs) {
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
    const uint8x16_t negate = vtstq_u8(signs, bit);  // 0xff or 0
    return s8(vsubq_u8(veorq_u8(u, negate), negate));
}
// Sign bytes from 7-bit sign indices: the eighth sign makes the number of negated values of the
// group even, so it is the parity of the other seven (ggml's ksigns).
inline uint8x16_t sign_bytes(uint8x16_t index7) {
    return vsliq_n_u8(index7, vcntq_u8(index7), 7);
}
// The four 7-bit sign indices in bits 0..27 of each aux word, one per byte (iq2_xxs, iq3_xxs).
inline uint8x16_t sign_indices(uint32x4_t aux) {
    const uint32x4_t f0 = vandq_u32(aux, vdupq_n_u32(0x7f));
    const uint32x4_t f1 = vandq_u32(vshlq_n_u32(aux, 1), vdupq_n_u32(0x7f00));
    const uint32x4_t f2 = vandq_u32(vshlq_n_u32(aux, 2), vdupq_n_u32(0x7f0000));
    const uint32x4_t f3 = vandq_u32(vshlq_n_u32(aux, 3), vdupq_n_u32(0x7f000000));
    return vreinterpretq_u8_u32(vorrq_u32(vorrq_u32(f0, f1), vorrq_u32(f2, f3)));
}
inline uint32x4_t load_u32x4(const uint8_t* p) {
    return vreinterpretq_u32_u8(vld1q_u8(p));
}

// Traits: decode(block, Decoded&) fills everything; kSub: values per sub-block scale, 0 for the
// ternary formats (no sub-block scales).

// iq2_xxs, 66 bytes: d, then per sub-block 8 bytes: 4 grid indices, a uint32 aux of 4 7-bit sign
// indices and the scale in bits 28-31. x = d * (2s+1) / 8 * grid * sign.
struct Iq2Xxs {
    static constexpr int kBytes = 66, kSub = 32;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint8_t* qs = b + 2;
        // the aux words are the odd words of qs: sub-blocks 0-3, 4-7
        const uint32x4_t aux0 = vuzp2q_u32(load_u32x4(qs), load_u32x4(qs + 16));
        const uint32x4_t aux1 = vuzp2q_u32(load_u32x4(qs + 32), load_u32x4(qs + 48));
        w.sc[0] = odd_scales_of_aux(aux0);
        w.sc[1] = odd_scales_of_aux(aux1);
        const uint8x16_t signs[2] = {sign_bytes(sign_indices(aux0)),
                                     sign_bytes(sign_indices(aux1))};
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) {
            const uint8_t* idx = qs + 8 * (i / 2) + 2 * (i % 2);
            const uint8x16_t u = points8x2(kIq2xxsPoints.p, idx[0], idx[1]);
            w.q[i] = apply_signs(u, spread_pair(signs[i / 8], i % 8));
        }
        w.d = fp16(b) * 0.125f;
    }
};

// iq2_xs, 74 bytes: d, qs[32] uint16 per group (bits 0-8 grid index, 9-15 sign index),
// scales[8] (two 4-bit s per sub-block, one per 16 values). x = d * (2s+1) / 8 * grid * sign.
struct Iq2Xs {
    static constexpr int kBytes = 74, kSub = 16;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint8_t* qs = b + 2;
        // the sign indices: the high bytes of the words, shifted down by one
        uint8x16_t signs[2];
        TANDEM_UNROLL
        for (int h = 0; h < 2; ++h) {
            const uint8x16_t high = vuzp2q_u8(vld1q_u8(qs + 32 * h), vld1q_u8(qs + 32 * h + 16));
            signs[h] = sign_bytes(vshrq_n_u8(high, 1));
        }
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) {
            const uint32_t i0 = load_u16(qs + 4 * i) & 511, i1 = load_u16(qs + 4 * i + 2) & 511;
            w.q[i] =
                apply_signs(points8x2(kIq2xsPoints.p, i0, i1), spread_pair(signs[i / 8], i % 8));
        }
        odd_scales_of_nibbles<4>(vld1_u8(b + 66), w);
        w.d = fp16(b) * 0.125f;
    }
};

// iq2_s, 82 bytes: d, qs[32] (low 8 bits of the grid indices), signs[32] (a sign byte per
// group), qh[8] (sub-block s: bits 2l..2l+1 = bits 8-9 of its group l's index), scales[8] as
// iq2_xs. x = d * (2s+1) / 8 * grid * sign.
struct Iq2S {
    static constexpr int kBytes = 82, kSub = 16;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint8_t *qs = b + 2, *qh = b + 66;
        const uint8x16_t signs[2] = {vld1q_u8(b + 34), vld1q_u8(b + 50)};
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) {  // groups 2i, 2i+1: l = 2 (i % 2) and l + 1 of qh[i / 2]
            const uint32_t h = qh[i / 2] >> (4 * (i % 2));
            const uint32_t i0 = qs[2 * i] | (h & 3) << 8, i1 = qs[2 * i + 1] | (h & 12) << 6;
            w.q[i] =
                apply_signs(points8x2(kIq2sPoints.p, i0, i1), spread_pair(signs[i / 8], i % 8));
        }
        odd_scales_of_nibbles<4>(vld1_u8(b + 74), w);
        w.d = fp16(b) * 0.125f;
    }
};

// iq3_xxs, 98 bytes: d, qs[64] (a grid index per 4 values), aux[32] (per sub-block a uint32 of 4
// 7-bit sign indices and the scale in bits 28-31). x = d * (2s+1) / 4 * grid * sign.
struct Iq3Xxs {
    static constexpr int kBytes = 98, kSub = 32;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint32x4_t aux0 = load_u32x4(b + 66), aux1 = load_u32x4(b + 82);
        w.sc[0] = odd_scales_of_aux(aux0);
        w.sc[1] = odd_scales_of_aux(aux1);
        const uint8x16_t signs[2] = {sign_bytes(sign_indices(aux0)),
                                     sign_bytes(sign_indices(aux1))};
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) {
            const uint8_t* q = b + 2 + 4 * i;
            const uint8x16_t u = points4x4(kIq3xxsPoints.p, q[0], q[1], q[2], q[3]);
            w.q[i] = apply_signs(u, spread_pair(signs[i / 8], i % 8));
        }
        w.d = fp16(b) * 0.25f;
    }
};

// iq3_s, 110 bytes: d, qs[64] (low 8 bits of the grid index per 4 values), qh[8] (bit k of
// qh[s] = bit 8 of sub-block s's k-th index), signs[32], scales[4] (a nibble per sub-block).
// x = d * (2s+1) * grid * sign.
struct Iq3S {
    static constexpr int kBytes = 110, kSub = 32;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint8_t *qs = b + 2, *qh = b + 66;
        const uint8x16_t signs[2] = {vld1q_u8(b + 74), vld1q_u8(b + 90)};
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) {  // points 4 (i % 2)..+3 of sub-block i / 2
            const uint8_t* q = qs + 4 * i;
            const uint32_t h = qh[i / 2] >> (4 * (i % 2));
            const uint8x16_t u = points4x4(kIq3sPoints.p, q[0] | (h & 1) << 8, q[1] | (h & 2) << 7,
                                           q[2] | (h & 4) << 6, q[3] | (h & 8) << 5);
            w.q[i] = apply_signs(u, spread_pair(signs[i / 8], i % 8));
        }
        odd_scales_of_nibbles<2>(vcreate_u8(load_u32(b + 106)), w);
        w.d = fp16(b);
    }
};

// The iq1 formats: grid values -1, 0, 1 and a shift of +-1/8 per group, in eighths
// w = 8 grid + shift, from the table of 8 (grid + 1): w = 8 (grid + 1) + (shift - 8), i.e.
// -7 for shift +1 and -9 for shift -1. x = d * (2s+1) / 8 * w.
constexpr int8_t kShiftUp = -7, kShiftDown = -9;

// iq1_s, 50 bytes: d, qs[32] (low 8 bits of the grid indices), qh[8] uint16 per sub-block: bits
// 3l..3l+2 = bits 8-10 of group l's index, bits 12-14 = s, bit 15 set: shift -1, else +1.
struct Iq1S {
    static constexpr int kBytes = 50, kSub = 32;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint8_t* qs = b + 2;
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) {  // groups l = 2 (i % 2) and l + 1 of sub-block i / 2
            const uint32_t h = load_u16(b + 34 + 2 * (i / 2));
            const uint32_t hl = h >> (6 * (i % 2));
            const uint32_t i0 = qs[2 * i] | (hl & 7) << 8, i1 = qs[2 * i + 1] | (hl & 0x38) << 5;
            const uint8x16_t eighths = points8x2(kIq1sPointsEighths.p, i0, i1);
            const int8x16_t shift = vdupq_n_s8(h & 0x8000 ? kShiftDown : kShiftUp);
            w.q[i] = vaddq_s8(s8(eighths), shift);
        }
        // 2s+1 = (qh >> 11) & 14 | 1
        const uint16x8_t qh = vreinterpretq_u16_u8(vld1q_u8(b + 34));
        const uint16x8_t odd =
            vorrq_u16(vandq_u16(vshrq_n_u16(qh, 11), vdupq_n_u16(14)), vdupq_n_u16(1));
        w.sc[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(odd)));
        w.sc[1] = vreinterpretq_s32_u32(vmovl_high_u16(odd));
        w.d = fp16(b) * 0.125f;
    }
};

// iq1_m, 56 bytes: qs[32] (low 8 bits of the grid indices), qh[16] (a nibble per group, low
// nibble first: bits 0-2 = bits 8-10 of its index, bit 3 set: shift -1, else +1), scales[8]:
// four uint16 words, 3-bit s per 16 values (word k / 4, bits 3 (k % 4)..), the fp16 d in their
// top nibbles.
struct Iq1M {
    static constexpr int kBytes = 56, kSub = 16;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        // per group its w - 8 (grid + 1): -7 - 2 * (bit 3 of its nibble), in group order
        const uint8x16_t qh = vld1q_u8(b + 32);
        const uint8x16_t up = vdupq_n_u8(static_cast<uint8_t>(kShiftUp));
        const uint8x16_t low = vsubq_u8(up, vshrq_n_u8(vandq_u8(qh, vdupq_n_u8(8)), 2));
        const uint8x16_t high = vsubq_u8(up, vandq_u8(vshrq_n_u8(qh, 6), vdupq_n_u8(2)));
        const uint8x16_t shifts[2] = {vzip1q_u8(low, high), vzip2q_u8(low, high)};
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) {  // groups 2i, 2i+1: the nibbles of qh[i]
            const uint32_t h = b[32 + i];
            const uint32_t i0 = b[2 * i] | (h & 7) << 8, i1 = b[2 * i + 1] | (h & 0x70) << 4;
            const uint8x16_t eighths = points8x2(kIq1sPointsEighths.p, i0, i1);
            w.q[i] = s8(vaddq_u8(eighths, spread_pair(shifts[i / 8], i % 8)));
        }
        // 2s+1 of 16-value sub-block 4j + m = (word j >> (3m - 1)) & 14 | 1
        const int32x4_t to_bit1 = {1, -2, -5, -8};
        TANDEM_UNROLL
        for (int j = 0; j < 4; ++j) {
            const uint32x4_t word = vdupq_n_u32(load_u16(b + 48 + 2 * j));
            w.sc[j] = vreinterpretq_s32_u32(
                vorrq_u32(vandq_u32(vshlq_u32(word, to_bit1), vdupq_n_u32(14)), vdupq_n_u32(1)));
        }
        const uint64_t words = load_u32(b + 48) | static_cast<uint64_t>(load_u32(b + 52)) << 32;
        const auto d_bits =
            static_cast<uint16_t>(((words >> 12) & 0x000f) | ((words >> 24) & 0x00f0) |
                                  ((words >> 36) & 0x0f00) | ((words >> 48) & 0xf000));
        w.d = fp16_of_bits(d_bits) * 0.125f;
    }
};

// The ternary formats: weight -1, 0 or 1 (tq2_0 also decodes 3 as +2), no sub-block scales.

// tq2_0, 66 bytes: qs[64], d. Value 128n + 32g + l = bits 2g..2g+1 of qs[32n + l], minus 1.
struct Tq2 {
    static constexpr int kBytes = 66, kSub = 0;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
        TANDEM_UNROLL
        for (int n = 0; n < 2; ++n) {
            TANDEM_UNROLL
            for (int h = 0; h < 2; ++h) {
                const uint8x16_t x = vld1q_u8(b + 32 * n + 16 * h);
                TANDEM_UNROLL
                for (int g = 0; g < 4; ++g)
                    w.q[8 * n + 2 * g + h] = s8(vsubq_u8(vandq_u8(shr8(x, 2 * g), m3), one));
            }
        }
        w.d = fp16(b + 64);
    }
};

// tq1_0, 54 bytes: qs[48], qh[4], d. Five trits per byte: trit k of byte x is
// floor(3 y / 256) with y = x * 3^k mod 256, i.e. 0 for y <= 85, 2 for y > 170, else 1. Trit k of
// qs[m] (m < 32) is value 32k + m, of qs[32 + m] value 160 + 16k + m, of qh[m] (k < 4) value
// 240 + 4k + m.
TANDEM_ALWAYS_INLINE int8x16_t trit_minus_one(uint8x16_t y) {
    return s8(vsubq_u8(vcleq_u8(y, vdupq_n_u8(85)), vcgtq_u8(y, vdupq_n_u8(170))));
}
TANDEM_ALWAYS_INLINE uint8x16_t times_pow3(uint8x16_t x, int k) {
    constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    return k == 0 ? x : vmulq_u8(x, vdupq_n_u8(kPow3[k]));
}
struct Tq1 {
    static constexpr int kBytes = 54, kSub = 0;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Decoded& w) {
        const uint8x16_t x0 = vld1q_u8(b), x1 = vld1q_u8(b + 16), x2 = vld1q_u8(b + 32);
        TANDEM_UNROLL
        for (int k = 0; k < 5; ++k) {
            w.q[2 * k] = trit_minus_one(times_pow3(x0, k));
            w.q[2 * k + 1] = trit_minus_one(times_pow3(x1, k));
            w.q[10 + k] = trit_minus_one(times_pow3(x2, k));
        }
        // qh as four words, byte 4k + m times 3^k
        const uint8x16_t qh = vreinterpretq_u8_u32(vdupq_n_u32(load_u32(b + 48)));
        const uint8x16_t pow3 = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
        w.q[15] = trit_minus_one(vmulq_u8(qh, pow3));
        w.d = fp16(b + 52);
    }
};

// The exact integer total of one decoded super-block against the activation bytes q of one
// q8_K block.
template <typename T>
TANDEM_ALWAYS_INLINE int32_t super_block_total(const Decoded& w, const int8_t* q) {
    if constexpr (T::kSub == 0) {
        int32x4_t acc[4];
        TANDEM_UNROLL
        for (int i = 0; i < 4; ++i)
            acc[i] = vdotq_s32(vdupq_n_s32(0), w.q[i], vld1q_s8(q + 16 * i));
        TANDEM_UNROLL
        for (int i = 4; i < 16; ++i)
            acc[i % 4] = vdotq_s32(acc[i % 4], w.q[i], vld1q_s8(q + 16 * i));
        return vaddvq_s32(vaddq_s32(vaddq_s32(acc[0], acc[1]), vaddq_s32(acc[2], acc[3])));
    } else {
        return scaled_sum<T::kSub>(w, q);
    }
}

template <typename T, int C>
struct IqTile {
    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        super_block_rows<T, Decoded, C>(
            k, w, w_stride, n_rows, a, a_stride, out, out_stride,
            [](const Decoded& dec, const uint8_t* y, float& acc) {
                const int32_t total =
                    super_block_total<T>(dec, reinterpret_cast<const int8_t*>(y + 4));
                // one rounding of the product: the same float steps for every C
                acc = __builtin_fmaf(static_cast<float>(total), dec.d * load_f32(y), acc);
            });
    }
};

template <typename T>
void dot_iq(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<IqTile, T>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace

void dot_iq2_xxs(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Iq2Xxs>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq2_xs(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Iq2Xs>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq2_s(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Iq2S>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq3_xxs(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Iq3Xxs>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq3_s(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Iq3S>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq1_s(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Iq1S>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq1_m(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Iq1M>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_tq1_0(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Tq1>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_tq2_0(TANDEM_DOT_TILE_PARAMS) {
    dot_iq<Tq2>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace tandem::TANDEM_VARIANT_NS
