// SIMD dot-product tiles for the lattice i-quants against q8_K activations: iq2_xxs, iq2_xs,
// iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m; and the ternary tq1_0, tq2_0 in the same frame. Per
// super-block, four steps of 64 values: the grid points are looked up (formats/iq_tables.h) into
// unsigned magnitudes u, the value signs are applied to the activations, products are summed in
// int32 with the odd sub-block scales 2s+1 applied as int16 (vpmaddubsw then vpmaddwd / vpdpwssd).
// The iq1 formats work in eighths: 8 * grid + shift (odd, never zero) is split into |.| and a sign
// like the others.
//
// Column invariance: the float work of one (row, column) pair is the same whatever the number
// of columns of the call: per super-block one int32 sum (exact), one product d * factor * dy and
// one fused multiply-add into that column's lane; integer work is shared between columns.
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

constexpr int kQ8KBytes = 292;  // q8_K: float d, int8 qs[256], int16 bsums[16]

// A row's super-block, prepared once for all columns.
struct Prep {
    __m256i sc16;  // odd sub-block scales 2s+1 in int16 lanes (T::kSub values each)
    float d;       // fp16 d times the format's constant factor (a power of two: exact)
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

const uint64_t* signs7() {
    return kIqSignMasks.p;
}

// Traits: prepare(block, Prep&); decode<j>(block, u, signs) gives step j (values 64j..64j+63):
// magnitudes u (unsigned bytes) and the signs to apply to the activations. kSub: values per
// sub-block scale (kUnitScales: all 1); kSigned: decode gives signs; kBias: weight = u - kBias (the
// ternary formats, corrected with the q8_K bsums).
struct Lattice {
    static constexpr bool kUnitScales = false;
    static constexpr bool kSigned = true;
    static constexpr int kBias = 0;
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
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 2 + 16 * kJ;
        const uint64_t* g = kIq2xxsPoints.p;
        const uint64_t* sg = signs7();
        const uint32_t a0 = load_u32(q + 4), a1 = load_u32(q + 12);
        u = set_u64x8(g[q[0]], g[q[1]], g[q[2]], g[q[3]], g[q[8]], g[q[9]], g[q[10]], g[q[11]]);
        s = signs_of(set_u64x8(sg[a0 & 127], sg[(a0 >> 7) & 127], sg[(a0 >> 14) & 127],
                               sg[(a0 >> 21) & 127], sg[a1 & 127], sg[(a1 >> 7) & 127],
                               sg[(a1 >> 14) & 127], sg[(a1 >> 21) & 127]));
    }
    static constexpr float kFactor = 0.125f;
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
        const uint64_t* g = kIq2xsPoints.p;
        const uint64_t* sg = signs7();
        // indices and sign indices split in SIMD, read back as scalars (store forwarding)
        alignas(16) uint16_t gi[8], si[8];
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        _mm_store_si128(reinterpret_cast<__m128i*>(gi), _mm_and_si128(x, _mm_set1_epi16(511)));
        _mm_store_si128(reinterpret_cast<__m128i*>(si), _mm_srli_epi16(x, 9));
        u = set_u64x8(g[gi[0]], g[gi[1]], g[gi[2]], g[gi[3]], g[gi[4]], g[gi[5]], g[gi[6]],
                      g[gi[7]]);
        s = signs_of(set_u64x8(sg[si[0]], sg[si[1]], sg[si[2]], sg[si[3]], sg[si[4]], sg[si[5]],
                               sg[si[6]], sg[si[7]]));
    }
    static constexpr float kFactor = 0.125f;
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
        const uint64_t* g = kIq2sPoints.p;
        const auto at = [&](int i) { return g[q[i] | ((h >> (2 * i)) & 3) << 8]; };
        u = set_u64x8(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
        s = signs_of_bits(load_u64(b + 34 + 8 * kJ));
    }
    static constexpr float kFactor = 0.125f;
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
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 2 + 16 * kJ;
        const uint32_t* g = kIq3xxsPoints.p;
        const uint64_t* sg = signs7();
        uint32_t pts[16];
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) pts[i] = g[q[i]];
        u = set_u32x16(pts);
        const uint32_t a0 = load_u32(b + 66 + 8 * kJ), a1 = load_u32(b + 70 + 8 * kJ);
        s = signs_of(set_u64x8(sg[a0 & 127], sg[(a0 >> 7) & 127], sg[(a0 >> 14) & 127],
                               sg[(a0 >> 21) & 127], sg[a1 & 127], sg[(a1 >> 7) & 127],
                               sg[(a1 >> 14) & 127], sg[(a1 >> 21) & 127]));
    }
    static constexpr float kFactor = 0.25f;
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
        const uint8_t* q = b + 2 + 16 * kJ;
        const uint32_t h = load_u16(b + 66 + 2 * kJ);  // bit i: bit 8 of index i of this step
        const uint32_t* g = kIq3sPoints.p;
        uint32_t pts[16];
        TANDEM_UNROLL
        for (int i = 0; i < 16; ++i) pts[i] = g[q[i] | ((h >> i) & 1) << 8];
        u = set_u32x16(pts);
        s = signs_of_bits(load_u64(b + 74 + 8 * kJ));
    }
    static constexpr float kFactor = 1.0f;
};

// The iq1 formats: grid values -1, 0, 1 and a shift of +-1/8 per group, in eighths w = 8 grid +
// shift (odd). The table holds grid + 1, so 8 (grid + 1) + (shift + 1) = w + 9 is built in
// uint64 without carries between bytes.
constexpr uint64_t kShiftUp = 0x0202020202020202;  // shift + 1 for shift = +1 (bytes)
TANDEM_ALWAYS_INLINE void iq1_split(V w9, V& u, Signs& s) {
    const V w = sub8(w9, set1_8(9));
    u = abs8(w);
    s = signs_of(w);
}

// iq1_s, 50 bytes: d, qs[32] (low 8 bits of the grid indices), qh[8] uint16 per sub-block: bits
// 3l..3l+2 = bits 8-10 of group l's index, bits 12-14 = s, bit 15 set: shift -1, else +1.
// x = d * (2s+1) * (grid + shift / 8).
struct Iq1S : Lattice {
    static constexpr int kBytes = 50, kSub = 32;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 34));
        const __m128i s = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
        p.sc16 = _mm256_castsi128_si256(_mm_or_si128(_mm_slli_epi16(s, 1), _mm_set1_epi16(1)));
        p.d = fp16_bits(load_u16(b)) * 0.125f;
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 2 + 8 * kJ;
        const uint32_t h0 = load_u16(b + 34 + 4 * kJ), h1 = load_u16(b + 36 + 4 * kJ);
        const uint64_t* g = kIq1sPointsBiased.p;
        const uint64_t up0 = h0 & 0x8000 ? 0 : kShiftUp, up1 = h1 & 0x8000 ? 0 : kShiftUp;
        const auto at = [&](int i, uint32_t h, uint64_t up) {
            return (g[q[i] | ((h >> (3 * (i % 4))) & 7) << 8] << 3) + up;
        };
        iq1_split(set_u64x8(at(0, h0, up0), at(1, h0, up0), at(2, h0, up0), at(3, h0, up0),
                            at(4, h1, up1), at(5, h1, up1), at(6, h1, up1), at(7, h1, up1)),
                  u, s);
    }
    static constexpr float kFactor = 0.125f;
};

// iq1_m, 56 bytes: qs[32] (low 8 bits of the grid indices), qh[16] (a nibble per group: bits
// 0-2 = bits 8-10 of its index, bit 3 set: shift -1, else +1), scales[8]: four uint16 words,
// 3-bit s per 16 values (word k / 4, bits 3 (k % 4)..), the fp16 d in their top nibbles.
struct Iq1M : Lattice {
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
        p.d = fp16_bits(d_bits) * 0.125f;
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs& s) {
        const uint8_t* q = b + 8 * kJ;
        const uint32_t h = load_u32(b + 32 + 4 * kJ);  // nibble i: group i of this step
        const uint64_t* g = kIq1sPointsBiased.p;
        const auto at = [&](int i) {
            const uint32_t nib = h >> (4 * i);
            return (g[q[i] | (nib & 7) << 8] << 3) + (nib & 8 ? 0 : kShiftUp);
        };
        iq1_split(set_u64x8(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)), u, s);
    }
    static constexpr float kFactor = 0.125f;
};

// The ternary formats: weight = u - 1 with u in 0..2 (tq2_0 also decodes 3 as +2), no sub-block
// scales (all 1), the -1 from the q8_K bsums.
struct Ternary {
    static constexpr int kSub = 32;
    static constexpr bool kUnitScales = true;
    static constexpr bool kSigned = false;
    static constexpr int kBias = 1;
    static constexpr float kFactor = 1.0f;
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
        u = and_(srl16_halves(bcast32(b + 32 * n), 2 * g0, 2 * g0 + 2), set1_8(3));
    }
};

// tq1_0, 54 bytes: qs[48], qh[4], d. Five trits per byte: trit k of byte x is
// (uint8(x * 3^k) * 3) >> 8. Trit k of qs[m] (m < 32) is value 32k + m, of qs[32 + m] value
// 160 + 16k + m, of qh[m] (k < 4) value 240 + 4k + m.
// The trits of the bytes of x, byte i taking power m[i / 2] (int16 lanes): the multiplies are
// done in int16 lanes, odd bytes apart so no carry reaches them.
TANDEM_ALWAYS_INLINE __m256i trits(__m256i x, __m256i m) {
    const __m256i even = _mm256_slli_epi16(_mm256_mullo_epi16(x, m), 8);
    const __m256i odd = _mm256_mullo_epi16(_mm256_and_si256(x, _mm256_set1_epi16(-256)), m);
    const __m256i three = _mm256_set1_epi16(3);
    return _mm256_or_si256(_mm256_mulhi_epu16(even, three),
                           _mm256_slli_epi16(_mm256_mulhi_epu16(odd, three), 8));
}
struct Tq1 : Ternary {
    static constexpr int kBytes = 54;
    TANDEM_ALWAYS_INLINE static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = _mm256_set1_epi16(1);
        p.d = fp16_bits(load_u16(b + 52));
    }
    template <int kJ>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, V& u, Signs&) {
        const auto pow = [](int lo, int hi) {
            return _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(lo)),
                                     _mm_set1_epi16(static_cast<short>(hi)));
        };
        if constexpr (kJ < 2) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
            constexpr int p0 = kJ == 0 ? 1 : 9;
            u = join(trits(x, _mm256_set1_epi16(p0)), trits(x, _mm256_set1_epi16(3 * p0)));
        } else {
            const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 32));
            const __m256i y = _mm256_broadcastsi128_si256(q1);
            if constexpr (kJ == 2) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
                u = join(trits(x, _mm256_set1_epi16(81)), trits(y, pow(1, 3)));
            } else {
                const __m256i z =
                    _mm256_setr_m128i(q1, _mm_set1_epi32(static_cast<int>(load_u32(b + 48))));
                u = join(trits(y, pow(9, 27)),
                         trits(z, _mm256_setr_epi16(81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9,
                                                    9, 27, 27)));
            }
        }
    }
};

// The sum of 8 float lanes, in a fixed order.
TANDEM_ALWAYS_INLINE float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

// Rows per small-matmul tile where registers allow; the matvec reads one row at a time.
constexpr int k_rows(int cols) {
    if (kRegisters >= 32) return cols <= 4 ? 4 : 2;
    return 1;
}

template <typename T, int C>
struct IqTile {
    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        if constexpr (C == 1) {
            for (int r = 0; r < n_rows; ++r) {
                const uint8_t* row = w + r * w_stride;
                tile<1, true>(k, &row, 1, 0, a, a_stride, out + r, out_stride);
            }
        } else {
            constexpr int R = k_rows(C);
            const size_t ahead = prefetch_ahead(R, w_stride);
            for_row_groups<R>(
                w, w_stride, n_rows, [&](const uint8_t* const* rows, int n_valid, int r0) {
                    tile<R, false>(k, rows, n_valid, ahead, a, a_stride, out + r0, out_stride);
                });
        }
    }

    // facc[r][c] accumulates row r against column c in 8 float lanes, one fma per super-block,
    // summed once at the end: the same operations for a column whatever C is.
    template <int R, bool kMatvec>
    static void tile(int64_t k, const uint8_t* const* rows, int n_valid, size_t ahead,
                     const uint8_t* a, size_t a_stride, float* out, size_t out_stride) {
        __m256 facc[R][C];
        TANDEM_UNROLL
        for (auto& row : facc) {
            TANDEM_UNROLL
            for (auto& x : row) x = _mm256_setzero_ps();
        }
        for (int64_t i = 0; i < k / 256; ++i)
            super_block<R, kMatvec>(i, rows, ahead, a, a_stride, facc);
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            if (r >= n_valid) break;
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) out[c * out_stride + r] = hsum8(facc[r][c]);
        }
    }

    template <int R, int kJ>
    TANDEM_ALWAYS_INLINE static void step(const uint8_t* const* blocks, const Scales16* sc,
                                          const uint8_t* a, size_t a_stride, int64_t i,
                                          Acc (&iacc)[R][C]) {
        V u[R], scale[R];
        Signs s[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            T::template decode<kJ>(blocks[r], u[r], s[r]);
            if constexpr (T::kUnitScales) {
                scale[r] = set1_16(1);
            } else {
                scale[r] = pick_scales<kJ, T::kSub>(sc[r]);
            }
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const V q = load64(a + c * a_stride + i * kQ8KBytes + 4 + 64 * kJ);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                if constexpr (T::kSigned) {
                    iacc[r][c] = dot_scaled(iacc[r][c], u[r], apply_signs(q, s[r]), scale[r]);
                } else {
                    iacc[r][c] = dot_scaled(iacc[r][c], u[r], q, scale[r]);
                }
            }
        }
    }

    template <int R, bool kMatvec>
    TANDEM_ALWAYS_INLINE static void super_block(int64_t i, const uint8_t* const* rows,
                                                 size_t ahead, const uint8_t* a, size_t a_stride,
                                                 __m256 (&facc)[R][C]) {
        const uint8_t* blocks[R];
        Prep prep[R];
        Scales16 sc[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            blocks[r] = rows[r] + i * T::kBytes;
            if constexpr (kMatvec) {
                prefetch_next_page(blocks[r], T::kBytes);
            } else {
                for (int line = 0; line < T::kBytes; line += 64)
                    prefetch_l2(blocks[r] + ahead + line);
            }
            T::prepare(blocks[r], prep[r]);
            sc[r] = scales16(prep[r].sc16);
        }
        Acc iacc[R][C];
        TANDEM_UNROLL
        for (auto& row : iacc) {
            TANDEM_UNROLL
            for (auto& x : row) x = acc_zero();
        }
        step<R, 0>(blocks, sc, a, a_stride, i, iacc);
        step<R, 1>(blocks, sc, a, a_stride, i, iacc);
        step<R, 2>(blocks, sc, a, a_stride, i, iacc);
        step<R, 3>(blocks, sc, a, a_stride, i, iacc);

        // Per (row, column): the 8 int32 lanes scaled by d * factor * dy into 8 float lanes.
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const uint8_t* y = a + c * a_stride + i * kQ8KBytes;
            __m256i bias = _mm256_setzero_si256();
            if constexpr (T::kBias != 0) {
                bias =
                    _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 260)),
                                      _mm256_set1_epi16(T::kBias));
            }
            const float dy = load_f32(y);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                __m256i sums = fold(iacc[r][c]);
                if constexpr (T::kBias != 0) sums = _mm256_sub_epi32(sums, bias);
                const __m256 d = _mm256_set1_ps(prep[r].d * dy);
                facc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), d, facc[r][c]);
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
