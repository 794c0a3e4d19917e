// SIMD dot-product tiles for the 256-value super-block formats against q8_K activations:
// q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs. Per super-block, four steps of 64 values: the
// weights decode to unsigned bytes u (weight = u - bias) or, for iq4_xs, signed bytes; products
// are summed in int32 with the 16-value sub-block scales applied as int16 (vpmaddubsw then
// vpmaddwd / vpdpwssd); the q8_K bsums give the bias and min terms; one float scaling per
// super-block.
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

// A row's super-block, prepared once for all columns: sub-block scales (and mins) as int16,
// and the float factors.
struct Prep {
    __m256i sc16;    // scale of sub-block i in int16 lane i (16 or 8 sub-blocks: T::kSub)
    __m256i mn16;    // min of values 16i..16i+15 in int16 lane i (types with mins)
    __m128 dd;       // lane 0: d, lane 1: dmin
    Multiples mult;  // kPrescaled: the sub-block scales' multiples
};

inline __m128 fp16x2(const uint8_t* p) {
    return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(p))));
}
inline __m128 fp16x1(const uint8_t* p) {
    return _mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(p)));
}

// q4_K / q5_K: the eight 6-bit scales and mins packed in 12 bytes (ggml's get_scale_min_k4):
//   j < 4: sc = s[j] & 63, m = s[j+4] & 63; j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
//   m = (s[j+4] >> 4) | (s[j] >> 6) << 4.
// Unpacked with byte shuffles into [sc0..sc7, m0..m7] (the 16-byte load reads 4 bytes of qs).
inline __m128i k4_scales_mins(const uint8_t* s) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i a =
        _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i low = _mm_or_si128(
        _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
        _mm_and_si128(_mm_srli_epi16(a, 4),
                      _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m128i b =
        _mm_shuffle_epi8(x, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    return _mm_or_si128(low, _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)));
}
// int16 lanes 8..15 (the mins of 32-value sub-blocks), each twice: one per 16 values.
inline __m256i dup_high8(__m256i x) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_permutexvar_epi16(
        _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), x);
#else
    const __m128i h = _mm256_extracti128_si256(x, 1);
    return _mm256_set_m128i(_mm_unpackhi_epi16(h, h), _mm_unpacklo_epi16(h, h));
#endif
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
    static void prepare(const uint8_t* b, Prep& p) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
        const __m128i sc = _mm_and_si128(s, _mm_set1_epi8(15));
        p.sc16 = _mm256_cvtepu8_epi16(sc);
        p.mult = multiples_of(sc);
        p.mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
        p.dd = fp16x2(b + 80);
    }
    // Step j = half n = j / 2, 2-bit groups g0 = 2 (j % 2) and g0 + 1 of qs[32n..32n+31].
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, g0 = 2 * (kJ % 2);
        return and_(srl16_halves(bcast32(b + 16 + 32 * n), 2 * g0, 2 * g0 + 2), set1_8(3));
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
        p.dd = fp16x1(b + 108);
    }
    // Low 2 bits as q2_K; bit 4n + g of hmask[l] is the third bit (set: q = low, else low - 4).
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, g0 = 2 * (kJ % 2);
        const V low = and_(srl16_halves(bcast32(b + 32 + 32 * n), 2 * g0, 2 * g0 + 2), set1_8(3));
        const V high = and_(srl16_halves(bcast32(b), 4 * n + g0, 4 * n + g0 + 1), set1_8(1));
        return or_(low, sll16<2>(high));
    }
};
struct Q4K {
    static constexpr int kBytes = 144, kSub = 32, kBias = 0;
    static constexpr bool kMins = true, kSigned = false;
    static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = _mm256_cvtepu8_epi16(k4_scales_mins(b + 4));
        p.mn16 = dup_high8(p.sc16);
        p.dd = fp16x2(b);
    }
    template <int kJ>
    static V decode(const uint8_t* b) {
        return nibbles32(b + 16 + 32 * kJ);
    }
};
struct Q5K {
    static constexpr int kBytes = 176, kSub = 32, kBias = 0;
    static constexpr bool kMins = true, kSigned = false;
    static void prepare(const uint8_t* b, Prep& p) { Q4K::prepare(b, p); }
    // Bit 2j (first 32 values) and 2j + 1 (last 32) of qh[l] are bit 4.
    template <int kJ>
    static V decode(const uint8_t* b) {
        const V high = and_(srl16_halves(bcast32(b + 16), 2 * kJ, 2 * kJ + 1), set1_8(1));
        return or_(nibbles32(b + 48 + 32 * kJ), sll16<4>(high));
    }
};
struct Q6K {
    static constexpr int kBytes = 210, kSub = 16, kBias = 32;
    static constexpr bool kMins = false, kSigned = false;
    static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
        p.dd = fp16x1(b + 208);
    }
    // Step j = half n, odd = j % 2: low nibbles (odd = 0) or high nibbles of ql[64n..64n+63];
    // 2-bit groups 2 odd and 2 odd + 1 of qh[32n..32n+31] on top.
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, odd = kJ % 2;
        const V low = and_(srl16_halves(load64(b + 64 * n), 4 * odd, 4 * odd), set1_8(15));
        const V high =
            and_(srl16_halves(bcast32(b + 128 + 32 * n), 4 * odd, 4 * odd + 2), set1_8(3));
        return or_(low, sll16<4>(high));
    }
};
struct Iq4Xs {
    static constexpr int kBytes = 136, kSub = 32, kBias = 0;
    static constexpr bool kMins = false, kSigned = true;
    // ls - 32 per sub-block: low nibbles from scales_l, 2 high bits per sub-block from scales_h
    // (placed by multiplying the broadcast scales_h, then taking the top 2 bits).
    static void prepare(const uint8_t* b, Prep& p) {
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
        p.dd = fp16x1(b);
    }
    template <int kJ>
    static V decode(const uint8_t* b) {
        const uint8_t* q = b + 8 + 32 * kJ;
        return lookup16(nibbles16x2(q, q + 16),
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    }
};

constexpr int kQ8KBytes = 292;

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
    Scales16 sc;
    TANDEM_ALWAYS_INLINE void prepare(const uint8_t* block) {
        b = block;
        T::prepare(b, p);
        if constexpr (!kScaled) sc = scales16(p.sc16);
    }
    // Step kJ's weights and the int16 scales of their sub-blocks (kScaled: applied already).
    template <int kJ>
    TANDEM_ALWAYS_INLINE void step(V& w, V& scale) const {
        if constexpr (kScaled) {
            w = times_scales<kJ>(p.mult, T::template decode<kJ>(b));
        } else {
            w = T::template decode<kJ>(b);
            scale = pick_scales<kJ, T::kSub>(sc);
        }
    }
};

// One step of one row against one column: int32 sums of sc * w * q.
template <typename T, bool kScaled>
TANDEM_ALWAYS_INLINE Acc step_dot(Acc acc, V w, V q, V scale) {
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
// The bias term as int32 lanes: bias * sum of sc * bsum (same scale d as the main sums).
template <typename T>
__m256i bias_sums(const Prep& p, __m256i bsums) {
    return _mm256_madd_epi16(biased_scales<T>(p), bsums);
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

template <typename T, int C>
struct KTile {
    static constexpr bool kScaled = prescaled<T>();  // (in the small matmul)

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        if constexpr (C == 1) {
            for (int r = 0; r < n_rows; ++r) out[r] = matvec_row(k, w + r * w_stride, a);
        } else {
            tiles(k, w, w_stride, n_rows, a, a_stride, out, out_stride);
        }
    }

    // Matvec. Per super-block the exact int32 total of the products (and of the mins) is
    // scaled into one float: acc += S * d * dy, acc -= M * dmin * dy, in this order, as the
    // tiles do for each column (so a column's result does not depend on its tile).
    static float matvec_row(int64_t k, const uint8_t* row, const uint8_t* a) {
        __m128 acc = _mm_setzero_ps();  // lane 0
        for (int64_t i = 0; i < k / 256; ++i) {
            const uint8_t* b = row + i * T::kBytes;
            prefetch_stream(b, T::kBytes);
            Prepared<T, false> blk;
            blk.prepare(b);
            const Prep& p = blk.p;
            const uint8_t* y = a + i * kQ8KBytes;
            Acc iacc = acc_zero();
            V w, scale;
            blk.template step<0>(w, scale);
            iacc = step_dot<T, false>(iacc, w, load64(y + 4), scale);
            blk.template step<1>(w, scale);
            iacc = step_dot<T, false>(iacc, w, load64(y + 68), scale);
            blk.template step<2>(w, scale);
            iacc = step_dot<T, false>(iacc, w, load64(y + 132), scale);
            blk.template step<3>(w, scale);
            iacc = step_dot<T, false>(iacc, w, load64(y + 196), scale);
            const __m128 f = _mm_mul_ps(p.dd, _mm_set1_ps(load_f32(y)));  // d * dy, dmin * dy
            __m256i sums = fold(iacc), mins = _mm256_setzero_si256();
            if constexpr (T::kBias != 0 || T::kMins) {
                const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 260));
                if constexpr (T::kBias != 0) sums = _mm256_sub_epi32(sums, bias_sums<T>(p, bsums));
                if constexpr (T::kMins) mins = _mm256_madd_epi16(p.mn16, bsums);
            }
            // The totals are converted as vectors: a scalar conversion would merge into acc
            // and lengthen the chain from one super-block to the next.
            const __m128 totals = _mm_cvtepi32_ps(hsum_i32x2(sums, mins));  // S, M
            acc = _mm_fmadd_ss(totals, f, acc);
            if constexpr (T::kMins)
                acc = _mm_fnmadd_ss(_mm_movehdup_ps(totals), _mm_movehdup_ps(f), acc);
        }
        return _mm_cvtss_f32(acc);
    }

    // The small matmul's bias and min terms are dot products of a row's int16 scales (or mins)
    // with the columns' bsums. They are taken with the columns' bsums transposed, once per
    // call, so that a row needs a few vpdpwssd with its scales broadcast and the result is
    // already one lane per column: kLanes lanes per column (8 / C rounded to a power of two),
    // lane kLanes c + e of vector j holding pair kLanes j + e of column c, a pair being two
    // bsums (of 16 values each, or of 32 for the types with a min per 32 values).
    // kFirstPair: the first int32 pair of row_pairs() that meets them.
    static constexpr bool kMins32 = T::kMins && T::kSub == 32;
    static constexpr int kPairs = kMins32 ? 4 : (T::kMins || T::kBias != 0) ? 8 : 0;
    static constexpr int kFirstPair = kMins32 ? 4 : 0;
    static constexpr int kLanes = C <= 2 ? 4 : C <= 4 ? 2 : 1;
    static constexpr int kVectors = kPairs > 0 ? kPairs / kLanes : 1;  // (no empty arrays)
    static_assert(!(T::kMins && T::kBias != 0));

    // Super-block i of the C columns, as the tiles read it: the q8_K values side by side (one
    // base address for all columns), the scales dy (lane c: column c, 0 past C) and the
    // transposed bsums.
    struct ColumnBlock {
        alignas(64) uint8_t q[C][256];
        alignas(32) float dy[8];
        alignas(32) int32_t bsums[kVectors][8];
    };
    static constexpr int64_t kChunk = kPreparedChunkBytes / sizeof(ColumnBlock);
    static_assert(kChunk >= 1);

    // Pair p of column c's bsums at y.
    static uint32_t bsum_pair(const uint8_t* y, int p) {
        if constexpr (kMins32) {  // (sums of 32 values fit int16)
            const uint32_t x = load_u32(y + 260 + 8 * p), z = load_u32(y + 264 + 8 * p);
            return ((x + (x >> 16)) & 0xffff) | (z + (z >> 16)) << 16;
        } else {
            return load_u32(y + 260 + 4 * p);
        }
    }

    static void prepare(const uint8_t* a, size_t a_stride, int64_t i0, int64_t n,
                        ColumnBlock* cols) {
        for (int64_t i = 0; i < n; ++i) {
            ColumnBlock& col = cols[i];
            for (int c = 0; c < 8; ++c) {
                const uint8_t* y = a + c * a_stride + (i0 + i) * kQ8KBytes;
                if (c < C) __builtin_memcpy(col.q[c], y + 4, 256);
                col.dy[c] = c < C ? load_f32(y) : 0.0f;
            }
            for (int j = 0; j < kPairs / kLanes; ++j) {
                for (int l = 0; l < 8; ++l) {
                    const int c = l / kLanes, p = kLanes * j + l % kLanes;
                    col.bsums[j][l] = c < C ? static_cast<int32_t>(bsum_pair(
                                                  a + c * a_stride + (i0 + i) * kQ8KBytes, p))
                                            : 0;
                }
            }
        }
    }

    // The small matmul: k in chunks of kChunk super-blocks, each with its prepared columns;
    // a row's float sums continue from one chunk to the next through out (exact in floats, so
    // a column's result does not depend on C).
    static void tiles(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                      size_t a_stride, float* out, size_t out_stride) {
        constexpr int R = k_rows<T>(C);
        const size_t ahead = prefetch_ahead(R, w_stride);
        const int64_t n_blocks = k / 256;
        ColumnBlock cols[kChunk];
        for (int64_t i0 = 0; i0 < n_blocks; i0 += kChunk) {
            const int64_t n = min_i64(kChunk, n_blocks - i0);
            prepare(a, a_stride, i0, n, cols);
            for_row_groups<R>(
                w + i0 * T::kBytes, w_stride, n_rows,
                [&](const uint8_t* const* rows, int n_valid, int r0) {
                    tile<R>(rows, n_valid, ahead, cols, n, i0 > 0, out + r0, out_stride);
                });
        }
    }

    // R rows side by side over a chunk's n super-blocks, each row's steps decoded once for all
    // C columns; float sums per row in one vector, lane c = column c (carried: continued from
    // out).
    template <int R>
    static void tile(const uint8_t* const* rows, int n_valid, size_t ahead,
                     const ColumnBlock* cols, int64_t n, bool carried, float* out,
                     size_t out_stride) {
        __m256 facc[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            alignas(32) float lanes[8] = {};
            if (carried && r < n_valid) {
                for (int c = 0; c < C; ++c) lanes[c] = out[c * out_stride + r];
            }
            facc[r] = _mm256_load_ps(lanes);
        }
        for (int64_t i = 0; i < n; ++i) super_block<R>(i, rows, ahead, cols[i], facc);
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            if (r >= n_valid) break;
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, facc[r]);
            for (int c = 0; c < C; ++c) out[c * out_stride + r] = lanes[c];
        }
    }

    template <int R, int kJ>
    TANDEM_ALWAYS_INLINE static void step(const Prepared<T, kScaled>* blk, const ColumnBlock& col,
                                          Acc (&iacc)[R][C]) {
        V u[R], scale[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) blk[r].template step<kJ>(u[r], scale[r]);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const V q = load64(col.q[c] + 64 * kJ);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                iacc[r][c] = step_dot<T, kScaled>(iacc[r][c], u[r], q, scale[r]);
                // (16 registers: the sums in step order, else GCC spills; C = 4, 8 12-17%
                // faster with AVX2 on Zen 5)
                if constexpr (kRegisters < 32) keep_sum(iacc[r][c]);
            }
        }
    }

    // The int32 pairs of a row's super-block that meet the columns' bsums: the mins, or the
    // scales times -kBias.
    static __m256i row_pairs(const Prep& p) {
        if constexpr (T::kBias != 0) {
            return _mm256_sub_epi16(_mm256_setzero_si256(), biased_scales<T>(p));
        } else if constexpr (kMins32) {
            return p.sc16;  // (the mins in int16 lanes 8..15)
        } else {
            return p.mn16;
        }
    }
    // The row's pairs dotted with the columns' bsums of one super-block, lane c = column c.
    // (Independent of the integer sums, and in two chains: work that overlaps the
    // super-block's dot products.)
    TANDEM_ALWAYS_INLINE static __m256i bsum_terms(const Prep& p,
                                                   const int32_t (&bsums)[kVectors][8]) {
        // Through memory, so that the pairs are broadcast by loads rather than by shuffles
        // (GCC's choice when it sees the store).
        alignas(32) int32_t pairs[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(pairs), row_pairs(p));
        const int32_t* stored = pairs;
        __asm__("" : "+r"(stored) : "m"(pairs));
        __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        TANDEM_UNROLL
        for (int j = 0; j < kVectors; ++j) {
            const int32_t* first = stored + kFirstPair + kLanes * j;
            __m256i row;
            if constexpr (kLanes == 1) {
                row = _mm256_set1_epi32(*first);
            } else if constexpr (kLanes == 2) {
                row = _mm256_set1_epi64x(static_cast<long long>(load_u64(
                    reinterpret_cast<const uint8_t*>(first))));
            } else {
                row = _mm256_broadcastsi128_si256(
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(first)));
            }
            acc[j % 2] = dpwssd(acc[j % 2], row,
                                _mm256_load_si256(reinterpret_cast<const __m256i*>(bsums[j])));
        }
        __m256i t = _mm256_add_epi32(acc[0], acc[1]);
        // A column's kLanes lanes summed into lane c.
        if constexpr (kLanes >= 2) t = _mm256_add_epi32(t, _mm256_srli_epi64(t, 32));
        if constexpr (kLanes == 4) t = _mm256_add_epi32(t, _mm256_srli_si256(t, 8));
        if constexpr (kLanes == 2)
            t = _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0));
        if constexpr (kLanes == 4)
            t = _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
        return t;
    }

    // Super-block i of R rows against the C columns: acc += S * d * dy, then acc -= M * dmin *
    // dy per column, the matvec's steps.
    template <int R>
    TANDEM_ALWAYS_INLINE static void super_block(int64_t i, const uint8_t* const* rows,
                                                 size_t ahead, const ColumnBlock& col,
                                                 __m256 (&facc)[R]) {
        Prepared<T, kScaled> blk[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const uint8_t* block = rows[r] + i * T::kBytes;
            for (int line = 0; line < T::kBytes; line += 64) prefetch_l2(block + ahead + line);
            blk[r].prepare(block);
        }
        Acc iacc[R][C];
        TANDEM_UNROLL
        for (auto& row : iacc) {
            TANDEM_UNROLL
            for (auto& x : row) x = acc_zero();
        }
        step<R, 0>(blk, col, iacc);
        step<R, 1>(blk, col, iacc);
        step<R, 2>(blk, col, iacc);
        step<R, 3>(blk, col, iacc);

        const __m256 dy = _mm256_load_ps(col.dy);
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const Prep& p = blk[r].p;
            __m256i s = column_sums<C>(iacc[r]);
            if constexpr (T::kBias != 0) s = _mm256_add_epi32(s, bsum_terms(p, col.bsums));
            const __m256 d = _mm256_mul_ps(_mm256_broadcastss_ps(p.dd), dy);
            facc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, facc[r]);
            if constexpr (T::kMins) {
                const __m256i m = bsum_terms(p, col.bsums);
                const __m256 dmin = _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p.dd)), dy);
                facc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), dmin, facc[r]);
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
