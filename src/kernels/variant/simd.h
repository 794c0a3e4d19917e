// x86 SIMD building blocks of the kernel variants. The kernels work on V, 64 byte-values at a
// time (two ymm with AVX2, one zmm with AVX-512), and this header alone picks the instructions
// from the variant's flags: vpmaddubsw + vpmaddwd on AVX2, vpdpbusd / vpdpwssd with VNNI,
// 512-bit forms with AVX-512. Everything here lives in the variant's namespace, so no inline
// function is shared between variants built with different flags.
#pragma once

#if defined(__aarch64__)
// ---------------------------------------------------------------- aarch64: NEON
// The same interface over NEON registers (sdot / usdot); everything below is x86.
#include "kernels/variant/simd_neon.h"
#else  // x86 to the end of the file

// GCC 12's AVX-512 headers self-initialize "undefined" vectors and then warn about them (GCC
// bug 105593, fixed in 13); the warnings point into the header, so they are silenced there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstdint>
#include <cstring>

#include "kernels/variant/unaligned.h"

#if !defined(TANDEM_VARIANT_NS) || defined(TANDEM_VARIANT_BASELINE)
#error "simd.h belongs to the x86 SIMD kernel variants"
#endif

namespace tandem::TANDEM_VARIANT_NS::simd {

#define TANDEM_ALWAYS_INLINE __attribute__((always_inline)) inline

#if defined(TANDEM_SIMD_ZMM)
inline constexpr bool kZmm = true;
#else
inline constexpr bool kZmm = false;
#endif
#if defined(__AVX512VNNI__) || defined(__AVXVNNI__)
inline constexpr bool kVnni = true;
#else
inline constexpr bool kVnni = false;
#endif
// Vector registers the compiler can keep accumulators in.
#if defined(__AVX512F__)
inline constexpr int kRegisters = 32;
#else
inline constexpr int kRegisters = 16;
#endif

// ---------------------------------------------------------------- scalars

inline uint64_t load_u64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
// IEEE half at p -> float (F16C; exact).
inline float fp16(const uint8_t* p) {
    return _cvtsh_ss(load_u16(p));
}

// acc + sums of the two int16 products per int32 lane (vpdpwssd on VNNI).
inline __m256i dpwssd(__m256i acc, __m256i p, __m256i sc) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, p, sc);
#elif defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, p, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
#endif
}

// ---------------------------------------------------------------- 64-value vectors

#if defined(TANDEM_SIMD_ZMM)
struct V {
    __m512i x;
};
struct VF {
    __m512 x;
};
using Acc = __m512i;  // one register of int32 sums
using FAcc = __m512;  // one register of float sums

inline V zero() {
    return {_mm512_setzero_si512()};
}
inline V set1_8(uint8_t b) {
    return {_mm512_set1_epi8(static_cast<char>(b))};
}
inline V load64(const void* p) {
    return {_mm512_loadu_si512(p)};
}
inline V load32x2(const void* p0, const void* p1) {
    const __m512i lo = _mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p0)));
    return {_mm512_inserti64x4(lo, _mm256_loadu_si256(static_cast<const __m256i*>(p1)), 1)};
}
inline V load32_lo(const void* p) {
    return {_mm512_zextsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p)))};
}
// Orders the loads around it: those that make v (before it in the source) are issued before
// the loads after it. GCC schedules a row's loads in any order, and the order matters to the
// hardware prefetchers when the row streams from DRAM: with the steps of a q8_0 group loaded
// from the sixth on, Zen 5 read 1.25x slower than in address order (1 thread).
// The asm's operand is a copy: with v itself, an element of the caller's array of steps, GCC
// kept the array in memory too, storing every step to the stack. Without those stores the
// unit-lane matvecs took 0.68-0.9x the time from L2 on Sapphire Rapids (AVX2 and AVX-512) and
// 0.7-0.88x on Zen 5 (AVX2).
TANDEM_ALWAYS_INLINE void keep_load_order(V& v) {
    __m512i x = v.x;
    asm volatile("" : "+v"(x) : : "memory");
    v = {x};
}
inline V bcast32(const void* p) {
    return {_mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)))};
}
inline V and_(V a, V b) {
    return {_mm512_and_si512(a.x, b.x)};
}
inline V or_(V a, V b) {
    return {_mm512_or_si512(a.x, b.x)};
}
inline V xor_(V a, V b) {
    return {_mm512_xor_si512(a.x, b.x)};
}
inline V add32(V a, V b) {
    return {_mm512_add_epi32(a.x, b.x)};
}
inline V sub32(V a, V b) {
    return {_mm512_sub_epi32(a.x, b.x)};
}
// Each byte's kWidth-bit field at bit from0 (the first 32 bytes) or from1 (the last 32), moved
// to bit kTo, the other bits cleared: a shift of the 16-bit lanes and a mask (within a byte the
// field moves whole). The kernels' fields move the same way in both halves: one shift, right or
// left. (A rotate of the dwords does any mix in one, but measured 1.05-1.1x the time at C = 8
// on Zen 5.)
template <int kWidth, int kTo>
TANDEM_ALWAYS_INLINE V bits_to(V a, int from0, int from1) {
    const auto counts = [](int n0, int n1) {  // (negative: none)
        return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(n0 > 0 ? n0 : 0)),
                                  _mm256_set1_epi16(static_cast<short>(n1 > 0 ? n1 : 0)), 1);
    };
    const int right0 = from0 - kTo, right1 = from1 - kTo;
    __m512i x = a.x;
    if (right0 > 0 || right1 > 0) x = _mm512_srlv_epi16(x, counts(right0, right1));
    if (right0 < 0 || right1 < 0) x = _mm512_sllv_epi16(x, counts(-right0, -right1));
    return {_mm512_and_si512(x, _mm512_set1_epi8(((1 << kWidth) - 1) << kTo))};
}
// Byte i -> table[byte i & 15] (bytes must be 0..15).
inline V lookup16(V idx, __m128i table) {
    return {_mm512_shuffle_epi8(_mm512_broadcast_i32x4(table), idx.x)};
}
// [low nibbles of p0[0..15], high nibbles of p0, low of p1[0..15], high of p1]: two q4-packed
// 32-value blocks in value order.
// The 16-byte halves go to their lanes as broadcast loads (the second one masked): no
// shuffle-port work, which the lookups and scales of the same step need.
inline V nibbles16x2(const uint8_t* p0, const uint8_t* p1) {
    const __m512i z = _mm512_mask_broadcast_i32x4(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0))), 0xFF00,
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)));
    const __m512i counts = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                             0x0004000400040004, 0x0004000400040004);
    return {_mm512_and_si512(_mm512_srlv_epi16(z, counts), _mm512_set1_epi8(15))};
}
// [low nibbles of p[0..31], high nibbles of p[0..31]] (q4_K / q5_K order).
inline V nibbles32(const uint8_t* p) {
    return bits_to<4, 0>(bcast32(p), 0, 4);
}
// nvfp4 order: 8-byte groups g = 0..3 of p, each as [low nibbles, high nibbles].
inline V nibbles8x4(const uint8_t* p) {
    const __m512i z = _mm512_permutexvar_epi64(
        _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3),
        _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
    const __m512i counts = _mm512_setr_epi64(0, 0x0004000400040004, 0, 0x0004000400040004, 0,
                                             0x0004000400040004, 0, 0x0004000400040004);
    return {_mm512_and_si512(_mm512_srlv_epi16(z, counts), _mm512_set1_epi8(15))};
}
// Byte j (of 64) = 0xff where bit j of (m1:m0) is set.
inline V bits_to_bytes(uint32_t m0, uint32_t m1) {
    return {_mm512_movm_epi8(static_cast<__mmask64>(m0) | static_cast<__mmask64>(m1) << 32)};
}

// Two 32-value units of activations in "bit order", the order legacy_unit_lanes.h's
// decode_unit_lanes gives q1_0's bits in: dword t of a unit = its values 8 m + t (m < 4).
inline V to_bit_order(V q) {
    // per 16 values: word k = (value k, value 8 + k) ...
    const __m512i pairs =
        _mm512_shuffle_epi8(q.x, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4,
                                                                      12, 5, 13, 6, 14, 7, 15)));
    // ... words 0-3 of both 16-value halves of a unit side by side, then words 4-7 ...
    const __m512i halves =
        _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 1, 3, 4, 6, 5, 7), pairs);
    // ... and dword k = word k of the first half, then of the second
    return {
        _mm512_shuffle_epi8(halves, _mm512_broadcast_i32x4(_mm_setr_epi8(
                                        0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15)))};
}
// Two 32-value units of activations in "crumb order", the order q2_0's code bytes decode in
// (legacy_unit_lanes.h's decode_unit_lanes): byte 8k + m of a unit = its value 4m + k (crumb k
// of code byte m).
inline V to_crumb_order(V q) {
    const __m512i t = _mm512_shuffle_epi8(  // per 16 values: dword k = values 4m + k of its 4 m
        q.x, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7,
                                                  11, 15)));
    return {_mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15), t)};
}
// acc + sums of 4 products u[i] * s[i] (u unsigned, s signed) per int32 lane.
inline V dot4(V acc, V u, V s) {
#if defined(__AVX512VNNI__)
    return {_mm512_dpbusd_epi32(acc.x, u.x, s.x)};
#else
    return {_mm512_add_epi32(
        acc.x, _mm512_madd_epi16(_mm512_maddubs_epi16(u.x, s.x), _mm512_set1_epi16(1)))};
#endif
}
// s negated in the lanes of a mask (the negative weights' lanes).
using SignMask = __mmask64;
inline V negate_where(V s, SignMask negative) {
    return {_mm512_mask_sub_epi8(s.x, negative, _mm512_setzero_si512(), s.x)};
}
// |w| and s with the sign of w: vpmaddubsw needs an unsigned operand (AVX-512 has no vpsignb).
inline void sign_split(V w, V s, V& abs_w, V& signed_s) {
    abs_w.x = _mm512_abs_epi8(w.x);
    signed_s = negate_where(s, _mm512_movepi8_mask(w.x));
}
// acc + sum over pairs of (u * s products, as int16) * sc16 per int32 lane: sub-block scales
// applied in integers (the k-quants).
inline Acc dot_scaled(Acc acc, V u, V s, V sc16) {
    const __m512i p = _mm512_maddubs_epi16(u.x, s.x);
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, p, sc16.x);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc16.x));
#endif
}
inline Acc acc_zero() {
    return _mm512_setzero_si512();
}
// A super-block's sub-block scales, one per kSub values (16 or 8 int16 lanes), in memory: a
// step's scales (one 128-bit half of them) come to every 128-bit lane by a broadcast load (the
// load ports) and to their int16 lanes by one vpshufb (pick_scales), where a vpermw from the
// register takes the shuffle port twice in llvm-mca's model of Intel's. Sapphire Rapids, 16
// threads, two ABBA runs of 4 and 6 a side: q6_K's matvec from L2 0.90-0.93x the time, q3_K
// 0.98x, iq4_xs, iq2_s and the other i-quants 0.95-1.04x, the small matmuls level.
template <int kSub>
struct SubBlockScales {
    alignas(32) int16_t v[16];
};
template <int kSub>
SubBlockScales<kSub> sub_block_scales(__m256i values) {
    SubBlockScales<kSub> s;
    if constexpr (kSub == 16) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(s.v), values);
    } else {  // (8 scales: lanes 8..15 of values are not read)
        _mm_store_si128(reinterpret_cast<__m128i*>(s.v), _mm256_castsi256_si128(values));
    }
    asm("" : "+m"(s.v));  // (else GCC takes the halves from the register, on the shuffle port)
    return s;
}
// The scales of step j (values 64j..64j+63) per int16 lane of a maddubs result.
inline VF cvt(V v) {
    return {_mm512_cvtepi32_ps(v.x)};
}
inline VF mul(VF a, VF b) {
    return {_mm512_mul_ps(a.x, b.x)};
}
// acc + x * s, lane by lane: one fma on the accumulator's dependency chain.
inline FAcc add_product(FAcc acc, VF x, VF s) {
    return _mm512_fmadd_ps(x.x, s.x, acc);
}
inline FAcc facc_zero() {
    return _mm512_setzero_ps();
}
// 16 floats at p; the 16 IEEE halves at p as floats.
inline VF load16f(const float* p) {
    return {_mm512_loadu_ps(p)};
}
inline __m256 fold(FAcc a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}
inline __m256i fold(Acc a) {
    return _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
}
// The integer sums of two columns, folded: [fold(a), fold(b)].
TANDEM_ALWAYS_INLINE __m512i fold_pair(Acc a, Acc b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
// An integer accumulator whose fold() is x.
inline Acc acc_low(__m256i x) {
    return _mm512_zextsi256_si512(x);
}
// Per 128-bit lane, the 4 x 4 matrix of int32 whose rows are a, b, c, d transposed: lane L of
// the new a is [dword 0 of a, b, c, d's lane L], of the new b their dwords 1, and so on.
TANDEM_ALWAYS_INLINE void transpose4_in_lanes(V& a, V& b, V& c, V& d) {
    const __m512i t0 = _mm512_unpacklo_epi32(a.x, b.x), t1 = _mm512_unpackhi_epi32(a.x, b.x);
    const __m512i t2 = _mm512_unpacklo_epi32(c.x, d.x), t3 = _mm512_unpackhi_epi32(c.x, d.x);
    a.x = _mm512_unpacklo_epi64(t0, t2);
    b.x = _mm512_unpackhi_epi64(t0, t2);
    c.x = _mm512_unpacklo_epi64(t1, t3);
    d.x = _mm512_unpackhi_epi64(t1, t3);
}
// The 128-bit lanes dealt: a = [a's lanes 0, 2, b's lanes 0, 2], b = [a's 1, 3, b's 1, 3].
TANDEM_ALWAYS_INLINE void deal_lanes(V& a, V& b) {
    const __m512i even = _mm512_shuffle_i32x4(a.x, b.x, _MM_SHUFFLE(2, 0, 2, 0));
    b.x = _mm512_shuffle_i32x4(a.x, b.x, _MM_SHUFFLE(3, 1, 3, 1));
    a.x = even;
}

#else  // AVX2: two ymm per V

struct V {
    __m256i lo, hi;
};
struct VF {
    __m256 lo, hi;
};
using Acc = __m256i;
using FAcc = __m256;

inline __m256i loadu(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline V zero() {
    return {_mm256_setzero_si256(), _mm256_setzero_si256()};
}
inline V set1_8(uint8_t b) {
    const __m256i x = _mm256_set1_epi8(static_cast<char>(b));
    return {x, x};
}
inline V load64(const void* p) {
    return {loadu(p), loadu(static_cast<const uint8_t*>(p) + 32)};
}
inline V load32x2(const void* p0, const void* p1) {
    return {loadu(p0), loadu(p1)};
}
inline V load32_lo(const void* p) {
    return {loadu(p), _mm256_setzero_si256()};
}
// As the AVX-512 keep_load_order.
TANDEM_ALWAYS_INLINE void keep_load_order(V& v) {
    __m256i lo = v.lo, hi = v.hi;
    asm volatile("" : "+x"(lo), "+x"(hi) : : "memory");
    v = {lo, hi};
}
inline V bcast32(const void* p) {
    const __m256i x = loadu(p);
    return {x, x};
}
inline V and_(V a, V b) {
    return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)};
}
inline V or_(V a, V b) {
    return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)};
}
inline V xor_(V a, V b) {
    return {_mm256_xor_si256(a.lo, b.lo), _mm256_xor_si256(a.hi, b.hi)};
}
inline V sub32(V a, V b) {
    return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)};
}
// (The 16-bit lanes shifted by from - kTo, right or left: within a byte the field moves whole.)
template <int kWidth, int kTo>
TANDEM_ALWAYS_INLINE V bits_to(V a, int from0, int from1) {
    const auto half = [](__m256i x, int from) {
        const int right = from - kTo;
        if (right > 0) x = _mm256_srli_epi16(x, right);
        if (right < 0) x = _mm256_slli_epi16(x, -right);
        return _mm256_and_si256(x, _mm256_set1_epi8(((1 << kWidth) - 1) << kTo));
    };
    return {half(a.lo, from0), half(a.hi, from1)};
}
inline V lookup16(V idx, __m128i table) {
    const __m256i t = _mm256_broadcastsi128_si256(table);
    return {_mm256_shuffle_epi8(t, idx.lo), _mm256_shuffle_epi8(t, idx.hi)};
}
// One q4-packed block (16 bytes) as 32 values in order: the bytes in both 128-bit lanes (a
// broadcast load), the high lane's shifted by 4. (No shuffle: an insert took the shuffle port.)
inline __m256i nibbles16(const uint8_t* p) {
    const __m256i x =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi8(15));
}
inline V nibbles16x2(const uint8_t* p0, const uint8_t* p1) {
    return {nibbles16(p0), nibbles16(p1)};
}
inline V nibbles32(const uint8_t* p) {
    __m256i x = loadu(p);
    asm("" : "+x"(x));  // one load (GCC loads the bytes again into the vpand)
    const __m256i m = _mm256_set1_epi8(15);
    return {_mm256_and_si256(x, m), _mm256_and_si256(_mm256_srli_epi16(x, 4), m)};
}
// (Each 8-byte group twice, one vpermq per 16 groups' bytes, then the second copy shifted by 4:
// two shuffles where unpacking the nibbles and moving the lanes took four.)
inline V nibbles8x4(const uint8_t* p) {
    const __m256i x = loadu(p), counts = _mm256_setr_epi64x(0, 4, 0, 4);
    const auto half = [&](__m256i twice) {
        return _mm256_and_si256(_mm256_srlv_epi64(twice, counts), _mm256_set1_epi8(15));
    };
    return {half(_mm256_permute4x64_epi64(x, 0x50)), half(_mm256_permute4x64_epi64(x, 0xFA))};
}
// Byte j = 0xff where bit j % 8 of byte `from` (of its 128-bit lane of b) is set, else 0, where
// `from` is byte j of `from_bytes` (the same for the 8 bytes of a group). Byte j gets byte
// `from`, then all other bits of its 8-byte group's pattern set: all ones exactly when bit
// j % 8 was set.
inline __m256i spread_bits(__m256i b, __m256i from_bytes) {
    const __m256i spread = _mm256_shuffle_epi8(b, from_bytes);
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}
// Byte j = 0xff where bit j of the 32 bits at byte kFirst of each 128-bit lane of b is set.
template <int kFirst>
inline __m256i spread_bits(__m256i b) {
    constexpr long long kOnes = 0x0101010101010101, k = kFirst * kOnes;
    return spread_bits(b, _mm256_setr_epi64x(k, k + kOnes, k + 2 * kOnes, k + 3 * kOnes));
}
inline __m256i bits_to_bytes32(uint32_t m) {
    return spread_bits<0>(_mm256_set1_epi32(static_cast<int>(m)));
}
inline V bits_to_bytes(uint32_t m0, uint32_t m1) {
    return {bits_to_bytes32(m0), bits_to_bytes32(m1)};
}
// The 64 bits of x's low quadword: one broadcast for both halves.
inline V bits_to_bytes(__m128i x) {
    const __m256i b = _mm256_broadcastq_epi64(x);
    return {spread_bits<0>(b), spread_bits<4>(b)};
}

// Bit order here: per 32 values (a unit) by planes, byte 4k + i = value 8i + k of the unit,
// the order legacy_unit_lanes.h's decode_unit_lanes gives q1_0's bits in.
inline V to_bit_order(V q) {
    const auto unit = [](__m256i x) {
        // per 16 values: word k = (value k, value 8 + k) ...
        const __m256i planes = _mm256_shuffle_epi8(
            x, _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9,
                                2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
        // ... words 0-3 of both halves in the low 128 bits, 4-7 in the high ...
        const __m256i halves = _mm256_permute4x64_epi64(planes, 0xD8);
        // ... and dword k = word k of the first half, then of the second
        return _mm256_shuffle_epi8(
            halves, _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1, 8,
                                     9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
    };
    return {unit(q.lo), unit(q.hi)};
}
// Crumb order here: as with AVX-512, a ymm per unit.
inline V to_crumb_order(V q) {
    const auto unit = [](__m256i x) {
        const __m256i t = _mm256_shuffle_epi8(
            x, _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12,
                                1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
        return _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    };
    return {unit(q.lo), unit(q.hi)};
}

inline __m256i dot4(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
inline V dot4(V acc, V u, V s) {
    return {dot4(acc.lo, u.lo, s.lo), dot4(acc.hi, u.hi, s.hi)};
}
inline void sign_split(V w, V s, V& abs_w, V& signed_s) {
    abs_w = {_mm256_sign_epi8(w.lo, w.lo), _mm256_sign_epi8(w.hi, w.hi)};
    signed_s = {_mm256_sign_epi8(s.lo, w.lo), _mm256_sign_epi8(s.hi, w.hi)};
}
// s with the signs of the weights at w, read by vpsignb from memory (in asm: GCC would load w
// once into a register for all the columns that use it, and spill).
TANDEM_ALWAYS_INLINE __m256i sign_from(__m256i s, const __m256i& w) {
    __m256i r;
    asm("vpsignb %2, %1, %0" : "=x"(r) : "x"(s), "m"(w));
    return r;
}
using SignMask = int;  // (AVX2 takes the signs from the weights by vpsignb: sign_split)
inline Acc dot_scaled(Acc acc, V u, V s, V sc16) {
    acc = dpwssd(acc, _mm256_maddubs_epi16(u.lo, s.lo), sc16.lo);
    return dpwssd(acc, _mm256_maddubs_epi16(u.hi, s.hi), sc16.hi);
}
inline Acc acc_zero() {
    return _mm256_setzero_si256();
}
template <int kSub>
struct SubBlockScales;
// 16-value sub-blocks: a ymm takes two scales (one per 128-bit lane), one vpshufb each.
template <>
struct SubBlockScales<16> {
    __m256i v0, v1;  // scales 0..7 and 8..15, each broadcast to both 128-bit lanes
};
// 32-value sub-blocks: a ymm takes one scale, a dword broadcast from memory (the load ports
// only: the vpshufb it replaces took the shuffle port, which the decode needs too).
template <>
struct SubBlockScales<32> {
    alignas(16) int32_t pair[8];  // scale i in both int16 halves of dword i
};
template <int kSub>
SubBlockScales<kSub> sub_block_scales(__m256i values) {
    SubBlockScales<kSub> s;
    if constexpr (kSub == 16) {
        s.v0 = _mm256_permute2x128_si256(values, values, 0x00);
        s.v1 = _mm256_permute2x128_si256(values, values, 0x11);
    } else {
        const __m128i x = _mm256_castsi256_si128(values);
        _mm_store_si128(reinterpret_cast<__m128i*>(s.pair), _mm_unpacklo_epi16(x, x));
        _mm_store_si128(reinterpret_cast<__m128i*>(s.pair + 4), _mm_unpackhi_epi16(x, x));
        // (GCC would otherwise take the dwords from the register: an extract and a broadcast,
        // both on the shuffle port)
        asm("" : "+m"(s.pair));
    }
    return s;
}
inline VF cvt(V v) {
    return {_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)};
}
inline VF mul(VF a, VF b) {
    return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
// acc + x * s (the two halves' products summed first, one fused): one add on the chain.
inline FAcc add_product(FAcc acc, VF x, VF s) {
    return _mm256_add_ps(acc, _mm256_fmadd_ps(x.hi, s.hi, _mm256_mul_ps(x.lo, s.lo)));
}
inline FAcc facc_zero() {
    return _mm256_setzero_ps();
}
inline VF load16f(const float* p) {
    return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
inline __m256 fold(FAcc a) {
    return a;
}
inline __m256i fold(Acc a) {
    return a;
}
inline Acc acc_low(__m256i x) {
    return x;
}

#endif

// Step j of a super-block covers values 64j..64j+63, one 16-value quarter per 16 bytes of V;
// each int16 lane of the maddubs result takes its sub-block's scale: with 16-value sub-blocks
// (kSub = 16) scale 4j + quarter of 16, with 32-value sub-blocks scale 2j + quarter / 2 of 8.
// from_bytes (ByteScales below): the patterns pick each int16 lane from scale bytes.
struct StepPatterns {
    alignas(64) uint8_t bytes[2][4][64];  // [kSub == 32][step]
};
consteval StepPatterns make_step_patterns(bool from_bytes) {
    StepPatterns p{};
    for (int sub32 = 0; sub32 < 2; ++sub32) {
        for (int j = 0; j < 4; ++j) {
            for (int i = 0; i < 64; ++i) {
                const int scale = sub32 ? 2 * j + i / 32 : 4 * j + i / 16;
                int index;
                if (from_bytes) {
                    // vpshufb: the scale's byte, then a zero byte (index 0x80)
                    index = i % 2 == 0 ? scale : 0x80;
                } else {
                    // vpshufb within a broadcast 128-bit half holding 8 int16 scales
                    index = 2 * (scale % 8) + i % 2;
                }
                p.bytes[sub32][j][i] = static_cast<uint8_t>(index);
            }
        }
    }
    return p;
}
inline constexpr StepPatterns kStepPatterns = make_step_patterns(false);

template <int kStep, int kSub>
V pick_scales(const SubBlockScales<kSub>& s) {
    const uint8_t* pattern = kStepPatterns.bytes[kSub == 32 ? 1 : 0][kStep];
#if defined(TANDEM_SIMD_ZMM)
    const __m512i half = _mm512_broadcast_i32x4(
        _mm_load_si128(reinterpret_cast<const __m128i*>(s.v + (kSub == 16 && kStep >= 2 ? 8 : 0))));
    return {_mm512_shuffle_epi8(half, _mm512_load_si512(pattern))};
#else
    if constexpr (kSub == 32) {
        return {_mm256_set1_epi32(s.pair[2 * kStep]), _mm256_set1_epi32(s.pair[2 * kStep + 1])};
    } else {
        const __m256i src = kStep < 2 ? s.v0 : s.v1;
        const auto half = [&](int at) {
            return _mm256_shuffle_epi8(
                src, _mm256_load_si256(reinterpret_cast<const __m256i*>(pattern + at)));
        };
        return {half(0), half(32)};
    }
#endif
}

// Sub-block scales that are unsigned bytes (q2_K; q4_K, q5_K), AVX2: the 16 scale bytes in both
// 128-bit lanes, and per half step one vpshufb that makes each int16 lane from its scale byte
// and a zero (index 0x80), without widening the scales to int16 first. SubBlockScales took,
// per super-block, a vpmovzxbw and two vperm2i128 before q2_K's 8 vpshufb, and a vpmovzxbw, two
// unpacks and two stores before q4_K's 8 dword broadcasts from memory. Against it the matvecs
// took, from L2: q2_K 0.89x the time on Zen 3, 0.96x on Sapphire Rapids (AVX2 variant, 16
// threads; 0.70x at one thread); q4_K 0.88-0.89x on Zen 3, whose broadcasts take a vector pipe
// as a vpshufb does, but 1.03-1.06x on Sapphire Rapids, whose broadcasts take a load port and
// vpshufb its one shuffle port (q5_K the same). Signed scales (q3_K, q6_K, iq4_xs) stay there.
// AVX-512 takes the same from the 16 bytes in all four 128-bit lanes: one vpshufb a step where
// SubBlockScales took a vpermw then (two operations on Intel's shuffle port, llvm-mca's Ice Lake
// model: q2_K, q4_K matvecs 2-6% fewer cycles). Sapphire Rapids, 16 threads: q2_K matvec
// 0.89-0.92x the time, q4_K 0.92-0.96x, their small matmuls level (one noisy run, medians of 5).
#if defined(TANDEM_SIMD_ZMM)
using ScaleByteLanes = __m512i;
inline ScaleByteLanes scale_byte_lanes(__m128i bytes) {
    return _mm512_broadcast_i32x4(bytes);
}
#else
using ScaleByteLanes = __m256i;
inline ScaleByteLanes scale_byte_lanes(__m128i bytes) {
    return _mm256_broadcastsi128_si256(bytes);
}
#endif
template <int kSub>
struct ByteScales {
    ScaleByteLanes bytes;  // scale i in byte i of each 128-bit lane
};
inline constexpr StepPatterns kByteStepPatterns = make_step_patterns(true);
template <int kStep, int kSub>
V pick_scales(const ByteScales<kSub>& s) {
    const uint8_t* pattern = kByteStepPatterns.bytes[kSub == 32][kStep];
#if defined(TANDEM_SIMD_ZMM)
    return {_mm512_shuffle_epi8(s.bytes, _mm512_load_si512(pattern))};
#else
    return {
        _mm256_shuffle_epi8(s.bytes, _mm256_load_si256(reinterpret_cast<const __m256i*>(pattern))),
        _mm256_shuffle_epi8(s.bytes,
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(pattern + 32)))};
#endif
}
#if !defined(TANDEM_SIMD_ZMM)
// Byte i of each 128-bit lane as int16 lane i of the ymm (lanes 0..7: bytes 0..7 of the low
// lane, 8..15: bytes 8..15 of the high lane), when the 16 bytes are in both lanes already: one
// vpshufb (vpmovzxbw from an xmm: 3 Zen 3 slots).
inline __m256i widen_u8_in_lanes(__m256i bytes_in_both_lanes) {
    return _mm256_shuffle_epi8(
        bytes_in_both_lanes, _mm256_setr_epi8(0, -128, 1, -128, 2, -128, 3, -128, 4, -128, 5, -128,
                                              6, -128, 7, -128, 8, -128, 9, -128, 10, -128, 11,
                                              -128, 12, -128, 13, -128, 14, -128, 15, -128));
}
#endif

// Small weights times their 16-value sub-block's scale, as bytes (q2_K: u <= 3, s <= 15): a
// table of 0, s, 2s, 3s per sub-block, and per step one vpshufb of u in it (each 16 bytes of V
// are one sub-block). The small matmul then needs one vpdpbusd per column instead of vpmaddubsw
// and vpmaddwd with the scales.
struct Multiples {
#if defined(TANDEM_SIMD_ZMM)
    __m512i v;  // dword i: bytes 0, s_i, 2 s_i, 3 s_i
#else
    __m256i v0, v1;  // the same for sub-blocks 0..7 and 8..15
#endif
};
// From the 16 scales (bytes, each at most 42 so that 3 s fits a byte without carries).
inline Multiples multiples_of(__m128i scales) {
    const int bytes_0123 = 0x03020100;  // a dword times this: its bytes times 0, 1, 2, 3
#if defined(TANDEM_SIMD_ZMM)
    return {_mm512_mullo_epi32(_mm512_cvtepu8_epi32(scales), _mm512_set1_epi32(bytes_0123))};
#else
    const __m256i k = _mm256_set1_epi32(bytes_0123);
    return {_mm256_mullo_epi32(_mm256_cvtepu8_epi32(scales), k),
            _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(scales, scales)), k)};
#endif
}
// u (bytes 0..3) of step kStep times the scales of their sub-blocks 4 kStep + quarter.
template <int kStep>
V times_scales(const Multiples& m, V u) {
    constexpr int s = 4 * kStep;
#if defined(TANDEM_SIMD_ZMM)
    const __m512i table = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(s, s, s, s, s + 1, s + 1, s + 1, s + 1, s + 2, s + 2, s + 2, s + 2,
                          s + 3, s + 3, s + 3, s + 3),
        m.v);
    return {_mm512_shuffle_epi8(table, u.x)};
#else
    const __m256i src = kStep < 2 ? m.v0 : m.v1;
    constexpr int t = s % 8;
    const __m256i lo =
        _mm256_permutevar8x32_epi32(src, _mm256_setr_epi32(t, 0, 0, 0, t + 1, 0, 0, 0));
    const __m256i hi =
        _mm256_permutevar8x32_epi32(src, _mm256_setr_epi32(t + 2, 0, 0, 0, t + 3, 0, 0, 0));
    return {_mm256_shuffle_epi8(lo, u.lo), _mm256_shuffle_epi8(hi, u.hi)};
#endif
}

// Horizontal sums of float lanes, in a fixed order.
inline float hsum4(__m128 x) {
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
inline float hsum8(__m256 y) {
    return hsum4(_mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1)));
}
inline float hsum(FAcc a) {
    return hsum8(fold(a));
}

// Sum of 8 int32 lanes.
inline int hsum_i32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 1));
    return _mm_cvtsi128_si32(x);
}

// ---------------------------------------------------------------- i-quant helpers
// (simd_iquants.cpp): vectors built from looked-up grid points, and sign patterns applied to
// activations.


#if defined(TANDEM_SIMD_ZMM)
// Bytes 8i..8i+7 = g[i], one broadcast load per point merged under a mask (a load and an
// operation on port 0 or 5 each), where vmovq, vpinsrq and the inserts of the halves put seven
// operations a vector on port 5 alone (Sapphire Rapids, one thread, in L2, minimums of 6 ABBA
// rounds on two CPUs, with iq2_s's indices by pdep: matvecs iq1_m 0.83-0.86x the time, iq1_s
// 0.88-0.90x, iq2_xxs 0.86-0.94x, iq2_xs 0.96-0.98x; C = 8 0.84-0.95x, iq2_xxs and iq2_xs
// 0.97-1.05x). Eight points need 7 masks where 16 (set_u32x16) need 15: there the chains lost.
inline V set_u64x8(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint64_t g4, uint64_t g5,
                   uint64_t g6, uint64_t g7) {
    const auto put = [](__m512i x, int i, uint64_t g) {
        return _mm512_mask_set1_epi64(x, static_cast<__mmask8>(1u << i), static_cast<long long>(g));
    };
    __m512i x = _mm512_set1_epi64(static_cast<long long>(g0));
    x = put(put(put(x, 1, g1), 2, g2), 3, g3);
    x = put(put(put(put(x, 4, g4), 5, g5), 6, g6), 7, g7);
    return {x};
}
// Which of 64 bytes to negate.
struct Signs {
    __mmask64 m;
};
// Negate byte j where bit j of bits is set.
inline Signs signs_of_bits(uint64_t bits) {
    return {static_cast<__mmask64>(bits)};
}
// Negate byte j where bit j of x's low quadword is set.
inline Signs signs_of_bits(__m128i x) {
    return signs_of_bits(static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
}
inline V apply_signs(V q, Signs s) {
    return {_mm512_mask_sub_epi8(q.x, s.m, _mm512_setzero_si512(), q.x)};
}
#else
// Two inserts (vmovq, vpinsrq) per 128 bits and a vinserti128. Against broadcast loads blended
// in a tree (as blend_u32x8: 5-7% faster for iq2_xxs on Sapphire Rapids at the time), on Zen 3,
// whose broadcast loads take a shuffle pipe each: matvecs 0.92-0.98x the time (iq2_xxs with
// its signs in vectors, iq2_xs, iq2_s), C = 8 0.89-1.0x.
inline __m256i set_u64x4(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3) {
    return _mm256_set_epi64x(static_cast<long long>(g3), static_cast<long long>(g2),
                             static_cast<long long>(g1), static_cast<long long>(g0));
}
inline V set_u64x8(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint64_t g4, uint64_t g5,
                   uint64_t g6, uint64_t g7) {
    return {set_u64x4(g0, g1, g2, g3), set_u64x4(g4, g5, g6, g7)};
}
// Nonzero bytes: negative where the value is negated (vpsignb's operand).
struct Signs {
    V s;
};
// Negate byte j where bit j of x's low quadword is set.
inline Signs signs_of_bits(__m128i x) {
    return {or_(bits_to_bytes(x), set1_8(1))};
}
inline Signs signs_of_bits(uint64_t bits) {
    return signs_of_bits(_mm_cvtsi64_si128(static_cast<long long>(bits)));
}
inline V apply_signs(V q, Signs s) {
    return {_mm256_sign_epi8(q.lo, s.s.lo), _mm256_sign_epi8(q.hi, s.s.hi)};
}
#endif
// Every int16 lane = x.
inline V set1_16(int16_t x) {
#if defined(TANDEM_SIMD_ZMM)
    return {_mm512_set1_epi16(x)};
#else
    return {_mm256_set1_epi16(x), _mm256_set1_epi16(x)};
#endif
}
// [lo, hi] as one V.
inline V join(__m256i lo, __m256i hi) {
#if defined(TANDEM_SIMD_ZMM)
    return {_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)};
#else
    return {lo, hi};
#endif
}
// Bytes 4i..4i+3 = g[i] of 8 points. When g[i] are loads (grid points) they become broadcast
// loads (load ports only) blended in a tree (any vector ALU port): no shuffle-port operation,
// where pairing in GPRs and vpinsrq take seven per 16 points. With AVX-512 iq3_s 10-14% and
// iq3_xxs 5% faster on Zen 5, more on Sapphire Rapids; with AVX2 iq3_xxs, iq3_s 3-5% on
// Sapphire Rapids. (AVX-512's lookup_u64x8 does not gain from it: iq1_s and iq2_xs, which used
// it then, lost 13-17% on Zen 5.) With AVX-512 GCC copies the broadcasts it puts in registers
// 16..31 back to 0..15 (vpblendd has no EVEX form); building set_u32x16 from masked broadcast
// loads instead took iq3_s and iq3_xxs 1.14-1.28x the time on Sapphire Rapids (kernels README).
inline __m256i blend_u32x8(const uint32_t* g) {
    const auto at = [&](int i) { return _mm256_set1_epi32(static_cast<int>(g[i])); };
    const __m256i a = _mm256_blend_epi32(_mm256_blend_epi32(at(0), at(1), 0x02),
                                         _mm256_blend_epi32(at(2), at(3), 0x08), 0x0C);
    const __m256i b = _mm256_blend_epi32(_mm256_blend_epi32(at(4), at(5), 0x20),
                                         _mm256_blend_epi32(at(6), at(7), 0x80), 0xC0);
    return _mm256_blend_epi32(a, b, 0xF0);
}
inline V set_u32x16(const uint32_t (&g)[16]) {
#if defined(TANDEM_SIMD_ZMM)
    return {_mm512_inserti64x4(_mm512_castsi256_si512(blend_u32x8(g)), blend_u32x8(g + 8), 1)};
#else
    return {blend_u32x8(g), blend_u32x8(g + 8)};
#endif
}

// The uint16 lanes of a vector as scalars, for table lookups: the vector leaves as 64-bit
// moves and the lanes are split with shifts. Per-lane extracts (vpextrw, what a store and
// reload of the lanes compiles to) take the shuffle port the vector build needs; a real store
// and reload (the asm forcing it) made iq3_s's AVX2 matvec 1.2x the time on Zen 3, the reloads
// waiting for the store.
template <int kQuads>
struct Lanes16 {
    uint64_t quad[kQuads];
    uint32_t operator[](int i) const {
        return static_cast<uint32_t>(quad[i / 4] >> (16 * (i % 4))) & 0xffff;
    }
};
inline Lanes16<2> lanes16(__m128i x) {
    return {{static_cast<uint64_t>(_mm_cvtsi128_si64(x)),
             static_cast<uint64_t>(_mm_extract_epi64(x, 1))}};
}
inline Lanes16<4> lanes16(__m256i x) {
    const Lanes16<2> lo = lanes16(_mm256_castsi256_si128(x)),
                     hi = lanes16(_mm256_extracti128_si256(x, 1));
    return {{lo.quad[0], lo.quad[1], hi.quad[0], hi.quad[1]}};
}

// Grid points by index: bytes 8i..8i+7 = g[uint16 lane i of idx]. Scalar loads: the gathers
// are slower on Zen 4 (iq2_xxs 1.3x, iq3_xxs 1.5x the time per row).
TANDEM_ALWAYS_INLINE V lookup_u64x8(const uint64_t* g, const Lanes16<2>& i) {
    return set_u64x8(g[i[0]], g[i[1]], g[i[2]], g[i[3]], g[i[4]], g[i[5]], g[i[6]], g[i[7]]);
}
TANDEM_ALWAYS_INLINE V lookup_u64x8(const uint64_t* g, __m128i idx) {
    return lookup_u64x8(g, lanes16(idx));
}
#if defined(TANDEM_SIMD_ZMM)
// The 8 grid indices of a step whose low 8 bits are the bytes at q and whose high bits are
// packed in high03 (groups 0..3) and high47: pdep places each in its uint16 lane of two
// general-purpose registers (one cycle on the CPUs the AVX-512 variants run on). kHighBits:
// the high bits' places in the four lanes (0x0300... for 2 bits, 0x0700... for 3).
template <uint64_t kHighBits>
TANDEM_ALWAYS_INLINE Lanes16<2> pdep_indices(const uint8_t* q, uint32_t high03, uint32_t high47) {
    constexpr uint64_t kLow = 0x00FF00FF00FF00FF;
    return {{_pdep_u64(load_u32(q), kLow) | _pdep_u64(high03, kHighBits),
             _pdep_u64(load_u32(q + 4), kLow) | _pdep_u64(high47, kHighBits)}};
}
#endif
// Grid points by index: bytes 4i..4i+3 = g[uint16 lane i of idx].
TANDEM_ALWAYS_INLINE V lookup_u32x16(const uint32_t* g, __m256i idx) {
    const Lanes16<4> i = lanes16(idx);
    const uint32_t pts[16] = {g[i[0]], g[i[1]], g[i[2]],  g[i[3]],  g[i[4]],  g[i[5]],
                              g[i[6]], g[i[7]], g[i[8]],  g[i[9]],  g[i[10]], g[i[11]],
                              g[i[12]], g[i[13]], g[i[14]], g[i[15]]};
    return set_u32x16(pts);
}
// Bytes 8i..8i+7 = pattern where bit i of mask8 is set, else 0.
inline V groups_where(uint32_t mask8, uint64_t pattern) {
    const auto p = static_cast<long long>(pattern);
#if defined(TANDEM_SIMD_ZMM)
    return {_mm512_maskz_mov_epi64(static_cast<__mmask8>(mask8), _mm512_set1_epi64(p))};
#else
    const __m256i m = _mm256_set1_epi64x(mask8);
    const auto part = [&](__m256i bits) {
        return _mm256_and_si256(_mm256_cmpeq_epi64(_mm256_and_si256(m, bits), bits),
                                _mm256_set1_epi64x(p));
    };
    return {part(_mm256_setr_epi64x(1, 2, 4, 8)), part(_mm256_setr_epi64x(16, 32, 64, 128))};
#endif
}
// Each 64-bit lane shifted left by n bits.
inline V sll64(V a, int n) {
#if defined(TANDEM_SIMD_ZMM)
    return {_mm512_slli_epi64(a.x, static_cast<unsigned>(n))};
#else
    return {_mm256_slli_epi64(a.lo, n), _mm256_slli_epi64(a.hi, n)};
#endif
}

// acc + the u * s products summed per int32 lane (no sub-block scales: the ternary formats).
inline Acc dot_unit(Acc acc, V u, V s) {
#if defined(TANDEM_SIMD_ZMM)
    return dot4(V{acc}, u, s).x;
#else
    return dot4(dot4(acc, u.lo, s.lo), u.hi, s.hi);
#endif
}
// Without VNNI, the u * s pairs of a few steps summed in int16 lanes (vpmaddubsw and vpaddw,
// as ggml does: one vpmaddwd per super-block instead of one per step), then widened to int32
// pairs (the same exact sums while they fit int16: u at most 3, 8 pairs a lane per super-block).
inline Acc dot_unit16(Acc acc16, V u, V s) {
#if defined(TANDEM_SIMD_ZMM)
    return _mm512_add_epi16(acc16, _mm512_maddubs_epi16(u.x, s.x));
#else
    return _mm256_add_epi16(_mm256_add_epi16(acc16, _mm256_maddubs_epi16(u.lo, s.lo)),
                            _mm256_maddubs_epi16(u.hi, s.hi));
#endif
}
inline Acc widen16(Acc acc16) {
#if defined(TANDEM_SIMD_ZMM)
    return _mm512_madd_epi16(acc16, _mm512_set1_epi16(1));
#else
    return _mm256_madd_epi16(acc16, _mm256_set1_epi16(1));
#endif
}
inline Acc add_acc(Acc a, Acc b) {
#if defined(TANDEM_SIMD_ZMM)
    return _mm512_add_epi32(a, b);
#else
    return _mm256_add_epi32(a, b);
#endif
}
// dot_unit where a step's two halves' pair sums fit int16 together (u at most 63: q2_K's
// prescaled weights, 3 s <= 45): without VNNI the step is summed in int16 and widened once
// (dot_unit16 for one step): with AVX2 one vpmaddwd and one vpaddd a step, not two each (the same
// exact sums in the same int32 lanes).
inline Acc dot_unit_small(Acc acc, V u, V s) {
    if constexpr (kVnni) return dot_unit(acc, u, s);
    return add_acc(acc, widen16(dot_unit16(acc_zero(), u, s)));
}
// The accumulator through an empty asm: GCC cannot reassociate the sums across it (it would
// keep a step's products live to add them at the end, spilling with 16 registers).
TANDEM_ALWAYS_INLINE void keep_sum(Acc& acc) {
#if defined(TANDEM_SIMD_ZMM)
    asm("" : "+v"(acc));
#else
    asm("" : "+x"(acc));
#endif
}
// Per byte y: floor(3 y / 256), the base-3 digit tq1_0 keeps in the top of y (0, 1 or 2).
inline V trit_of(V y) {
#if defined(TANDEM_SIMD_ZMM)
    // (y > 85) + (y > 170) by compares into masks: one operation fewer than below (the tq1_0
    // matvec 0.93x the time on Sapphire Rapids)
    const __m512i one = _mm512_set1_epi8(1);
    const __m512i t =
        _mm512_maskz_mov_epi8(_mm512_cmpgt_epu8_mask(y.x, _mm512_set1_epi8(85)), one);
    return {_mm512_mask_add_epi8(t, _mm512_cmpgt_epu8_mask(y.x, _mm512_set1_epi8(-86)), t, one)};
#else
    const auto half = [](__m256i x) {
        const __m256i one = _mm256_set1_epi8(1);
        return _mm256_add_epi8(
            _mm256_min_epu8(_mm256_subs_epu8(x, _mm256_set1_epi8(85)), one),
            _mm256_min_epu8(_mm256_subs_epu8(x, _mm256_set1_epi8(-86)), one));
    };
    return {half(y.lo), half(y.hi)};
#endif
}

// ---------------------------------------------------------------- end of i-quant helpers

}  // namespace tandem::TANDEM_VARIANT_NS::simd

#endif  // x86 (NEON: simd_neon.h)
