// NEON building blocks of the aarch64 kernel variants, included by simd.h in place of the x86
// layer: the same names over four 128-bit registers. V holds 64 byte-values, b[i] = bytes
// 16i..16i+15; read as int32 lanes, lane 4i + j is lane j of b[i], and VF holds 16 floats in the
// same lane order. dot4 is sdot (signed x signed: an "unsigned" operand must stay below 128, and
// sign_split leaves a signed weight as it is), or with i8mm usdot (unsigned x signed, as
// vpdpbusd: then kVnni is true and u may reach 255). Only what simd_legacy.cpp and
// simd_float.cpp use is here; the k-quants have their own NEON file (neon_kquants.cpp).
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/variant/unaligned.h"

#if !defined(TANDEM_VARIANT_NS) || defined(TANDEM_VARIANT_BASELINE)
#error "simd_neon.h belongs to the aarch64 SIMD kernel variants"
#endif
#if !defined(__ARM_FEATURE_DOTPROD)
#error "the NEON kernel variants need the dotprod extension (-march=armv8.2-a+dotprod)"
#endif

namespace tandem::TANDEM_VARIANT_NS::simd {

#define TANDEM_ALWAYS_INLINE __attribute__((always_inline)) inline

inline constexpr bool kZmm = false;
#if defined(__ARM_FEATURE_MATMUL_INT8)
inline constexpr bool kVnni = true;  // usdot: unsigned bytes up to 255 against signed ones
#else
inline constexpr bool kVnni = false;
#endif
// 32 registers of 128 bits, but a V takes four: tile sizes as with AVX2's 16 ymm, two per V.
inline constexpr int kRegisters = 16;

// ---------------------------------------------------------------- scalars

// IEEE half at p -> float (fcvt; exact).
inline float fp16(const uint8_t* p) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(load_u16(p)))), 0);
}
// Two IEEE halves at p0 and p1 -> lanes 0 and 1.
inline float32x4_t fp16x2(const uint8_t* p0, const uint8_t* p1) {
    const uint32_t bits = load_u16(p0) | static_cast<uint32_t>(load_u16(p1)) << 16;
    return vcvt_f32_f16(vreinterpret_f16_u32(vdup_n_u32(bits)));
}
// x >> s in every byte (s need not be an immediate: a constant one folds into ushr).
inline uint8x16_t shr8(uint8x16_t x, int s) {
    return vshlq_u8(x, vdupq_n_s8(static_cast<int8_t>(-s)));
}

// ---------------------------------------------------------------- 64-value vectors

struct V {
    uint8x16_t b[4];
};
struct VF {
    float32x4_t f[4];
};
struct FAcc {  // float sums: two registers
    float32x4_t lo, hi;
};

inline V zero() {
    const uint8x16_t z = vdupq_n_u8(0);
    return {{z, z, z, z}};
}
inline V set1_8(uint8_t b) {
    const uint8x16_t x = vdupq_n_u8(b);
    return {{x, x, x, x}};
}
inline V load64(const void* p) {
    const auto* q = static_cast<const uint8_t*>(p);
    return {{vld1q_u8(q), vld1q_u8(q + 16), vld1q_u8(q + 32), vld1q_u8(q + 48)}};
}
inline V load32x2(const void* p0, const void* p1) {
    const auto* q0 = static_cast<const uint8_t*>(p0);
    const auto* q1 = static_cast<const uint8_t*>(p1);
    return {{vld1q_u8(q0), vld1q_u8(q0 + 16), vld1q_u8(q1), vld1q_u8(q1 + 16)}};
}
inline V load32_lo(const void* p) {
    const auto* q = static_cast<const uint8_t*>(p);
    const uint8x16_t z = vdupq_n_u8(0);
    return {{vld1q_u8(q), vld1q_u8(q + 16), z, z}};
}
inline V bcast32(const void* p) {
    const auto* q = static_cast<const uint8_t*>(p);
    const uint8x16_t x0 = vld1q_u8(q), x1 = vld1q_u8(q + 16);
    return {{x0, x1, x0, x1}};
}
inline V and_(V a, V b) {
    return {{vandq_u8(a.b[0], b.b[0]), vandq_u8(a.b[1], b.b[1]), vandq_u8(a.b[2], b.b[2]),
             vandq_u8(a.b[3], b.b[3])}};
}
inline V or_(V a, V b) {
    return {{vorrq_u8(a.b[0], b.b[0]), vorrq_u8(a.b[1], b.b[1]), vorrq_u8(a.b[2], b.b[2]),
             vorrq_u8(a.b[3], b.b[3])}};
}
inline V xor_(V a, V b) {
    return {{veorq_u8(a.b[0], b.b[0]), veorq_u8(a.b[1], b.b[1]), veorq_u8(a.b[2], b.b[2]),
             veorq_u8(a.b[3], b.b[3])}};
}
inline uint8x16_t sub32(uint8x16_t a, uint8x16_t b) {
    return vreinterpretq_u8_s32(vsubq_s32(vreinterpretq_s32_u8(a), vreinterpretq_s32_u8(b)));
}
inline V sub32(V a, V b) {
    return {{sub32(a.b[0], b.b[0]), sub32(a.b[1], b.b[1]), sub32(a.b[2], b.b[2]),
             sub32(a.b[3], b.b[3])}};
}
// Non-linear levels (16 signed bytes) plus bias, as a vtbl table for lookup16.
inline uint8x16_t shifted_table(const int8_t* values, int bias) {
    return vaddq_u8(vreinterpretq_u8_s8(vld1q_s8(values)), vdupq_n_u8(static_cast<uint8_t>(bias)));
}
// Byte i -> table[byte i] (bytes must be 0..15).
inline V lookup16(V idx, uint8x16_t table) {
    return {{vqtbl1q_u8(table, idx.b[0]), vqtbl1q_u8(table, idx.b[1]), vqtbl1q_u8(table, idx.b[2]),
             vqtbl1q_u8(table, idx.b[3])}};
}
// [low nibbles of p0[0..15], high nibbles of p0, low of p1[0..15], high of p1]: two q4-packed
// 32-value blocks in value order.
inline V nibbles16x2(const uint8_t* p0, const uint8_t* p1) {
    const uint8x16_t m = vdupq_n_u8(15), x0 = vld1q_u8(p0), x1 = vld1q_u8(p1);
    return {{vandq_u8(x0, m), vshrq_n_u8(x0, 4), vandq_u8(x1, m), vshrq_n_u8(x1, 4)}};
}
// [low nibbles of p[0..31], high nibbles of p[0..31]] (q4_K / q5_K order).
inline V nibbles32(const uint8_t* p) {
    const uint8x16_t m = vdupq_n_u8(15), x0 = vld1q_u8(p), x1 = vld1q_u8(p + 16);
    return {{vandq_u8(x0, m), vandq_u8(x1, m), vshrq_n_u8(x0, 4), vshrq_n_u8(x1, 4)}};
}
// nvfp4 order: 8-byte groups g = 0..3 of p, each as [low nibbles, high nibbles].
inline V nibbles8x4(const uint8_t* p) {
    const uint8x8_t m = vdup_n_u8(15);
    V v;
    for (int g = 0; g < 4; ++g) {
        const uint8x8_t x = vld1_u8(p + 8 * g);
        v.b[g] = vcombine_u8(vand_u8(x, m), vshr_n_u8(x, 4));
    }
    return v;
}
// Byte j (of 64) = 0xff where bit j of (m1:m0) is set: each register tests its two bytes of
// the mask, broadcast over 8 bytes each, against one bit per byte.
inline V bits_to_bytes(uint32_t m0, uint32_t m1) {
    const uint64_t m = m0 | static_cast<uint64_t>(m1) << 32;
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
    V v;
    for (int i = 0; i < 4; ++i) {
        const uint8x16_t spread = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(m >> (16 * i))),
                                              vdup_n_u8(static_cast<uint8_t>(m >> (16 * i + 8))));
        v.b[i] = vtstq_u8(spread, bit);
    }
    return v;
}

// acc + sums of 4 products u[i] * s[i] (s signed; u unsigned below 128, or up to 255 with
// i8mm) per int32 lane.
inline uint8x16_t dot4(uint8x16_t acc, uint8x16_t u, uint8x16_t s) {
#if defined(__ARM_FEATURE_MATMUL_INT8)
    return vreinterpretq_u8_s32(vusdotq_s32(vreinterpretq_s32_u8(acc), u, vreinterpretq_s8_u8(s)));
#else
    return vreinterpretq_u8_s32(
        vdotq_s32(vreinterpretq_s32_u8(acc), vreinterpretq_s8_u8(u), vreinterpretq_s8_u8(s)));
#endif
}
inline V dot4(V acc, V u, V s) {
    return {{dot4(acc.b[0], u.b[0], s.b[0]), dot4(acc.b[1], u.b[1], s.b[1]),
             dot4(acc.b[2], u.b[2], s.b[2]), dot4(acc.b[3], u.b[3], s.b[3])}};
}
// Operands for dot4 of a signed w with s. sdot is signed already: nothing to do; usdot takes
// |w| and s with the sign of w (as vpsignb).
inline void sign_split(V w, V s, V& abs_w, V& signed_s) {
#if defined(__ARM_FEATURE_MATMUL_INT8)
    for (int i = 0; i < 4; ++i) {
        const int8x16_t ws = vreinterpretq_s8_u8(w.b[i]), ss = vreinterpretq_s8_u8(s.b[i]);
        abs_w.b[i] = vreinterpretq_u8_s8(vabsq_s8(ws));  // -128 -> 0x80 = 128 unsigned
        signed_s.b[i] = vreinterpretq_u8_s8(vbslq_s8(vcltzq_s8(ws), vnegq_s8(ss), ss));
    }
#else
    abs_w = w;
    signed_s = s;
#endif
}

inline VF cvt(V v) {
    VF f;
    for (int i = 0; i < 4; ++i) f.f[i] = vcvtq_f32_s32(vreinterpretq_s32_u8(v.b[i]));
    return f;
}
inline VF mul(VF a, VF b) {
    return {{vmulq_f32(a.f[0], b.f[0]), vmulq_f32(a.f[1], b.f[1]), vmulq_f32(a.f[2], b.f[2]),
             vmulq_f32(a.f[3], b.f[3])}};
}
inline VF fma_vf(VF a, VF b, VF c) {
    return {{vfmaq_f32(c.f[0], a.f[0], b.f[0]), vfmaq_f32(c.f[1], a.f[1], b.f[1]),
             vfmaq_f32(c.f[2], a.f[2], b.f[2]), vfmaq_f32(c.f[3], a.f[3], b.f[3])}};
}
// acc + x * s (quarters' products summed pairwise first, one of each pair fused): one add on
// each accumulator chain.
inline FAcc add_product(FAcc acc, VF x, VF s) {
    return {vaddq_f32(acc.lo, vfmaq_f32(vmulq_f32(x.f[0], s.f[0]), x.f[2], s.f[2])),
            vaddq_f32(acc.hi, vfmaq_f32(vmulq_f32(x.f[1], s.f[1]), x.f[3], s.f[3]))};
}
inline FAcc facc_zero() {
    return {vdupq_n_f32(0), vdupq_n_f32(0)};
}
// Lanes 0..7 = a, lanes 8..15 = b.
inline VF halves(float a, float b) {
    const float32x4_t x = vdupq_n_f32(a), y = vdupq_n_f32(b);
    return {{x, x, y, y}};
}
// halves() of the IEEE halves at p0 and p1.
inline VF halves_fp16(const uint8_t* p0, const uint8_t* p1) {
    const float32x4_t f = fp16x2(p0, p1);
    const float32x4_t x = vdupq_laneq_f32(f, 0), y = vdupq_laneq_f32(f, 1);
    return {{x, x, y, y}};
}
// 16 floats at p; the 16 IEEE halves at p as floats.
inline VF load16f(const float* p) {
    return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}};
}
inline VF fp16x16(const uint16_t* p) {
    const float16x8_t a = vreinterpretq_f16_u16(vld1q_u16(p));
    const float16x8_t b = vreinterpretq_f16_u16(vld1q_u16(p + 8));
    return {{vcvt_f32_f16(vget_low_f16(a)), vcvt_high_f32_f16(a), vcvt_f32_f16(vget_low_f16(b)),
             vcvt_high_f32_f16(b)}};
}
inline void store16f(float* p, VF x) {
    for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, x.f[i]);
}
// Lanes 4i..4i+3 = s[i].
inline VF quarters(float32x4_t s) {
    return {{vdupq_laneq_f32(s, 0), vdupq_laneq_f32(s, 1), vdupq_laneq_f32(s, 2),
             vdupq_laneq_f32(s, 3)}};
}
// Horizontal sum of a float accumulator.
inline float hsum(FAcc a) {
    return vaddvq_f32(vaddq_f32(a.lo, a.hi));
}

}  // namespace tandem::TANDEM_VARIANT_NS::simd
