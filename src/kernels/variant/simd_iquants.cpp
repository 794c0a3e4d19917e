// SIMD dot-product tiles for the lattice i-quants against q8_K activations: iq2_xxs, iq2_xs,
// iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m; and the ternary tq1_0, tq2_0 in the same frame. Per
// super-block, four steps of 64 values: the grid points are looked up (formats/iq_tables.h) into
// unsigned magnitudes u, the value signs are applied to the activations, products are summed in
// int32 with the odd sub-block scales 2s+1 applied as int16 (vpmaddubsw then vpmaddwd / vpdpwssd).
// The iq1 and ternary formats have no signs: their weights are u minus a bias (iq1 in eighths,
// see Iq1), and bias x scale x the q8_K bsums comes off the integer sum.
//
// Column invariance: the float work of one (row, column) pair is the same whatever the number
// of columns of the call: per super-block one int32 sum (exact), one product d * factor * dy and
// one fused multiply-add into that column's lane; integer work is shared between columns.
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/super_block_tile.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

// A row's super-block, prepared once for all columns.
struct Prep {
    __m256i sc16;    // odd sub-block scales 2s+1 in int16 lanes (T::kSub values each)
    __m256i bias16;  // iq1: the bias times the scale per 16 values, in int16 lanes
    float d;         // fp16 d times the format's constant factor (a power of two: exact)
};

inline float fp16_bits(uint16_t h) {
    return _cvtsh_ss(h);
}

// 2s+1 of 8 int32 lanes s, as int16 lanes 0..7.
TANDEM_ALWAYS_INLINE __m256i odd_scales8(__m256i s32) {
    const __m256i odd = _mm256_or_si256(_mm256_slli_epi32(s32, 1), _mm256_set1_epi32(1));
    return _mm256_permute4x64_epi64(_mm256_packs_epi32(odd, odd), 0xD8);
}
// 2s+1 of the 16 nibbles of 8 bytes (low nibble of byte i = s of sub-block 2i, high = 2i+1),
// as int16 lanes 0..15 (iq2_xs, iq2_s; iq3_s's 8 nibbles in lanes 0..7).
TANDEM_ALWAYS_INLINE __m256i odd_scales_nibbles(uint64_t bytes) {
    const __m128i x = _mm_cvtsi64_si128(static_cast<long long>(bytes));
    const __m128i m = _mm_set1_epi8(15);
    const __m128i s =
        _mm_unpacklo_epi8(_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16(x, 4), m));
    const __m256i s16 = _mm256_cvtepu8_epi16(s);
    return _mm256_or_si256(_mm256_slli_epi16(s16, 1), _mm256_set1_epi16(1));
}

// The sign bits of 8 groups of 8 values from their 7-bit sign indices (bytes of b): the eighth
// sign of a group makes its number of negated values even (ggml's ksigns).
TANDEM_ALWAYS_INLINE constexpr uint64_t sign_bits(uint64_t b) {
    uint64_t parity = b ^ (b >> 4);  // bit 0 of each byte: the parity of that byte
    parity ^= parity >> 2;
    parity ^= parity >> 1;
    return b | (parity & 0x0101010101010101) << 7;
}
#if defined(TANDEM_SIMD_ZMM)
// The four 7-bit fields of a (bits 0..27) into bytes 0..3: one pdep on the CPUs the AVX-512
// variants run on (Intel, Zen 4 and later; see signs_of_fields).
TANDEM_ALWAYS_INLINE uint64_t bytes_of_7bit_fields(uint32_t a) {
    return _pdep_u32(a, 0x7f7f7f7f);
}
#endif
#if !defined(TANDEM_SIMD_ZMM)
// AVX2's sign operands by 7-bit sign index: 8 bytes, 0xff where the value is negated, else 1.
struct SignBytes {
    uint64_t of[128];
};
consteval SignBytes make_sign_bytes() {
    SignBytes t{};
    for (uint64_t i = 0; i < 128; ++i) {
        const uint64_t bits = sign_bits(i);
        for (int j = 0; j < 8; ++j) t.of[i] |= (bits >> j & 1 ? 0xffull : 0x01ull) << 8 * j;
    }
    return t;
}
inline constexpr SignBytes kSignBytes = make_sign_bytes();
// The signs of 8 groups by their 7-bit sign indices.
TANDEM_ALWAYS_INLINE Signs signs_of_indices(uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3,
                                            uint32_t i4, uint32_t i5, uint32_t i6, uint32_t i7) {
    const uint64_t* t = kSignBytes.of;
    return {set_u64x8(t[i0], t[i1], t[i2], t[i3], t[i4], t[i5], t[i6], t[i7])};
}
#endif
// Byte n < 16: 0x80 where n has an odd number of bits set, else 0 (a vpshufb table).
inline __m128i parity_top16() {
    constexpr auto p = [](int i) -> char { return __builtin_parity(i) ? -128 : 0; };
    return _mm_setr_epi8(p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7), p(8), p(9), p(10), p(11),
                         p(12), p(13), p(14), p(15));
}
// The signs of 8 groups whose 7-bit sign indices are bits 9-15 of the 8 words of x (iq2_xs),
// made without leaving the vector registers: the eighth bit, the parity of the seven, is the
// parity of the 4 bits index ^ (index >> 4), looked up by vpshufb. Against looking the sign
// bytes up by index (kSignBytes: 3 scalar operations, a broadcast load and a blend per group)
// the matvec took 0.76-0.88x the time on Zen 3, where its instructions were the limit (355 a
// super-block, now 270), and 0.87x on Sapphire Rapids. AVX-512 takes the same bytes as its
// mask, and its grid indices as AVX2 does (16-bit loads): against the indices split from a
// vector and the parity made in scalar (llvm-mca, Ice Lake: 70 cycles a super-block, now 51),
// Sapphire Rapids took 0.97-0.99x the time for the matvec, 0.87x at C = 4. AVX2 makes the same
// bits for a pair of steps at once (signs_of_word_pair below).
#if defined(TANDEM_SIMD_ZMM)
TANDEM_ALWAYS_INLINE Signs signs_of_words(__m128i x) {
    const __m128i parity_top = parity_top16();
    const __m128i index = _mm_srli_epi16(x, 9);
    const __m128i parity =
        _mm_shuffle_epi8(parity_top, _mm_xor_si128(index, _mm_srli_epi16(x, 13)));
    const __m128i bits = _mm_or_si128(index, parity);  // low byte of each word; high byte 0
    return signs_of_bits(_mm_packus_epi16(bits, bits));
}
#else
// AVX2, iq2_xs: the signs of step kJ from the 32 bytes of words of its pair of steps (kJ / 2):
// the indices and parities of the 16 words (signs_of_words's five operations) are the same
// expression in both steps, which the compiler makes once; each step then takes its 8 words'
// bytes into both 128-bit lanes (one vpermq) and spreads them over its groups' bytes. Against
// signs_of_words per step (its xmm packed and broadcast: two shuffles more a step), Zen 3 (one
// thread, best of 8 runs) took 0.95x the time for the matvec, 0.93x at C = 4, 0.96x at C = 8.
template <int kJ>
TANDEM_ALWAYS_INLINE Signs signs_of_word_pair(const uint8_t* pair) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair));
    const __m256i index = _mm256_srli_epi16(x, 9);
    const __m256i parity = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(parity_top16()),
                                               _mm256_xor_si256(index, _mm256_srli_epi16(x, 13)));
    const __m256i bits = _mm256_or_si256(index, parity);  // low byte of word i: group i's signs
    const __m256i step = _mm256_permute4x64_epi64(bits, kJ % 2 ? 0xEE : 0x44);
    // byte j of group g: 0xff where bit j % 8 of word g's low byte (byte 2g) is set, else 1
    const auto spread = [&](long long g0) {
        constexpr long long kOnes = 0x0101010101010101;
        return _mm256_or_si256(
            spread_bits(step, _mm256_setr_epi64x(2 * g0 * kOnes, (2 * g0 + 2) * kOnes,
                                                 (2 * g0 + 4) * kOnes, (2 * g0 + 6) * kOnes)),
            _mm256_set1_epi8(1));
    };
    return {{spread(0), spread(4)}};
}
#endif
// Signs of the 8 groups of a step from two words of 4 sign indices each (iq2_xxs, iq3_xxs), the
// words at p + kOff0 and p + kOff1 (the 16 bytes at p must be readable; 8 when kOff1 <= 4).
// AVX2 has two ways, one per shape of call:
// - kInVectors (the matvec): as signs_of_words, without leaving the vector registers. Against
//   the lookup, the matvec took 0.94-0.95x the time on Zen 3 for iq2_xxs and iq3_xxs (their
//   shuffle pipes the limit: these are fewer operations, but more of them shuffles);
// - else (the small matmul, whose columns' work needs those pipes: there kInVectors took
//   1.04-1.08x the time at C = 4 and 8): the groups' sign bytes looked up (kSignBytes). The
//   bits spread to bytes by scalar operations (about 30 a step) were slower still on Sapphire
//   Rapids (iq2_xxs 1.2-1.3x, iq3_xxs 1.2-1.4x the time per row).
// AVX-512 makes the mask in general-purpose registers, the fields to bytes by pdep (where
// shifts and masks took iq2_xxs's matvec 1.24x the time on Sapphire Rapids, iq3_xxs
// 1.10-1.15x; C = 4 1.18-1.35x).
template <int kOff0, int kOff1, bool kInVectors>
TANDEM_ALWAYS_INLINE Signs signs_of_fields(const uint8_t* p) {
#if defined(TANDEM_SIMD_ZMM)
    return signs_of_bits(sign_bits(bytes_of_7bit_fields(load_u32(p + kOff0)) |
                                   bytes_of_7bit_fields(load_u32(p + kOff1)) << 32));
#else
    if constexpr (!kInVectors) {
        const uint32_t w0 = load_u32(p + kOff0), w1 = load_u32(p + kOff1);
        return signs_of_indices(w0 & 127, (w0 >> 7) & 127, (w0 >> 14) & 127, (w0 >> 21) & 127,
                                w1 & 127, (w1 >> 7) & 127, (w1 >> 14) & 127, (w1 >> 21) & 127);
    }
    // One index per dword lane, in the lane order g0 g1 g4 g5 | g2 g3 g6 g7 (g: group), so
    // that one in-lane vpshufb spreads each 32 values' groups over their bytes.
    static_assert(kOff0 % 4 == 0 && kOff1 % 4 == 0 && kOff1 + 4 <= 16);
    constexpr int a0 = kOff0 / 4, a1 = kOff1 / 4;
    const __m256i words =
        kOff1 + 4 <= 8
            ? _mm256_set1_epi64x(static_cast<long long>(load_u64(p)))
            : _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i index =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(words, _MM_SHUFFLE(a1, a1, a0, a0)),
                                           _mm256_setr_epi32(0, 7, 0, 7, 14, 21, 14, 21)),
                         _mm256_set1_epi32(127));
    const __m256i parity_top = _mm256_broadcastsi128_si256(parity_top16());
    const __m256i bits = _mm256_or_si256(
        index, _mm256_xor_si256(_mm256_shuffle_epi8(parity_top, index),
                                _mm256_shuffle_epi8(parity_top, _mm256_srli_epi32(index, 4))));
    // byte j of group g: 0xff where bit j of its sign bits is set, else 1 (vpsignb's operand)
    const auto spread = [&](long long first, long long second) {
        constexpr long long kOnes = 0x0101010101010101;
        const long long f = first * kOnes, g = second * kOnes;
        return _mm256_or_si256(spread_bits(bits, _mm256_setr_epi64x(f, g, f, g)),
                               _mm256_set1_epi8(1));
    };
    return {{spread(0, 4), spread(8, 12)}};
#endif
}
// uint16 lane i = bits [shift_i, shift_i + width) of lane i of x, at bit 8 (indices' high bits):
// x * 2^(16 - width - shift_i) puts them at the top, then they move down to bit 8.
template <int kWidth>
TANDEM_ALWAYS_INLINE __m128i high_index_bits(__m128i x, __m128i pow2) {
    const int mask = ((1 << kWidth) - 1) << 8;
    return _mm_and_si128(_mm_srli_epi16(_mm_mullo_epi16(x, pow2), 8 - kWidth),
                         _mm_set1_epi16(static_cast<short>(mask)));
}

// Traits: prepare(block, Prep&); decode<j>(block, u, signs) gives step j (values 64j..64j+63):
// magnitudes u (unsigned bytes) and the signs to apply to the activations (decode<j, kMatvec>
// where the matvec's differs: iq2_xxs, iq3_xxs, see signs_of_fields). kSub: values per
// sub-block scale (kUnitScales: all 1); kSigned: decode gives signs; kBiased: weight = u - a bias
// constant per format (the iq1 and ternary formats), the bias times the scales taken off the
// sum with the q8_K bsums (iq1: Prep::bias16; ternary, all scales 1: per column, see
// super_block).
struct Lattice {
    static constexpr bool kUnitScales = false;
    static constexpr bool kSigned = true;
    static constexpr bool kBiased = false;
};

// iq2_xxs, 66 bytes: d, then per sub-block 8 bytes: 4 grid indices, a uint32 of 4 7-bit sign
// indices and the scale in bits 28-31. x = d * (2s+1) / 8 * grid * sign.
struct Iq2Xxs : Lattice {
    static constexpr int kBytes = 66, kSub = 32;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        // the scale words are dwords 1, 3, 5, 7 of each 32-byte half of qs
        const __m256i idx = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
        const __m256i lo = _mm256_permutevar8x32_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), idx);
        const __m256i hi = _mm256_permutevar8x32_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 34)), idx);
        p.sc16 = odd_scales8(_mm256_srli_epi32(_mm256_blend_epi32(lo, hi, 0xF0), 28));
        p.d = fp16_bits(load_u16(b)) * 0.125f;
    }
    template <int kJ, bool kMatvec>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 2 + 16 * kJ;
        const uint64_t* g = kIq2xxsPoints.p;
        u = set_u64x8(g[q[0]], g[q[1]], g[q[2]], g[q[3]], g[q[8]], g[q[9]], g[q[10]], g[q[11]]);
        s = signs_of_fields<4, 12, kMatvec>(q);
    }
};

// iq2_xs, 74 bytes: d, qs[32] uint16 (bits 0-8 grid index, 9-15 sign index), scales[8] (two
// 4-bit s per sub-block, one per 16 values). x = d * (2s+1) / 8 * grid * sign.
struct Iq2Xs : Lattice {
    static constexpr int kBytes = 74, kSub = 16;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = odd_scales_nibbles(load_u64(b + 66));
        p.d = fp16_bits(load_u16(b)) * 0.125f;
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 2 + 16 * kJ;
        const auto w = [&](int i) -> uint32_t { return load_u16(q + 2 * i); };
        const uint64_t* g = kIq2xsPoints.p;
        u = set_u64x8(g[w(0) & 511], g[w(1) & 511], g[w(2) & 511], g[w(3) & 511], g[w(4) & 511],
                      g[w(5) & 511], g[w(6) & 511], g[w(7) & 511]);
#if defined(TANDEM_SIMD_ZMM)
        s = signs_of_words(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
#else
        s = signs_of_word_pair<kJ>(b + 2 + 32 * (kJ / 2));
#endif
    }
};

// iq2_s, 82 bytes: d, qs[32] (low 8 bits of the grid indices), signs[32] (one sign byte per
// group), qh[8] (bits 8-9 of the indices, 2 per group), scales[8] as iq2_xs.
struct Iq2S : Lattice {
    static constexpr int kBytes = 82, kSub = 16;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = odd_scales_nibbles(load_u64(b + 74));
        p.d = fp16_bits(load_u16(b)) * 0.125f;
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 2 + 8 * kJ;
        const uint32_t h = load_u16(b + 66 + 2 * kJ);  // 2 bits per group, groups in order
#if defined(TANDEM_SIMD_ZMM)
        // AVX-512: the indices by pdep (pdep_indices), as iq1's points, where four scalar
        // operations an index made them (the matvec 0.84x the time on Sapphire Rapids, C = 8
        // level). Built in one vector for the super-block, stored and read back by 16-bit
        // loads, they took 1.5x: the loads waited for the store.
        u = lookup_u64x8(kIq2sPoints.p, pdep_indices<0x0300030003000300>(q, h, h >> 8));
#else
        const uint64_t* g = kIq2sPoints.p;
        const auto at = [&](int i) { return g[q[i] | ((h >> (2 * i)) & 3) << 8]; };
        u = set_u64x8(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
#endif
        s = signs_of_bits(load_u64(b + 34 + 8 * kJ));
    }
};

// iq3_xxs, 98 bytes: d, qs[64] (grid index per 4 values), aux[32] (per sub-block a uint32 of 4
// 7-bit sign indices and the scale in bits 28-31). x = d * (2s+1) / 4 * grid * sign.
struct Iq3Xxs : Lattice {
    static constexpr int kBytes = 98, kSub = 32;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        const __m256i aux = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 66));
        p.sc16 = odd_scales8(_mm256_srli_epi32(aux, 28));
        p.d = fp16_bits(load_u16(b)) * 0.25f;
    }
    template <int kJ, bool kMatvec>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 2 + 16 * kJ;
        const uint32_t* g = kIq3xxsPoints.p;
        uint32_t pts[16];
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) pts[i] = g[q[i]];
        u = set_u32x16(pts);
        s = signs_of_fields<0, 4, kMatvec>(b + 66 + 8 * kJ);
    }
};

// iq3_s, 110 bytes: d, qs[64] (low 8 bits of the grid index per 4 values), qh[8] (bit k of
// qh[b] = bit 8 of sub-block b's k-th index), signs[32], scales[4] (a nibble per sub-block).
// x = d * (2s+1) * grid * sign.
struct Iq3S : Lattice {
    static constexpr int kBytes = 110, kSub = 32;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = odd_scales_nibbles(load_u32(b + 106));
        p.d = fp16_bits(load_u16(b));
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        // index i = q[i] | bit i of h at bit 8, made in int16 lanes (5 scalar operations an
        // index before: the AVX2 matvec took 0.81-0.89x the time on Zen 3 and 0.84-0.87x on
        // Sapphire Rapids, AVX-512 there 0.93-0.96x)
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * kJ));
        const auto h = static_cast<short>(load_u16(b + 66 + 2 * kJ));
        const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
                                              4096, 8192, 16384, -32768);
        const __m256i high = _mm256_and_si256(
            _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(h), bit), bit),
            _mm256_set1_epi16(256));
        u = lookup_u32x16(kIq3sPoints.p, _mm256_or_si256(_mm256_cvtepu8_epi16(q), high));
        s = signs_of_bits(load_u64(b + 74 + 8 * kJ));
    }
};

// The iq1 formats: grid values -1, 0, 1 and a shift of +-1/8 per group, in eighths w = 8 grid +
// shift (odd). The table holds 8 (grid + 1). iq1_m, a shift per group of 8 values: u = 8 (grid +
// 1) + (shift + 1) = w + 9 (0..18) is built in uint64 without carries between bytes, and the 9
// is the bias. iq1_s, a shift per sub-block of 32 values: u = the table's 8 (grid + 1), and the
// sub-block's bias 8 - shift (7 or 9) goes with its bsums like the scales.
constexpr uint64_t kShiftUp = 0x0202020202020202;  // shift + 1 for shift = +1 (bytes)
#if defined(TANDEM_SIMD_ZMM)
// Bit i = bit 3 of nibble i of x: one pext on the CPUs the AVX-512 variants run on (Intel,
// Zen 4 and later; Zen 2, which runs the AVX2 variants, microcodes pext).
TANDEM_ALWAYS_INLINE uint32_t bit3_of_nibbles(uint32_t x) {
    return _pext_u32(x, 0x88888888);
}
#endif
struct Iq1 {
    static constexpr bool kUnitScales = false;
    static constexpr bool kSigned = false;
    static constexpr bool kBiased = true;
    // iq1_m's u from the step's biased grid points (kIq1sPointsEighths) and its 8 nibbles h:
    // shift +1 for group i where bit 3 of nibble i is clear.
#if defined(TANDEM_SIMD_ZMM)
    TANDEM_ALWAYS_INLINE static V magnitudes(V points, uint32_t h) {
        return or_(points, groups_where(bit3_of_nibbles(~h), kShiftUp));
    }
#else
    // (Each 64-bit lane, a group, tests its bit of h broadcast: the bits gathered in scalar for
    // groups_where took some 30 instructions a super-block more, 1.14x the matvec's time on
    // Zen 5.)
    TANDEM_ALWAYS_INLINE static V magnitudes(V points, uint32_t h) {
        const __m256i x = _mm256_set1_epi32(static_cast<int>(h));
        const auto part = [&](__m256i bit) {
            const __m256i clear =
                _mm256_cmpeq_epi64(_mm256_and_si256(x, bit), _mm256_setzero_si256());
            return _mm256_and_si256(clear, _mm256_set1_epi64x(static_cast<long long>(kShiftUp)));
        };
        return or_(points, {part(_mm256_setr_epi64x(1 << 3, 1 << 7, 1 << 11, 1 << 15)),
                            part(_mm256_setr_epi64x(1 << 19, 1 << 23, 1 << 27, 1u << 31))});
    }
#endif
#if defined(TANDEM_SIMD_ZMM)
    // The biased grid points of a step's 8 groups: index i = byte q[i] | bits 3 (i % 4).. of
    // high03 (i < 4) or high47 as bits 8-10, by pdep (pdep_indices), where the vector indices
    // took five vector operations and two moves out a step.
    TANDEM_ALWAYS_INLINE static V points(const uint8_t* q, uint32_t high03, uint32_t high47) {
        return lookup_u64x8(kIq1sPointsEighths.p,
                            pdep_indices<0x0700070007000700>(q, high03, high47));
    }
#else
    // The 8 grid indices of a step: low 8 bits from the bytes at q, bits 8-10 from the 32 bits h
    // (group i's in word i / 4, put at the top of the word by the power of two of lane i).
    TANDEM_ALWAYS_INLINE static __m128i grid_indices(const uint8_t* q, uint32_t h, __m128i pow2) {
        const __m128i low = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
        const __m128i words = _mm_shuffle_epi8(
            _mm_cvtsi32_si128(static_cast<int>(h)),
            _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3));
        return _mm_or_si128(low, high_index_bits<3>(words, pow2));
    }
#endif
    // 9 (2s+1) per 16 values from the odd scales per 16 values
    TANDEM_ALWAYS_INLINE static __m256i bias16(__m256i odd16) {
        return _mm256_mullo_epi16(odd16, _mm256_set1_epi16(9));
    }
};

// iq1_s, 50 bytes: d, qs[32] (low 8 bits of the grid indices), qh[8] uint16 per sub-block: bits
// 3l..3l+2 = bits 8-10 of group l's index, bits 12-14 = s, bit 15 set: shift -1, else +1.
// x = d * (2s+1) * (grid + shift / 8).
struct Iq1S : Iq1 {
    static constexpr int kBytes = 50, kSub = 32;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 34));
        const __m128i s = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
        const __m128i odd = _mm_or_si128(_mm_slli_epi16(s, 1), _mm_set1_epi16(1));
        p.sc16 = _mm256_castsi128_si256(odd);
        // the bias 8 - shift: 9 where bit 15 is set (shift -1), else 7; times 2s+1, per 16 values
        const __m128i bias = _mm_add_epi16(
            _mm_and_si128(_mm_srli_epi16(qh, 14), _mm_set1_epi16(2)), _mm_set1_epi16(7));
        const __m128i odd_bias = _mm_mullo_epi16(odd, bias);
        p.bias16 = _mm256_setr_m128i(_mm_unpacklo_epi16(odd_bias, odd_bias),
                                     _mm_unpackhi_epi16(odd_bias, odd_bias));
        p.d = fp16_bits(load_u16(b)) * 0.125f;
    }
    // (The shift per sub-block in the bias, not in u: AVX2 builds no shift vector per step.)
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs&) {
        const uint32_t h = load_u32(b + 34 + 4 * kJ);  // qh of the step's 2 sub-blocks
#if defined(TANDEM_SIMD_ZMM)
        u = points(b + 2 + 8 * kJ, h, h >> 16);
#else
        // group i's index bits 8-10: bits 3 (i % 4).. of qh word i / 4
        const __m128i idx = grid_indices(
            b + 2 + 8 * kJ, h,
            _mm_setr_epi16(1 << 13, 1 << 10, 1 << 7, 1 << 4, 1 << 13, 1 << 10, 1 << 7, 1 << 4));
        u = lookup_u64x8(kIq1sPointsEighths.p, idx);
#endif
    }
};

// iq1_m, 56 bytes: qs[32] (low 8 bits of the grid indices), qh[16] (a nibble per group: bits
// 0-2 = bits 8-10 of its index, bit 3 set: shift -1, else +1), scales[8]: four uint16 words,
// 3-bit s per 16 values (word k / 4, bits 3 (k % 4)..), the fp16 d in their top nibbles.
struct Iq1M : Iq1 {
    static constexpr int kBytes = 56, kSub = 16;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        const uint64_t w = load_u64(b + 48);
        const auto d_bits = static_cast<uint16_t>(((w >> 12) & 0x000f) | ((w >> 24) & 0x00f0) |
                                                  ((w >> 36) & 0x0f00) | ((w >> 48) & 0xf000));
        // each word 4 times, then s of 16-value sub-block k moved to bits 12-14 by a multiply
        const __m128i words = _mm_cvtsi64_si128(static_cast<long long>(w));
        const __m256i rep = _mm256_broadcastsi128_si256(
            _mm_shuffle_epi8(words, _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3)));
        const __m256i rep2 = _mm256_inserti128_si256(
            rep,
            _mm_shuffle_epi8(words, _mm_setr_epi8(4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7)),
            1);
        const __m256i m =
            _mm256_setr_epi16(1 << 12, 1 << 9, 1 << 6, 1 << 3, 1 << 12, 1 << 9, 1 << 6, 1 << 3,
                              1 << 12, 1 << 9, 1 << 6, 1 << 3, 1 << 12, 1 << 9, 1 << 6, 1 << 3);
        const __m256i s = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(rep2, m), 12),
                                           _mm256_set1_epi16(7));
        p.sc16 = _mm256_or_si256(_mm256_slli_epi16(s, 1), _mm256_set1_epi16(1));
        p.bias16 = bias16(p.sc16);
        p.d = fp16_bits(d_bits) * 0.125f;
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs&) {
        const uint32_t h = load_u32(b + 32 + 4 * kJ);  // nibble i: group i of this step
        const uint8_t* q = b + 8 * kJ;
#if defined(TANDEM_SIMD_ZMM)
        const uint32_t high = _pext_u32(h, 0x77777777);  // (the nibbles' bits 0-2, packed)
        u = magnitudes(points(q, high, high >> 12), h);
#else
        // AVX2: the indices in general-purpose registers by shifts, the points blended
        // (set_u64x8): 0.84-0.94x the time on Sapphire Rapids (iq1_s's matvec lost 10% that
        // way: it keeps the vector indices)
        const uint64_t* g = kIq1sPointsEighths.p;
        const auto at = [&](int i) { return g[q[i] | (h >> (4 * i) & 7) << 8]; };
        u = magnitudes(set_u64x8(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)), h);
#endif
    }
};

// The ternary formats: weight = u - 1 with u in 0..2 (tq2_0 also decodes 3 as +2), no sub-block
// scales (all 1), the -1 from the q8_K bsums.
struct Ternary {
    static constexpr int kSub = 32;
    static constexpr bool kUnitScales = true;
    static constexpr bool kSigned = false;
    static constexpr bool kBiased = true;
};

// tq2_0, 66 bytes: qs[64], d. Value 128n + 32g + l = bits 2g..2g+1 of qs[32n + l].
struct Tq2 : Ternary {
    static constexpr int kBytes = 66;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = _mm256_set1_epi16(1);
        p.d = fp16_bits(load_u16(b + 64));
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs&) {
        constexpr int n = kJ / 2, g0 = 2 * (kJ % 2);
        u = bits_to<2, 0>(bcast32(b + 32 * n), 2 * g0, 2 * g0 + 2);
    }
};

// tq1_0, 54 bytes: qs[48], qh[4], d. Five trits per byte: trit k of byte x is
// floor(3 y / 256) with y = x * 3^k mod 256 (trit_of). Trit k of qs[m] (m < 32) is value
// 32k + m, of qs[32 + m] value 160 + 16k + m, of qh[m] (k < 4) value 240 + 4k + m. The powers
// are made by byte additions (3y = y + y + y wraps mod 256 in each byte), no multiplies; the
// steps' common chains are the same expressions, which the compiler shares.
#if defined(TANDEM_SIMD_ZMM)
TANDEM_ALWAYS_INLINE __m512i times3(__m512i y) {
    return _mm512_add_epi8(_mm512_add_epi8(y, y), y);
}
#else
TANDEM_ALWAYS_INLINE __m256i times3(__m256i y) {
    return _mm256_add_epi8(_mm256_add_epi8(y, y), y);
}
TANDEM_ALWAYS_INLINE __m128i times3(__m128i y) {
    return _mm_add_epi8(_mm_add_epi8(y, y), y);
}
#endif
template <int kN, typename X>
TANDEM_ALWAYS_INLINE X times3n(X y) {  // y * 3^kN
    if constexpr (kN == 0) {
        return y;
    } else {
        return times3n<kN - 1>(times3(y));
    }
}
#if defined(TANDEM_SIMD_ZMM)
// The bytes of y where bit i of k is set times 3 (mod 256).
TANDEM_ALWAYS_INLINE __m512i times3_where(__m512i y, __mmask64 k) {
    return _mm512_mask_add_epi8(y, k, y, _mm512_add_epi8(y, y));
}
// With AVX-512 each 64-byte step is built whole: the bytes broadcast to the 128- or 256-bit
// lanes that need them, each byte multiplied by its power of 3 through masked byte additions
// (times3_where). Building the steps from ymm and xmm halves took a third more vector
// operations, and with zmm code in flight Sapphire Rapids runs all vector operations on two
// ports: the matvec 0.91x the time there (0.84x with trit_of's compares), 0.96x on Zen 5; the
// small matmul the same.
struct Tq1Powers {
    // Step 3: lanes [qs[32..47] x 9, x 27, x 81, qh dword k x 3^k]; round r triples the bytes
    // whose power is above r.
    static constexpr int power(int byte) {
        return byte < 48 ? 2 + byte / 16 : (byte - 48) / 4;
    }
    static constexpr __mmask64 above(int r) {
        __mmask64 m = 0;
        for (int i = 0; i < 64; ++i) m |= static_cast<__mmask64>(power(i) > r) << i;
        return m;
    }
};
#endif
struct Tq1 : Ternary {
    static constexpr int kBytes = 54;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = _mm256_set1_epi16(1);
        p.d = fp16_bits(load_u16(b + 52));
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs&) {
#if defined(TANDEM_SIMD_ZMM)
        constexpr __mmask64 kHigh256 = ~__mmask64{0} << 32, kLane3 = ~__mmask64{0} << 48;
        // [x, 3x] of qs[0..31]; [q1 x 4] of qs[32..47]
        const __m512i x3 = times3_where(
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))),
            kHigh256);
        const __m512i q1 =
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 32)));
        if constexpr (kJ < 2) {
            u = trit_of({times3n<2 * kJ>(x3)});
        } else if constexpr (kJ == 2) {  // [81x, q1, 3 q1]
            u = trit_of(
                {_mm512_mask_blend_epi8(kHigh256, times3n<4>(x3), times3_where(q1, kLane3))});
        } else {  // [9 q1, 27 q1, 81 q1, qh dword k times 3^k]
            constexpr __mmask64 k0 = Tq1Powers::above(0), k1 = Tq1Powers::above(1),
                                k2 = Tq1Powers::above(2), k3 = Tq1Powers::above(3);
            __m512i y = _mm512_mask_set1_epi32(q1, 0xF000, static_cast<int>(load_u32(b + 48)));
            y = times3_where(times3_where(times3_where(y, k0), k1), k2);
            u = trit_of({times3_where(y, k3)});
        }
#else
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 32));
        if constexpr (kJ < 2) {
            const __m256i lo = times3n<2 * kJ>(x);
            u = trit_of(join(lo, times3(lo)));
        } else if constexpr (kJ == 2) {
            u = trit_of(join(times3n<4>(x), _mm256_setr_m128i(q1, times3(q1))));
        } else {
            const __m128i q9 = times3n<2>(q1), q81 = times3n<2>(q9);
            // qh as four dwords times 1, 3, 9, 27
            const __m128i h = _mm_set1_epi32(static_cast<int>(load_u32(b + 48)));
            const __m128i h3 = times3(h), h9 = times3(h3);
            const __m128i hk = _mm_blend_epi32(_mm_blend_epi32(h, h3, 0x2),
                                               _mm_blend_epi32(h9, times3(h9), 0x8), 0xC);
            u = trit_of(join(_mm256_setr_m128i(q9, times3(q9)), _mm256_setr_m128i(q81, hk)));
        }
#endif
    }
};

// Float sums of the tiles: 8 lanes per (row, column). With AVX-512 two columns share a register
// (lanes 0-7 column c, lanes 8-15 column c + 1): half the registers (R = 2, C = 8 spilled) and
// one conversion, multiply and fma for both, each lane getting exactly the operations it gets
// with its column alone. kPairs: column pairs of a tile of C; an odd last column stays alone.
template <int C>
constexpr int kPairs = kZmm ? C / 2 : 0;
#if defined(TANDEM_SIMD_ZMM)
using PairSums = __m512;
#else
using PairSums = __m256;  // (no pairs)
#endif

// One row's float sums: columns below 2 kP in pairs (pair[c / 2]), the others alone
// (alone[c - 2 kP]).
template <int C>
struct RowSums {
    static constexpr int kP = kPairs<C>, kAlone = C - 2 * kP;
    PairSums pair[kP > 0 ? kP : 1];
    __m256 alone[kAlone > 0 ? kAlone : 1];

    static RowSums zero() {
        RowSums f;
        TANDEM_UNROLL
        for (auto& x : f.pair) x = PairSums{};
        TANDEM_UNROLL
        for (auto& x : f.alone) x = _mm256_setzero_ps();
        return f;
    }
    // Column c's result.
    float result(int c) const {
#if defined(TANDEM_SIMD_ZMM)
        if (c < 2 * kP) {
            const __m512 x = pair[c / 2];
            return hsum8(c % 2 == 0 ? _mm512_castps512_ps256(x) : _mm512_extractf32x8_ps(x, 1));
        }
#endif
        return hsum8(alone[c - 2 * kP]);
    }
};

// Super-block i of the C columns, as the tiles read it: the q8_K values side by side (one base
// address for all columns), dy eight times per column (two columns: one load), and the bias
// terms' bsums (iq1: kBsums) or starts (ternary: kStarts).
template <int C, bool kBsums, bool kStarts>
struct ColumnBlock {
    alignas(64) uint8_t q_[C][256];
    alignas(64) float dy_[C][8];
    alignas(64) int16_t bsums_[kBsums ? C : 1][16];
    alignas(64) int32_t start_[kStarts ? C : 1][8];
    const uint8_t* q(int c) const { return q_[c]; }
    __m256 dy(int c) const { return _mm256_load_ps(dy_[c]); }
    __m256i bsums(int c) const {
        return _mm256_load_si256(reinterpret_cast<const __m256i*>(bsums_[c]));
    }
    __m256i start(int c) const {
        return _mm256_load_si256(reinterpret_cast<const __m256i*>(start_[c]));
    }
#if defined(TANDEM_SIMD_ZMM)
    __m512 dy_pair(int p) const { return _mm512_load_ps(dy_[2 * p]); }
    __m512i bsums_pair(int p) const { return _mm512_load_si512(bsums_[2 * p]); }
#endif
    void prepare(const uint8_t* y, int c) {
        const RawColumns raw{y};
        __builtin_memcpy(q_[c], raw.q(0), 256);
        _mm256_store_ps(dy_[c], raw.dy(0));
        if constexpr (kBsums)
            _mm256_store_si256(reinterpret_cast<__m256i*>(bsums_[c]), raw.bsums(0));
        if constexpr (kStarts)
            _mm256_store_si256(reinterpret_cast<__m256i*>(start_[c]), raw.start(0));
    }
};

// Rows per small-matmul tile where registers allow; the matvec reads one row at a time.
constexpr int k_rows(int cols) {
    if (kRegisters >= 32) return cols <= 4 ? 4 : 2;
    return 1;
}

template <typename T, int C>
struct IqTile : SuperBlockTile<IqTile<T, C>, C> {
    // The ternary formats' bias term, the same for every row (-1 times the pairs of bsums),
    // starts each column's integer sums; iq1 takes its own off at the end (Prep::bias16).
    static constexpr bool kColumnBias = T::kBiased && T::kUnitScales;
    static constexpr bool kRowBias = T::kBiased && !kColumnBias;
    // The ternary formats without VNNI sum a super-block's products in int16 (dot_unit16).
    static constexpr bool kSum16 = T::kUnitScales && !kVnni;
    // The tiles with 16 registers keep each step's sums in order (keep_sum), else GCC keeps the
    // products of a super-block's steps to add them at the end, and spills: AVX2, C = 8, the
    // ternary formats 0.76x (tq2_0) and 0.89x (tq1_0) the time on Sapphire Rapids; on Zen 3 the
    // lattice and iq1 formats 0.77-0.90x at C = 8, 0.87-0.92x at C = 4 (one thread, in L2).
    // (Their signs read from memory by each vpsignb, as the unit-lane q8_0 tile does, took
    // 0.92-1.11x the time on top of that.)
    static constexpr bool kKeepSums = kRegisters < 32 && C > 1;

    // For the frame (SuperBlockTile).
    static constexpr int kBytes = T::kBytes, kRows = k_rows(C);
    using Sums = RowSums<C>;
    using Cols = ColumnBlock<C, kRowBias, kColumnBias>;
    static constexpr int kP = kPairs<C>;

    template <int R, int kJ, typename Cols>
    TANDEM_ALWAYS_INLINE static void step(const uint8_t* const* blocks,
                                          const SubBlockScales<T::kSub>* sc, const Cols& cols,
                                          Acc (&iacc)[R][C]) {
        V u[R], scale[R];
        Signs s[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            if constexpr (requires { T::template decode<kJ, true>(blocks[r], u[r], s[r]); }) {
                T::template decode<kJ, C == 1>(blocks[r], u[r], s[r]);
            } else {
                T::template decode<kJ>(blocks[r], u[r], s[r]);
            }
            if constexpr (!T::kUnitScales) scale[r] = pick_scales<kJ, T::kSub>(sc[r]);
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const V q = load64(cols.q(c) + 64 * kJ);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                if constexpr (T::kSigned) {
                    iacc[r][c] = dot_scaled(iacc[r][c], u[r], apply_signs(q, s[r]), scale[r]);
                } else if constexpr (kSum16) {
                    iacc[r][c] = dot_unit16(iacc[r][c], u[r], q);
                } else if constexpr (T::kUnitScales) {
                    iacc[r][c] = dot_unit(iacc[r][c], u[r], q);
                } else {
                    iacc[r][c] = dot_scaled(iacc[r][c], u[r], q, scale[r]);
                }
                if constexpr (kKeepSums) keep_sum(iacc[r][c]);
            }
        }
    }

    template <int R, bool kMatvec, typename Cols>
    TANDEM_ALWAYS_INLINE static void super_block(int64_t i, const uint8_t* const* rows,
                                                 size_t ahead, const Cols& cols,
                                                 RowSums<C> (&f)[R]) {
        const uint8_t* blocks[R];
        Prep prep[R];
        SubBlockScales<T::kSub> sc[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            blocks[r] = rows[r] + i * T::kBytes;
            prefetch_super_block<kMatvec>(blocks[r], T::kBytes, ahead);
            T::prepare(blocks[r], prep[r]);
            if constexpr (!T::kUnitScales) sc[r] = sub_block_scales<T::kSub>(prep[r].sc16);
        }
        Acc iacc[R][C];
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            Acc start = acc_zero();
            if constexpr (kColumnBias && !kSum16) start = acc_low(cols.start(c));
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) iacc[r][c] = start;
        }
        step<R, 0>(blocks, sc, cols, iacc);
        step<R, 1>(blocks, sc, cols, iacc);
        step<R, 2>(blocks, sc, cols, iacc);
        step<R, 3>(blocks, sc, cols, iacc);
        if constexpr (kSum16) {
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                const Acc start = acc_low(cols.start(c));
                TANDEM_UNROLL
                for (int r = 0; r < R; ++r) iacc[r][c] = add_acc(widen16(iacc[r][c]), start);
            }
        }

        // Per (row, column): the 8 int32 lanes scaled by d * factor * dy into 8 float lanes.
#if defined(TANDEM_SIMD_ZMM)
        if constexpr (kP > 0) {
            TANDEM_UNROLL
            for (int p = 0; p < kP; ++p) {
                const __m512 dy = cols.dy_pair(p);
                TANDEM_UNROLL
                for (int r = 0; r < R; ++r) {
                    __m512i sums = fold_pair(iacc[r][2 * p], iacc[r][2 * p + 1]);
                    if constexpr (kRowBias)
                        sums = _mm512_sub_epi32(
                            sums, _mm512_madd_epi16(cols.bsums_pair(p),
                                                    _mm512_broadcast_i64x4(prep[r].bias16)));
                    const __m512 d = _mm512_mul_ps(_mm512_set1_ps(prep[r].d), dy);
                    f[r].pair[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), d, f[r].pair[p]);
                }
            }
        }
#endif
        TANDEM_UNROLL
        for (int c = 2 * kP; c < C; ++c) {
            const __m256 dy = cols.dy(c);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                __m256i sums = fold(iacc[r][c]);
                if constexpr (kRowBias)
                    sums = _mm256_sub_epi32(sums, _mm256_madd_epi16(cols.bsums(c), prep[r].bias16));
                const __m256 d = _mm256_mul_ps(_mm256_set1_ps(prep[r].d), dy);
                __m256& acc = f[r].alone[c - 2 * kP];
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), d, acc);
            }
        }
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
