// SIMD dot-product tiles for the 256-value super-block formats against q8_K activations:
// q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs. Per super-block, four steps of 64 values: the
// weights decode to unsigned bytes u (weight = u - bias) or, for iq4_xs, signed bytes; products
// are summed in int32 with the 16-value sub-block scales applied as int16 (vpmaddubsw then
// vpmaddwd / vpdpwssd); the q8_K bsums give the bias and min terms; the float sums keep 4
// lanes per column ("float sums" below).
#include <array>
#include <type_traits>

#include "formats/float16.h"
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/super_block_tile.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

// A row's super-block, prepared once for all columns: sub-block scales (and mins) as int16,
// and the float factors.
struct Prep {
    __m256i sc16;    // scale of sub-block i in int16 lane i (16 or 8 sub-blocks: T::kSub;
                     // T::kByteScales: unset)
    __m256i mn16;    // min of values 16i..16i+15 in int16 lane i (types with mins)
    ScaleByteLanes sc8;  // T::kByteScales: the scale bytes in every 128-bit lane
    __m128 d4;       // d in all 4 lanes
    __m128 dmin4;    // dmin in all 4 lanes (types with mins)
    Multiples mult;  // kPrescaled: the sub-block scales' multiples
};

// The IEEE half at p in all 4 lanes. AVX-512: its value from the table of every half, which
// the compiler folds into the float step as a broadcast memory operand ({1to4}), where the
// half's broadcast and F16C's conversion took three vector operations, two on port 5, which
// with port 0 is all the zmm loops have (Sapphire Rapids, 16 threads, from L2, one noisy
// ABBA of 4 runs a side: q2_K 0.64x the time, q4_K 0.75x, q6_K 0.86x, q3_K 0.88x, iq4_xs
// level; minimums 0.87-0.91x). AVX2 keeps F16C: on Zen 3 the table took 1.04-1.10x the time
// for q4_K and q6_K (a second, dependent load, and the table's lines in L1). (Converted in
// one register with d and dmin side by side, each took a shuffle to spread it over the lanes.)
inline __m128 fp16_splat4(const uint8_t* p) {
#if defined(TANDEM_SIMD_ZMM)
    return _mm_broadcast_ss(&kFp16Values[load_u16(p)]);
#else
    return _mm_cvtph_ps(_mm_set1_epi16(static_cast<short>(load_u16(p))));
#endif
}

// q4_K / q5_K: the eight 6-bit scales and mins packed in 12 bytes (ggml's get_scale_min_k4):
//   j < 4: sc = s[j] & 63, m = s[j+4] & 63; j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
//   m = (s[j+4] >> 4) | (s[j] >> 6) << 4.
// Unpacked into [sc0..sc7] and [m0..m7] in 64-bit general-purpose registers, bytes side by
// side, and moved to the vector unit (two moves where byte shuffles and masks took seven vector
// operations; the vector ports are what the matvecs wait on).
struct ScalesMins {
    uint64_t sc, mn;
};
inline ScalesMins k4_scales_mins(const uint8_t* s) {
    const uint64_t a01 = load_u64(s), a2 = load_u32(s + 8);
    const uint64_t low = a01 & 0x3F3F3F3F3F3F3F3F;  // [sc0..3, m0..3]
    // [sc4..7, m4..7]: the low nibbles of s[8..11], then their high nibbles (a2 << 28 puts
    // a2 >> 4 in the high dword), each with bits 6-7 of s[0..7] as bits 4-5
    const uint64_t high =
        ((a2 | a2 << 28) & 0x0F0F0F0F0F0F0F0F) | ((a01 >> 2) & 0x3030303030303030);
    return {(low & 0xFFFFFFFF) | high << 32, low >> 32 | (high & 0xFFFFFFFF00000000)};
}
// Bytes 8..15 (the mins of 32-value sub-blocks) as int16, each twice: one per 16 values: one
// vpshufb of the bytes in every 128-bit lane (AVX2: the broadcast the scales take too,
// ByteScales; AVX-512: the mins' own 8-byte broadcast, bytes 8..15 repeating 0..7), where
// vpunpckhbw and vpmovzxbw took two shuffles, and from the int16 four.
inline __m256i dup_high8(ScaleByteLanes bytes) {
    constexpr char z = -128;  // (a zero byte)
#if defined(TANDEM_SIMD_ZMM)
    const __m256i both = _mm512_castsi512_si256(bytes);
#else
    const __m256i both = bytes;
#endif
    return _mm256_shuffle_epi8(
        both, _mm256_setr_epi8(8, z, 8, z, 9, z, 9, z, 10, z, 10, z, 11, z, 11, z, 12, z, 12, z, 13,
                               z, 13, z, 14, z, 14, z, 15, z, 15, z));
}

// Traits: prepare(block, Prep&), decode<j>(block) -> the u (or signed) bytes of step j.
//   kSub: values per sub-block scale; kBias: weight = u - kBias (0: none); kMins: x = d * sc *
//   q - dmin * m; kSigned: decode gives signed bytes (sign trick for vpmaddubsw); kPrescaled:
//   u times its scale fits a byte, so the small matmul makes it once per row (times_scales) and
//   dots it with each column by vpdpbusd alone (the same exact sums; the matvec keeps
//   vpmaddubsw + vpmaddwd, 10% faster there on Zen 4).
struct Q2K {
    static constexpr int kBytes = 84, kSub = 16, kBias = 0;
    static constexpr bool kMins = true, kSigned = false, kPrescaled = true;
    static constexpr bool kByteScales = true;
    static void prepare(const uint8_t* b, Prep& p) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
        const __m128i sc = _mm_and_si128(s, _mm_set1_epi8(15));
        p.mult = multiples_of(sc);
#if defined(TANDEM_SIMD_ZMM)
        p.sc8 = scale_byte_lanes(sc);
        p.mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
#else
        // (scales and mins from one broadcast load, no vpmovzxbw: see ByteScales)
        const __m256i x = _mm256_broadcastsi128_si256(s);
        p.sc8 = _mm256_and_si256(x, _mm256_set1_epi8(15));
        p.mn16 = widen_u8_in_lanes(_mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi8(15)));
#endif
        p.d4 = fp16_splat4(b + 80);
        p.dmin4 = fp16_splat4(b + 82);
    }
    // Step j = half n = j / 2, 2-bit groups g0 = 2 (j % 2) and g0 + 1 of qs[32n..32n+31].
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, g0 = 2 * (kJ % 2);
        return bits_to<2, 0>(bcast32(b + 16 + 32 * n), 2 * g0, 2 * g0 + 2);
    }
};
struct Q3K {
    static constexpr int kBytes = 110, kSub = 16, kBias = 4;
    static constexpr bool kMins = false, kSigned = false, kWideDecode = true;
    static void prepare(const uint8_t* b, Prep& p) {
        // 6-bit scales minus 32: low 4 bits from scales[0..7] (low then high nibbles), high 2
        // bits from scales[8..11] (ggml's kmask1 / kmask2 unpacking).
        const uint32_t a0 = load_u32(b + 96), a1 = load_u32(b + 100), a2 = load_u32(b + 104);
        const uint32_t m1 = 0x03030303, m2 = 0x0f0f0f0f;
        const uint32_t t0 = (a0 & m2) | ((a2 >> 0) & m1) << 4;
        const uint32_t t1 = (a1 & m2) | ((a2 >> 2) & m1) << 4;
        const uint32_t t2 = ((a0 >> 4) & m2) | ((a2 >> 4) & m1) << 4;
        const uint32_t t3 = ((a1 >> 4) & m2) | ((a2 >> 6) & m1) << 4;
        const __m128i s = _mm_sub_epi8(_mm_set_epi32(static_cast<int>(t3), static_cast<int>(t2),
                                                     static_cast<int>(t1), static_cast<int>(t0)),
                                       _mm_set1_epi8(32));
        p.sc16 = _mm256_cvtepi8_epi16(s);
        p.d4 = fp16_splat4(b + 108);
    }
    // Low 2 bits as q2_K; bit 4n + g of hmask[l] is the third bit (set: q = low, else low - 4).
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, g0 = 2 * (kJ % 2);
        const V low = bits_to<2, 0>(bcast32(b + 32 + 32 * n), 2 * g0, 2 * g0 + 2);
        return or_(low, bits_to<1, 2>(bcast32(b), 4 * n + g0, 4 * n + g0 + 1));
    }
};
struct Q4K {
    static constexpr int kBytes = 144, kSub = 32, kBias = 0;
    static constexpr bool kMins = true, kSigned = false;
    static constexpr bool kByteScales = true;
    static void prepare(const uint8_t* b, Prep& p) {
#if defined(TANDEM_SIMD_ZMM)
        // The scales and the mins each broadcast from memory (the load ports: 8 bytes, twice in
        // every 128-bit lane), where moving them in (vmovq, vpinsrq) and broadcasting took
        // four operations, three on the shuffle port (Sapphire Rapids, 16 threads, ABBA of 4
        // a side: q4_K's matvec from L2 0.97x the time, q5_K's 0.95x; the rest level). (AVX2 on
        // Zen 3: level, the matvec 1.03x the time.)
        ScalesMins x = k4_scales_mins(b + 4);
        asm("" : "+m"(x));
        p.sc8 = _mm512_set1_epi64(static_cast<long long>(x.sc));
        p.mn16 = dup_high8(_mm512_set1_epi64(static_cast<long long>(x.mn)));
#else
        const ScalesMins x = k4_scales_mins(b + 4);
        p.sc8 = scale_byte_lanes(
            _mm_set_epi64x(static_cast<long long>(x.mn), static_cast<long long>(x.sc)));
        p.mn16 = dup_high8(p.sc8);
#endif
        p.d4 = fp16_splat4(b);
        p.dmin4 = fp16_splat4(b + 2);
    }
    template <int kJ>
    static V decode(const uint8_t* b) {
        return nibbles32(b + 16 + 32 * kJ);
    }
};
struct Q5K {
    static constexpr int kBytes = 176, kSub = 32, kBias = 0;
    static constexpr bool kMins = true, kSigned = false;
    static constexpr bool kByteScales = true;
    static void prepare(const uint8_t* b, Prep& p) { Q4K::prepare(b, p); }
    // Bit 2j (first 32 values) and 2j + 1 (last 32) of qh[l] are bit 4.
    template <int kJ>
    static V decode(const uint8_t* b) {
        const V high = bits_to<1, 4>(bcast32(b + 16), 2 * kJ, 2 * kJ + 1);
        return or_(nibbles32(b + 48 + 32 * kJ), high);
    }
};
struct Q6K {
    static constexpr int kBytes = 210, kSub = 16, kBias = 32;
    static constexpr bool kMins = false, kSigned = false;
    static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
        p.d4 = fp16_splat4(b + 208);
    }
    // Step j = half n, odd = j % 2: low nibbles (odd = 0) or high nibbles of ql[64n..64n+63];
    // 2-bit groups 2 odd and 2 odd + 1 of qh[32n..32n+31] on top.
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, odd = kJ % 2;
        const V low = bits_to<4, 0>(load64(b + 64 * n), 4 * odd, 4 * odd);
        return or_(low, bits_to<2, 4>(bcast32(b + 128 + 32 * n), 4 * odd, 4 * odd + 2));
    }
};
struct Iq4Xs {
    static constexpr int kBytes = 136, kSub = 32, kBias = 0;
    static constexpr bool kMins = false, kSigned = true;
    // ls - 32 per sub-block: low nibbles from scales_l, 2 high bits per sub-block from scales_h.
    static void prepare(const uint8_t* b, Prep& p) {
        p.d4 = fp16_splat4(b);
#if defined(TANDEM_SIMD_ZMM)
        // AVX-512: ls of sub-block i in byte i of a general-purpose register, by two pdep (one
        // cycle each on the CPUs the AVX-512 variants run on), ls - 32 bytewise with the borrows
        // kept in the bytes (bit 7 set first, then put back), then to int16: two vector
        // operations where the unpacking in vector registers took fourteen (with kMagnitudes
        // below, Sapphire Rapids, 16 threads: the matvec 0.72-0.81x the time from L2, 0.86x
        // from DRAM; the small matmul 0.92-0.97x).
        constexpr uint64_t kBit7 = 0x8080808080808080;
        const uint64_t ls = _pdep_u64(load_u32(b + 4), 0x0F0F0F0F0F0F0F0F) |
                            _pdep_u64(load_u16(b + 2), 0x3030303030303030);
        const uint64_t signed_ls = ((ls | kBit7) - 0x2020202020202020) ^ kBit7;
        p.sc16 = _mm256_castsi128_si256(  // (kSub = 32: int16 lanes 8..15 are not read)
            _mm_cvtepi8_epi16(_mm_cvtsi64_si128(static_cast<long long>(signed_ls))));
#else
        // (the high bits placed by multiplying the broadcast scales_h, then taking the top two)
        const __m128i l = _mm_cvtsi32_si128(static_cast<int>(load_u32(b + 4)));
        const __m128i lo =
            _mm_unpacklo_epi8(_mm_and_si128(l, _mm_set1_epi8(15)),
                              _mm_and_si128(_mm_srli_epi16(l, 4), _mm_set1_epi8(15)));
        const __m128i h = _mm_srli_epi16(
            _mm_mullo_epi16(
                _mm_set1_epi16(static_cast<short>(load_u16(b + 2))),
                _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
            14);
        const __m128i ls = _mm_or_si128(_mm_cvtepu8_epi16(lo), _mm_slli_epi16(h, 4));
        p.sc16 = _mm256_inserti128_si256(_mm256_setzero_si256(),
                                         _mm_sub_epi16(ls, _mm_set1_epi16(32)), 0);
#endif
    }
    template <int kJ>
    static V decode(const uint8_t* b) {
        const uint8_t* q = b + 8 + 32 * kJ;
        return lookup16(nibbles16x2(q, q + 16),
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    }
#if defined(TANDEM_SIMD_ZMM)
    // AVX-512 (no vpsignb): |w| from a table of the values' magnitudes and the negative lanes
    // from the indices (the values ascend through 0: negative exactly for indices 0..7), one
    // vptestnmb where sign_split takes vpabsb and vpmovb2m after the lookup.
    template <int kJ>
    static V decode_abs(const uint8_t* b, SignMask& negative) {
        const uint8_t* q = b + 8 + 32 * kJ;
        const V idx = nibbles16x2(q, q + 16);
        negative = _mm512_testn_epi8_mask(idx.x, _mm512_set1_epi8(8));
        return lookup16(idx, _mm_load_si128(reinterpret_cast<const __m128i*>(kMagnitudes.data())));
    }
    // (constant data: made from the values at run time, GCC put the vpabsb and its broadcast
    // in the matvec's loop)
    alignas(16) static constexpr std::array<int8_t, 16> kMagnitudes = [] {
        std::array<int8_t, 16> m{};
        for (int i = 0; i < 16; ++i)
            m[i] = static_cast<int8_t>(kIq4nlValues[i] < 0 ? -kIq4nlValues[i] : kIq4nlValues[i]);
        return m;
    }();
#endif
};

// T::kByteScales: the scales picked from the bytes (ByteScales), not from int16.
template <typename T>
constexpr bool byte_scales() {
    if constexpr (requires { T::kByteScales; }) {
        return T::kByteScales;
    } else {
        return false;
    }
}
// T::decode_abs: the decode gives |w| and a mask of the negative lanes (AVX-512).
template <typename T>
constexpr bool abs_decode() {
    return requires(const uint8_t* b, SignMask& m) { T::template decode_abs<0>(b, m); };
}
template <typename T>
constexpr bool prescaled() {
    if constexpr (requires { T::kPrescaled; }) {
        return T::kPrescaled;
    } else {
        return false;
    }
}

// A row's super-block, prepared once for its four steps and all columns; kScaled: the weights
// come times their scales (T::kPrescaled formats in the small matmul).
template <typename T, bool kScaled>
struct Prepared {
    const uint8_t* b;
    Prep p;
    std::conditional_t<byte_scales<T>(), ByteScales<T::kSub>, SubBlockScales<T::kSub>> sc;
    TANDEM_ALWAYS_INLINE void prepare(const uint8_t* block) {
        b = block;
        T::prepare(b, p);
        if constexpr (!kScaled) {
            if constexpr (byte_scales<T>()) {
                sc = {p.sc8};
            } else {
                sc = sub_block_scales<T::kSub>(p.sc16);
            }
        }
    }
    // Step kJ's weights and the int16 scales of their sub-blocks (kScaled: applied already;
    // abs_decode<T>(): |w|, and the negative lanes in negative).
    template <int kJ>
    TANDEM_ALWAYS_INLINE void step(V& w, V& scale, SignMask& negative) const {
        if constexpr (abs_decode<T>()) {
            w = T::template decode_abs<kJ>(b, negative);
            scale = pick_scales<kJ, T::kSub>(sc);
        } else if constexpr (kScaled) {
            w = times_scales<kJ>(p.mult, T::template decode<kJ>(b));
        } else {
            w = T::template decode<kJ>(b);
            scale = pick_scales<kJ, T::kSub>(sc);
        }
    }
};

// One step of one row against one column: int32 sums of sc * w * q.
template <typename T, bool kScaled>
TANDEM_ALWAYS_INLINE Acc step_dot(Acc acc, V w, V q, V scale, [[maybe_unused]] SignMask negative) {
#if defined(TANDEM_SIMD_ZMM)
    if constexpr (abs_decode<T>()) return dot_scaled(acc, w, negate_where(q, negative), scale);
#endif
    if constexpr (kScaled) {
        return dot_unit_small(acc, w, q);  // (q2_K: 3 s <= 45)
    } else if constexpr (T::kSigned) {
        V abs_w, signed_q;
        sign_split(w, q, abs_w, signed_q);
        return dot_scaled(acc, abs_w, signed_q, scale);
    } else {
        return dot_scaled(acc, w, q, scale);
    }
}

// The sub-block scales times the bias, as int16 lanes.
template <typename T>
__m256i biased_scales(const Prep& p) {
    static_assert((T::kBias & (T::kBias - 1)) == 0);
    return _mm256_slli_epi16(p.sc16, __builtin_ctz(T::kBias));
}

// Rows per small-matmul tile where registers allow; the matvec reads one row at a time.
// T::kWideDecode: the decode holds more registers, and 4 rows at C = 4 spill (q3_K: 8% slower
// on Zen 5 than 2 rows).
template <typename T>
constexpr int k_rows(int cols) {
    constexpr bool wide = requires { T::kWideDecode; };
    if (kRegisters >= 32) return cols <= (wide ? 3 : 4) ? 4 : 2;
    return 1;
}

// ---------------------------------------------------------------- float sums
// A column's float sums are 4 lanes. Per super-block and (row, column): the exact int32 sums
// folded to 4 lanes (lane l: the accumulator's lanes l mod 4), less the bias terms (q3_K, q6_K:
// bias times the scales times the bsums, lane l: the scale pairs l and l + 4), and the min terms
// (q2_K, q4_K, q5_K: the mins times the bsums, in the same lanes) make
//   t = S d - M dmin (one fused multiply-subtract; without mins t = S d), acc += t dy,
// and at the end the lanes are summed in a fixed order. These float steps are the same for a
// column whatever its tile: the tiles put the columns' lanes side by side in a unit (AVX2: two
// columns in a ymm, AVX-512: four in a zmm; the matvec: its one column in an xmm), each lane
// getting exactly the operations it gets alone.
// Measured against one float total per super-block (its horizontal sums): the matvecs take
// 0.81-0.95x the time from L2 on Sapphire Rapids (AVX-512), 0.91-0.96x on Zen 5 (AVX2), the
// small matmul the same. 8 lanes per column made the matvecs faster still (0.78-0.89x) but the
// small matmul slower: its conversions and products, 8 lanes a column, made C = 8 1.18x the time
// on Zen 5.
constexpr int kUnitCols = kZmm ? 4 : 2;

// The operations on a unit of 128, 256 or 512 bits.
template <int kBits>
struct Lanes;
template <>
struct Lanes<256> {
    using F = __m256;
    using I = __m256i;
    static __m256 cvt(I x) { return _mm256_cvtepi32_ps(x); }
    static __m256 splat4(__m128 x4) { return _mm256_broadcastss_ps(x4); }
    static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
    static __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
    static __m256 fmsub(__m256 a, __m256 b, __m256 c) { return _mm256_fmsub_ps(a, b, c); }
    static I madd(I a, I b) { return _mm256_madd_epi16(a, b); }
    static I add(I a, I b) { return _mm256_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
    static I low_half(__m256i x) { return _mm256_permute2x128_si256(x, x, 0x00); }
    static I high_half(__m256i x) { return _mm256_permute2x128_si256(x, x, 0x11); }
};
#if defined(TANDEM_SIMD_ZMM)
template <>
struct Lanes<512> {
    using F = __m512;
    using I = __m512i;
    static __m512 cvt(I x) { return _mm512_cvtepi32_ps(x); }
    static __m512 splat4(__m128 x4) { return _mm512_broadcastss_ps(x4); }
    static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
    static __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
    static __m512 fmsub(__m512 a, __m512 b, __m512 c) { return _mm512_fmsub_ps(a, b, c); }
    static I madd(I a, I b) { return _mm512_madd_epi16(a, b); }
    static I add(I a, I b) { return _mm512_add_epi32(a, b); }
    static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
    static I low_half(__m256i x) { return _mm512_broadcast_i32x4(_mm256_castsi256_si128(x)); }
    static I high_half(__m256i x) { return _mm512_broadcast_i32x4(_mm256_extracti128_si256(x, 1)); }
};
constexpr int kUnitBits = 512;
#else
constexpr int kUnitBits = 256;
#endif
using Unit = Lanes<kUnitBits>::F;
using UnitInt = Lanes<kUnitBits>::I;

// The integer accumulator folded to 4 lanes (lane l: its lanes l mod 4).
TANDEM_ALWAYS_INLINE __m128i fold4(__m256i x) {
    return _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}
// The accumulators of kUnitCols columns folded to 4 lanes each, side by side.
TANDEM_ALWAYS_INLINE UnitInt unit_sums(const Acc* v) {
#if defined(TANDEM_SIMD_ZMM)
    // 128-bit lanes [a0+a2, a1+a3, b0+b2, b1+b3], the same for c, d; then each column's two
    const auto halves = [](__m512i a, __m512i b) {
        return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    };
    const __m512i ab = halves(v[0], v[1]), cd = halves(v[2], v[3]);
    return _mm512_add_epi32(_mm512_shuffle_i64x2(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
#else
    return _mm256_add_epi32(_mm256_permute2x128_si256(v[0], v[1], 0x20),
                            _mm256_permute2x128_si256(v[0], v[1], 0x31));
#endif
}

// The float sums of one tile row: 4 lanes per column, kUnitCols columns to a unit.
template <int C>
struct UnitSums {
    static constexpr int kUnits = (C + kUnitCols - 1) / kUnitCols;
    Unit u[kUnits];
    static UnitSums zero() {
        UnitSums f;
        TANDEM_UNROLL
        for (auto& x : f.u) x = Unit{};
        return f;
    }
    float result(int c) const {
        alignas(64) float lanes[4 * kUnitCols];
        __builtin_memcpy(lanes, &u[c / kUnitCols], sizeof(Unit));
        const __m128 x = _mm_load_ps(lanes + 4 * (c % kUnitCols));
        return hsum4(x);
    }
};
// The matvec's: one column in an xmm.
struct ColumnSums {
    __m128 u[1];
    static ColumnSums zero() { return {{_mm_setzero_ps()}}; }
    float result(int) const { return hsum4(u[0]); }
};

// Super-block i of the C columns, as the tiles read it: the q8_K values side by side (one base
// address for all columns), dy four times per column and, for the formats with bias or min
// terms (kBsums), the bsums split in halves (0..7, 8..15), a unit's columns side by side;
// columns past C (up to a whole unit) are zero.
template <int C, bool kBsums>
struct KColumns {
    static constexpr int kCols = UnitSums<C>::kUnits * kUnitCols;
    alignas(64) uint8_t q_[C][256];
    alignas(64) float dy_[kCols][4];
    alignas(64) int16_t bsums_lo[kBsums ? kCols : 1][8];
    alignas(64) int16_t bsums_hi[kBsums ? kCols : 1][8];
    const uint8_t* q(int c) const { return q_[c]; }
    void prepare(const uint8_t* y, int c) {
        if (c == 0) {  // (the columns past C)
            for (int z = C; z < kCols; ++z) {
                __builtin_memset(dy_[z], 0, sizeof dy_[z]);
                if constexpr (kBsums) {
                    __builtin_memset(bsums_lo[z], 0, sizeof bsums_lo[z]);
                    __builtin_memset(bsums_hi[z], 0, sizeof bsums_hi[z]);
                }
            }
        }
        __builtin_memcpy(q_[c], y + 4, 256);
        _mm_store_ps(dy_[c], _mm_set1_ps(load_f32(y)));
        if constexpr (kBsums) {
            __builtin_memcpy(bsums_lo[c], y + 260, 16);
            __builtin_memcpy(bsums_hi[c], y + 276, 16);
        }
    }
};

// A unit's columns for the float steps: dy and the bsums' halves (u: the unit's index).
template <int C, bool kBsums>
TANDEM_ALWAYS_INLINE Unit unit_dy(const KColumns<C, kBsums>& cols, int u) {
    return *reinterpret_cast<const Unit*>(cols.dy_[kUnitCols * u]);
}
template <int C>
TANDEM_ALWAYS_INLINE UnitInt unit_bsums_lo(const KColumns<C, true>& cols, int u) {
    return *reinterpret_cast<const UnitInt*>(cols.bsums_lo[kUnitCols * u]);
}
template <int C>
TANDEM_ALWAYS_INLINE UnitInt unit_bsums_hi(const KColumns<C, true>& cols, int u) {
    return *reinterpret_cast<const UnitInt*>(cols.bsums_hi[kUnitCols * u]);
}
TANDEM_ALWAYS_INLINE __m128 unit_dy(const RawColumns& cols, int) {
    return _mm_set1_ps(load_f32(cols.y));
}

template <typename T, int C>
struct KTile : SuperBlockTile<KTile<T, C>, C> {
    static_assert(!(T::kMins && T::kBias != 0));
    // For the frame (SuperBlockTile).
    static constexpr int kBytes = T::kBytes, kRows = k_rows<T>(C);
    using Sums = std::conditional_t<C == 1, ColumnSums, UnitSums<C>>;
    using Cols = KColumns<C, T::kMins || T::kBias != 0>;

    // (iacc: C columns, then zeros up to a whole unit)
    template <int R, int kJ, bool kScaled, typename Columns, int kN>
    TANDEM_ALWAYS_INLINE static void step(const Prepared<T, kScaled>* blk, const Columns& cols,
                                          Acc (&iacc)[R][kN]) {
        V u[R], scale[R];
        SignMask negative[R] = {};
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) blk[r].template step<kJ>(u[r], scale[r], negative[r]);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const V q = load64(cols.q(c) + 64 * kJ);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                iacc[r][c] = step_dot<T, kScaled>(iacc[r][c], u[r], q, scale[r], negative[r]);
                // (16 registers: the sums in step order, else GCC spills; C = 4, 8 12-17%
                // faster with AVX2 on Zen 5)
                if constexpr (kRegisters < 32 && C > 1) keep_sum(iacc[r][c]);
            }
        }
    }

    // The row's 16 int16 (the biased scales or the mins) times a unit's bsums, in 4 lanes.
    template <typename L, typename Columns>
    TANDEM_ALWAYS_INLINE static typename L::I bsum_terms(__m256i row16, const Columns& cols,
                                                         int u) {
        return L::add(L::madd(unit_bsums_lo(cols, u), L::low_half(row16)),
                      L::madd(unit_bsums_hi(cols, u), L::high_half(row16)));
    }

    // The float steps of one unit (see "float sums" above): acc += (S d - M dmin) dy.
    template <int kBits, typename Columns, typename L = Lanes<kBits>, typename F = typename L::F>
    TANDEM_ALWAYS_INLINE static F unit_step(F acc, typename L::I sums, const Prep& p,
                                            const Columns& cols, int u) {
        if constexpr (T::kBias != 0)
            sums = L::sub(sums, bsum_terms<L>(biased_scales<T>(p), cols, u));
        const F d = L::splat4(p.d4);
        F t;
        if constexpr (T::kMins) {
            const F dmin = L::splat4(p.dmin4);
            t = L::fmsub(L::cvt(sums), d, L::mul(L::cvt(bsum_terms<L>(p.mn16, cols, u)), dmin));
        } else {
            t = L::mul(L::cvt(sums), d);
        }
        return L::fmadd(t, unit_dy(cols, u), acc);
    }

    // The matvec's float step: unit_step's for its one column in 4 lanes (the same exact sums
    // in the same lanes, the same float operations), the 16 bsums meeting the row's int16 in
    // one 256-bit vpmaddwd whose 8 lanes fold to 4, where a vpmaddwd per half and their sum
    // took one operation more (one thread, in L1, minimums of 4 ABBA rounds: Zen 3 q4_K 0.95x
    // the time, q3_K and q6_K 0.97-0.98x, q2_K and q5_K 0.98-0.99x; Sapphire Rapids, AVX-512,
    // q6_K 0.91x, q2_K and q3_K 0.94x, q4_K 0.97x, q5_K level, its AVX2 variant 0.94-0.96x).
    // (Folding the sums and the min terms together, two vperm2i128 and one conversion, took
    // 1.05x on Zen 3.)
    TANDEM_ALWAYS_INLINE static __m128 matvec_step(__m128 acc, Acc iacc, const Prep& p,
                                                   const RawColumns& cols) {
        __m256i sums = fold(iacc);
        const __m256i bsums = cols.bsums(0);
        if constexpr (T::kBias != 0)
            sums = _mm256_sub_epi32(sums, _mm256_madd_epi16(bsums, biased_scales<T>(p)));
        __m128 t;
        if constexpr (T::kMins) {
            const __m128i mins = fold4(_mm256_madd_epi16(bsums, p.mn16));
            t = _mm_fmsub_ps(_mm_cvtepi32_ps(fold4(sums)), p.d4,
                             _mm_mul_ps(_mm_cvtepi32_ps(mins), p.dmin4));
        } else {
            t = _mm_mul_ps(_mm_cvtepi32_ps(fold4(sums)), p.d4);
        }
        return _mm_fmadd_ps(t, unit_dy(cols, 0), acc);
    }

    // Super-block i of R rows against the columns. The prescaled formats' tiles multiply the
    // weights by their scales once per row; the matvec keeps the scales in vpmaddwd (both
    // give the same exact sums in the same lanes).
    template <int R, bool kMatvec, typename Columns>
    TANDEM_ALWAYS_INLINE static void super_block(int64_t i, const uint8_t* const* rows,
                                                 size_t ahead, const Columns& cols, Sums (&f)[R]) {
        constexpr bool kScaled = prescaled<T>() && !kMatvec;
        Prepared<T, kScaled> blk[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const uint8_t* block = rows[r] + i * T::kBytes;
            prefetch_super_block<kMatvec>(block, T::kBytes, ahead);
            blk[r].prepare(block);
        }
        constexpr int kCols = kMatvec ? 1 : UnitSums<C>::kUnits * kUnitCols;
        Acc iacc[R][kCols];
        TANDEM_UNROLL
        for (auto& row : iacc) {
            TANDEM_UNROLL
            for (auto& x : row) x = acc_zero();
        }
        step<R, 0>(blk, cols, iacc);
        step<R, 1>(blk, cols, iacc);
        step<R, 2>(blk, cols, iacc);
        step<R, 3>(blk, cols, iacc);

        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            if constexpr (kMatvec) {
                f[r].u[0] = matvec_step(f[r].u[0], iacc[r][0], blk[r].p, cols);
            } else {
                TANDEM_UNROLL
                for (int u = 0; u < UnitSums<C>::kUnits; ++u)
                    f[r].u[u] = unit_step<kUnitBits>(f[r].u[u], unit_sums(&iacc[r][kUnitCols * u]),
                                                     blk[r].p, cols, u);
            }
        }
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
