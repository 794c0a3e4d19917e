// NEON dot-product tiles for the 256-value super-block formats against q8_K activations (the
// aarch64 counterpart of simd_kquants.cpp): q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs. A row's
// super-block is decoded once into 16 registers of bytes (weight = u - bias, u < 64, or signed
// for iq4_xs) and its sub-block scales into int32 lanes; then per column: sdot per 16 values,
// pairwise adds to one int32 per sub-block, the scales applied with one multiply-add per four
// sub-blocks, the q8_K bsums for the bias or min term, one float scaling per super-block.
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/neon_super_blocks.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

// A row's super-block, decoded for all columns.
struct Decoded {
    int8x16_t q[16];    // values 16i..16i+15 in q[i] (u, or the signed weight)
    int32x4_t sc[4];    // sub-block scales, four per register (kSub 16: 16; kSub 32: 8 in sc[0..1])
    int16x8_t corr[2];  // per 16 values k: the factor of bsums[k] in the bias or min term
    float d, dmin;
};

inline int32x4_t widen_lo(int16x8_t x) {
    return vmovl_s16(vget_low_s16(x));
}
inline int32x4_t widen_hi(int16x8_t x) {
    return vmovl_high_s16(x);
}
inline int8x16_t s8(uint8x16_t x) {
    return vreinterpretq_s8_u8(x);
}
// 8 unsigned bytes -> two int32x4 (sc[0..1]).
inline void scales8(uint8x8_t s, Decoded& w) {
    const int16x8_t x = vreinterpretq_s16_u16(vmovl_u8(s));
    w.sc[0] = widen_lo(x);
    w.sc[1] = widen_hi(x);
}
// 16 signed bytes -> sc[0..3]; and times kBias into corr (the bias term of 16-value sub-blocks).
template <int kBias>
void scales16(int8x16_t s, Decoded& w) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    w.sc[0] = widen_lo(lo);
    w.sc[1] = widen_hi(lo);
    w.sc[2] = widen_lo(hi);
    w.sc[3] = widen_hi(hi);
    w.corr[0] = vmulq_n_s16(lo, kBias);
    w.corr[1] = vmulq_n_s16(hi, kBias);
}

// q4_K / q5_K: eight 6-bit scales and mins in 12 bytes (ggml's get_scale_min_k4): j < 4:
// sc = s[j] & 63, m = s[j+4] & 63; j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
// m = (s[j+4] >> 4) | (s[j] >> 6) << 4; four at a time in 32-bit words.
inline void k4_scales_mins(const uint8_t* s, Decoded& w) {
    const uint32_t s0 = load_u32(s), s1 = load_u32(s + 4), s2 = load_u32(s + 8);
    const uint32_t sc_lo = s0 & 0x3f3f3f3f, m_lo = s1 & 0x3f3f3f3f;
    const uint32_t sc_hi = (s2 & 0x0f0f0f0f) | ((s0 >> 6) & 0x03030303) << 4;
    const uint32_t m_hi = ((s2 >> 4) & 0x0f0f0f0f) | ((s1 >> 6) & 0x03030303) << 4;
    scales8(vcreate_u8(sc_lo | static_cast<uint64_t>(sc_hi) << 32), w);
    // The min of 32-value sub-block b multiplies bsums 2b and 2b + 1.
    const uint8x8_t m = vcreate_u8(m_lo | static_cast<uint64_t>(m_hi) << 32);
    w.corr[0] = vreinterpretq_s16_u16(vmovl_u8(vzip1_u8(m, m)));
    w.corr[1] = vreinterpretq_s16_u16(vmovl_u8(vzip2_u8(m, m)));
}

// Traits: decode(block, Decoded&) fills everything.
//   kSub: values per sub-block scale; kBias: weight = u - kBias (corr = kBias * sc, same d);
//   kMins: x = d * sc * q - dmin * m (corr = m, scaled by dmin).
struct Q2K {
    static constexpr int kBytes = 84, kSub = 16, kBias = 0;
    static constexpr bool kMins = true;
    // Value 128n + 32g + l: bits 2g..2g+1 of qs[32n + l]; scales[v / 16]: low nibble the
    // scale, high nibble the min.
    static void decode(const uint8_t* b, Decoded& w) {
        const uint8x16_t m3 = vdupq_n_u8(3);
        for (int n = 0; n < 2; ++n) {
            for (int h = 0; h < 2; ++h) {
                const uint8x16_t x = vld1q_u8(b + 16 + 32 * n + 16 * h);
                for (int g = 0; g < 4; ++g)
                    w.q[8 * n + 2 * g + h] = s8(vandq_u8(shr8(x, 2 * g), m3));
            }
        }
        const uint8x16_t s = vld1q_u8(b);
        const uint8x16_t sc = vandq_u8(s, vdupq_n_u8(15)), m = vshrq_n_u8(s, 4);
        const int16x8_t sc_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(sc)));
        const int16x8_t sc_hi = vreinterpretq_s16_u16(vmovl_high_u8(sc));
        w.sc[0] = widen_lo(sc_lo);
        w.sc[1] = widen_hi(sc_lo);
        w.sc[2] = widen_lo(sc_hi);
        w.sc[3] = widen_hi(sc_hi);
        w.corr[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
        w.corr[1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
        const float32x4_t dd = fp16x2(b + 80, b + 82);
        w.d = vgetq_lane_f32(dd, 0);
        w.dmin = vgetq_lane_f32(dd, 1);
    }
};
struct Q3K {
    static constexpr int kBytes = 110, kSub = 16, kBias = 4;
    static constexpr bool kMins = false;
    // Low 2 bits as q2_K (qs at 32); bit 4n + g of hmask[l] set: q = low, clear: q = low - 4
    // (so u = low | bit << 2). 6-bit scales minus 32: low 4 bits from scales[0..7] (low then
    // high nibbles), high 2 bits from scales[8..11] (ggml's kmask1 / kmask2 unpacking).
    static void decode(const uint8_t* b, Decoded& w) {
        const uint8x16_t m3 = vdupq_n_u8(3), m4 = vdupq_n_u8(4);
        for (int h = 0; h < 2; ++h) {
            const uint8x16_t hm = vld1q_u8(b + 16 * h);
            for (int n = 0; n < 2; ++n) {
                const uint8x16_t x = vld1q_u8(b + 32 + 32 * n + 16 * h);
                for (int g = 0; g < 4; ++g) {
                    // bit 4n + g moved to bit 2
                    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(2 - 4 * n - g));
                    const uint8x16_t high = vandq_u8(vshlq_u8(hm, shift), m4);
                    w.q[8 * n + 2 * g + h] = s8(vorrq_u8(vandq_u8(shr8(x, 2 * g), m3), high));
                }
            }
        }
        const uint32_t a0 = load_u32(b + 96), a1 = load_u32(b + 100), a2 = load_u32(b + 104);
        const uint32_t m1 = 0x03030303, m2 = 0x0f0f0f0f;
        const uint32_t t[4] = {(a0 & m2) | ((a2 >> 0) & m1) << 4, (a1 & m2) | ((a2 >> 2) & m1) << 4,
                               ((a0 >> 4) & m2) | ((a2 >> 4) & m1) << 4,
                               ((a1 >> 4) & m2) | ((a2 >> 6) & m1) << 4};
        const uint8x16_t s = vreinterpretq_u8_u32(vld1q_u32(t));
        scales16<kBias>(vsubq_s8(s8(s), vdupq_n_s8(32)), w);
        w.d = fp16(b + 108);
        w.dmin = 0;
    }
};
struct Q4K {
    static constexpr int kBytes = 144, kSub = 32, kBias = 0;
    static constexpr bool kMins = true;
    // Value 64c + 32h + l: nibble h of qs[32c + l].
    static void decode(const uint8_t* b, Decoded& w) {
        const uint8x16_t m15 = vdupq_n_u8(15);
        for (int c = 0; c < 4; ++c) {
            const uint8x16_t x0 = vld1q_u8(b + 16 + 32 * c), x1 = vld1q_u8(b + 32 + 32 * c);
            w.q[4 * c + 0] = s8(vandq_u8(x0, m15));
            w.q[4 * c + 1] = s8(vandq_u8(x1, m15));
            w.q[4 * c + 2] = s8(vshrq_n_u8(x0, 4));
            w.q[4 * c + 3] = s8(vshrq_n_u8(x1, 4));
        }
        k4_scales_mins(b + 4, w);
        const float32x4_t dd = fp16x2(b, b + 2);
        w.d = vgetq_lane_f32(dd, 0);
        w.dmin = vgetq_lane_f32(dd, 1);
    }
};
struct Q5K {
    static constexpr int kBytes = 176, kSub = 32, kBias = 0;
    static constexpr bool kMins = true;
    // As q4_K (qs at 48); bit 4 of value 64c + 32h + l is bit 2c + h of qh[l].
    static void decode(const uint8_t* b, Decoded& w) {
        const uint8x16_t m15 = vdupq_n_u8(15), m16 = vdupq_n_u8(16);
        const uint8x16_t h0 = vld1q_u8(b + 16), h1 = vld1q_u8(b + 32);
        for (int c = 0; c < 4; ++c) {
            const uint8x16_t x0 = vld1q_u8(b + 48 + 32 * c), x1 = vld1q_u8(b + 64 + 32 * c);
            for (int h = 0; h < 2; ++h) {
                // bit 2c + h moved to bit 4
                const int s = 2 * c + h;
                const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(4 - s));
                const uint8x16_t b0 = vandq_u8(vshlq_u8(h0, shift), m16);
                const uint8x16_t b1 = vandq_u8(vshlq_u8(h1, shift), m16);
                const uint8x16_t l0 = h == 0 ? vandq_u8(x0, m15) : vshrq_n_u8(x0, 4);
                const uint8x16_t l1 = h == 0 ? vandq_u8(x1, m15) : vshrq_n_u8(x1, 4);
                w.q[4 * c + 2 * h] = s8(vorrq_u8(l0, b0));
                w.q[4 * c + 2 * h + 1] = s8(vorrq_u8(l1, b1));
            }
        }
        k4_scales_mins(b + 4, w);
        const float32x4_t dd = fp16x2(b, b + 2);
        w.d = vgetq_lane_f32(dd, 0);
        w.dmin = vgetq_lane_f32(dd, 1);
    }
};
struct Q6K {
    static constexpr int kBytes = 210, kSub = 16, kBias = 32;
    static constexpr bool kMins = false;
    // Value 128n + 32g + l: low 4 bits = nibble g / 2 of ql[64n + 32 (g % 2) + l], high 2 bits
    // = bits 2g..2g+1 of qh[32n + l]; int8 scales[v / 16].
    static void decode(const uint8_t* b, Decoded& w) {
        const uint8x16_t m15 = vdupq_n_u8(15), m48 = vdupq_n_u8(48);
        for (int n = 0; n < 2; ++n) {
            for (int lh = 0; lh < 2; ++lh) {
                const uint8x16_t hb = vld1q_u8(b + 128 + 32 * n + 16 * lh);
                for (int g = 0; g < 4; ++g) {
                    const uint8x16_t x = vld1q_u8(b + 64 * n + 32 * (g % 2) + 16 * lh);
                    const uint8x16_t low = g < 2 ? vandq_u8(x, m15) : vshrq_n_u8(x, 4);
                    // bits 2g..2g+1 moved to bits 4..5
                    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(4 - 2 * g));
                    const uint8x16_t high = vandq_u8(vshlq_u8(hb, shift), m48);
                    w.q[8 * n + 2 * g + lh] = s8(vorrq_u8(low, high));
                }
            }
        }
        scales16<kBias>(vld1q_s8(reinterpret_cast<const int8_t*>(b + 192)), w);
        w.d = fp16(b + 208);
        w.dmin = 0;
    }
};
struct Iq4Xs {
    static constexpr int kBytes = 136, kSub = 32, kBias = 0;
    static constexpr bool kMins = false;
    // Sub-block s: qs[16s..16s+15] in q4 packing through the iq4_nl levels (signed); 6-bit
    // ls = nibble s % 2 of scales_l[s / 2] | bits 2s..2s+1 of scales_h << 4; scale ls - 32.
    static void decode(const uint8_t* b, Decoded& w) {
        const int8x16_t table = vld1q_s8(kIq4nlValues);
        const uint8x16_t m15 = vdupq_n_u8(15);
        for (int s = 0; s < 8; ++s) {
            const uint8x16_t x = vld1q_u8(b + 8 + 16 * s);
            w.q[2 * s] = vqtbl1q_s8(table, vandq_u8(x, m15));
            w.q[2 * s + 1] = vqtbl1q_s8(table, vshrq_n_u8(x, 4));
        }
        const uint32_t l = load_u32(b + 4);
        const uint8x8_t lo = vcreate_u8(l & 0x0f0f0f0f), hi = vcreate_u8((l >> 4) & 0x0f0f0f0f);
        const uint8x8_t low4 = vzip1_u8(lo, hi);  // sub-block order
        const int16x8_t shifts = {0, -2, -4, -6, -8, -10, -12, -14};
        const uint16x8_t high2 =
            vandq_u16(vshlq_u16(vdupq_n_u16(load_u16(b + 2)), shifts), vdupq_n_u16(3));
        const int16x8_t ls =
            vreinterpretq_s16_u16(vorrq_u16(vmovl_u8(low4), vshlq_n_u16(high2, 4)));
        const int16x8_t sc = vsubq_s16(ls, vdupq_n_s16(32));
        w.sc[0] = widen_lo(sc);
        w.sc[1] = widen_hi(sc);
        w.d = fp16(b);
        w.dmin = 0;
    }
};

// One decoded super-block against one column's q8_K block y.
template <typename T>
TANDEM_ALWAYS_INLINE float column(const Decoded& w, const uint8_t* y) {
    const auto* q = reinterpret_cast<const int8_t*>(y + 4);
    int32_t isum = scaled_sum<T::kSub>(w, q);
    const float dy = load_f32(y);
    if constexpr (T::kBias != 0 || T::kMins) {
        const int16x8_t bs0 = vld1q_s16(reinterpret_cast<const int16_t*>(y + 260));
        const int16x8_t bs1 = vld1q_s16(reinterpret_cast<const int16_t*>(y + 276));
        int32x4_t c = vmull_s16(vget_low_s16(w.corr[0]), vget_low_s16(bs0));
        c = vmlal_high_s16(c, w.corr[0], bs0);
        c = vmlal_s16(c, vget_low_s16(w.corr[1]), vget_low_s16(bs1));
        c = vmlal_high_s16(c, w.corr[1], bs1);
        const int32_t corr = vaddvq_s32(c);
        if constexpr (T::kMins) {
            return static_cast<float>(isum) * (w.d * dy) - static_cast<float>(corr) * (w.dmin * dy);
        } else {
            isum -= corr;  // the bias, in the same integer sum
        }
    }
    return static_cast<float>(isum) * (w.d * dy);
}

template <typename T, int C>
struct KTile {
    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        super_block_rows<T, Decoded, C>(
            k, w, w_stride, n_rows, a, a_stride, out, out_stride,
            [](const Decoded& dec, const uint8_t* y, float& acc) { acc += column<T>(dec, y); });
    }
};

template <typename T>
void dot_k(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<KTile, T>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace

void dot_q2_K(TANDEM_DOT_TILE_PARAMS) {
    dot_k<Q2K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q3_K(TANDEM_DOT_TILE_PARAMS) {
    dot_k<Q3K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q4_K(TANDEM_DOT_TILE_PARAMS) {
    dot_k<Q4K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q5_K(TANDEM_DOT_TILE_PARAMS) {
    dot_k<Q5K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q6_K(TANDEM_DOT_TILE_PARAMS) {
    dot_k<Q6K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq4_xs(TANDEM_DOT_TILE_PARAMS) {
    dot_k<Iq4Xs>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace tandem::TANDEM_VARIANT_NS
