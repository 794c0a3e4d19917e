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

// A row's super-block, prepared once for all columns: sub-block scales (and mins) per 16
// values as int16, and the float factors.
struct Prep {
    __m256i sc16;  // scale of values 16i..16i+15 in int16 lane i
    __m256i mn16;  // min of values 16i..16i+15 (types with mins)
    float d, dmin;
};

inline __m256i dup_pairs(__m128i x8) {  // 8 int16 -> each twice: one per 16 values
    return _mm256_set_m128i(_mm_unpackhi_epi16(x8, x8), _mm_unpacklo_epi16(x8, x8));
}
// q4_K / q5_K: eight 6-bit scales and mins packed in 12 bytes (ggml's get_scale_min_k4):
//   j < 4: sc = s[j] & 63, m = s[j+4] & 63; j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
//   m = (s[j+4] >> 4) | (s[j] >> 6) << 4.
inline void k4_scales(const uint8_t* s, Prep& p) {
    const uint32_t u0 = load_u32(s), u1 = load_u32(s + 4), u2 = load_u32(s + 8);
    const uint32_t sc_lo = u0 & 0x3f3f3f3f, m_lo = u1 & 0x3f3f3f3f;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4;
    const uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4;
    const __m128i sc = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo)));
    const __m128i m = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo)));
    p.sc16 = dup_pairs(sc);
    p.mn16 = dup_pairs(m);
}

// Traits: prepare(block, Prep&), decode<j>(block) -> the u (or signed) bytes of step j.
//   kBias: weight = u - kBias (0: none); kMins: d * sc * q - dmin * m; kSigned: decode gives
//   signed bytes (sign trick for vpmaddubsw).
struct Q2K {
    static constexpr int kBytes = 84, kBias = 0;
    static constexpr bool kMins = true, kSigned = false;
    static void prepare(const uint8_t* b, Prep& p) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
        p.sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(15)));
        p.mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
        p.d = fp16(b + 80);
        p.dmin = fp16(b + 82);
    }
    // Step j = half n = j / 2, 2-bit groups g0 = 2 (j % 2) and g0 + 1 of qs[32n..32n+31].
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, g0 = 2 * (kJ % 2);
        return and_(srl16_halves(bcast32(b + 16 + 32 * n), 2 * g0, 2 * g0 + 2), set1_8(3));
    }
};
struct Q3K {
    static constexpr int kBytes = 110, kBias = 4;
    static constexpr bool kMins = false, kSigned = false;
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
        p.d = fp16(b + 108);
        p.dmin = 0;
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
    static constexpr int kBytes = 144, kBias = 0;
    static constexpr bool kMins = true, kSigned = false;
    static void prepare(const uint8_t* b, Prep& p) {
        k4_scales(b + 4, p);
        p.d = fp16(b);
        p.dmin = fp16(b + 2);
    }
    template <int kJ>
    static V decode(const uint8_t* b) {
        return nibbles32(b + 16 + 32 * kJ);
    }
};
struct Q5K {
    static constexpr int kBytes = 176, kBias = 0;
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
    static constexpr int kBytes = 210, kBias = 32;
    static constexpr bool kMins = false, kSigned = false;
    static void prepare(const uint8_t* b, Prep& p) {
        p.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
        p.d = fp16(b + 208);
        p.dmin = 0;
    }
    // Step j = half n, odd = j % 2: low nibbles (odd = 0) or high nibbles of ql[64n..64n+63];
    // 2-bit groups 2 odd and 2 odd + 1 of qh[32n..32n+31] on top.
    template <int kJ>
    static V decode(const uint8_t* b) {
        constexpr int n = kJ / 2, odd = kJ % 2;
        const V low = and_(srl16_halves(load64(b + 64 * n), 4 * odd, 4 * odd), set1_8(15));
        const V high = and_(srl16_halves(bcast32(b + 128 + 32 * n), 4 * odd, 4 * odd + 2), set1_8(3));
        return or_(low, sll16<4>(high));
    }
};
struct Iq4Xs {
    static constexpr int kBytes = 136, kBias = 0;
    static constexpr bool kMins = false, kSigned = true;
    // ls - 32 per sub-block: low nibbles from scales_l, 2 high bits per sub-block from scales_h
    // (placed by multiplying the broadcast scales_h, then taking the top 2 bits).
    static void prepare(const uint8_t* b, Prep& p) {
        const __m128i l = _mm_cvtsi32_si128(static_cast<int>(load_u32(b + 4)));
        const __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(l, _mm_set1_epi8(15)),
                                             _mm_and_si128(_mm_srli_epi16(l, 4), _mm_set1_epi8(15)));
        const __m128i h = _mm_srli_epi16(
            _mm_mullo_epi16(_mm_set1_epi16(static_cast<short>(load_u16(b + 2))),
                            _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
            14);
        const __m128i ls = _mm_or_si128(_mm_cvtepu8_epi16(lo), _mm_slli_epi16(h, 4));
        p.sc16 = dup_pairs(_mm_sub_epi16(ls, _mm_set1_epi16(32)));
        p.d = fp16(b);
        p.dmin = 0;
    }
    template <int kJ>
    static V decode(const uint8_t* b) {
        const uint8_t* q = b + 8 + 32 * kJ;
        return lookup16(nibbles16x2(q, q + 16),
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    }
};

constexpr int kQ8KBytes = 292;

template <typename T, int R, int C>
struct KTile {
    static void run(int64_t k, const uint8_t* const* rows, int n_valid, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        // C == 1: lanes hold partial sums; C > 1: lane c holds column c.
        __m256 facc[R];
        for (auto& x : facc) x = _mm256_setzero_ps();
        const int64_t nb = k / 256;
        for (int64_t i = 0; i < nb; ++i) super_block(i, rows, a, a_stride, facc);
        for (int r = 0; r < n_valid; ++r) {
            if constexpr (C == 1) {
                out[r] = hsum_lanes(facc[r]);
            } else {
                alignas(32) float lanes[8];
                _mm256_store_ps(lanes, facc[r]);
                for (int c = 0; c < C; ++c) out[c * out_stride + r] = lanes[c];
            }
        }
    }

    static float hsum_lanes(__m256 v) {
        __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        x = _mm_add_ps(x, _mm_movehl_ps(x, x));
        return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
    }

    template <int kJ>
    static void step(const uint8_t* const* blocks, const Scales16* sc, const uint8_t* a,
                     size_t a_stride, int64_t i, Acc (&iacc)[R][C]) {
        V u[R], scale[R];
        for (int r = 0; r < R; ++r) {
            u[r] = T::template decode<kJ>(blocks[r]);
            scale[r] = pick_scales<kJ>(sc[r]);
        }
        for (int c = 0; c < C; ++c) {
            const V q = load64(a + c * a_stride + i * kQ8KBytes + 4 + 64 * kJ);
            for (int r = 0; r < R; ++r) {
                if constexpr (T::kSigned) {
                    V abs_w, signed_q;
                    sign_split(u[r], q, abs_w, signed_q);
                    iacc[r][c] = dot_scaled(iacc[r][c], abs_w, signed_q, scale[r]);
                } else {
                    iacc[r][c] = dot_scaled(iacc[r][c], u[r], q, scale[r]);
                }
            }
        }
    }

    static void super_block(int64_t i, const uint8_t* const* rows, const uint8_t* a,
                            size_t a_stride, __m256 (&facc)[R]) {
        const uint8_t* blocks[R];
        Prep prep[R];
        Scales16 sc[R];
        for (int r = 0; r < R; ++r) {
            blocks[r] = rows[r] + i * T::kBytes;
            T::prepare(blocks[r], prep[r]);
            sc[r] = scales16(prep[r].sc16);
        }
        Acc iacc[R][C];
        for (auto& row : iacc) {
            for (auto& x : row) x = acc_zero();
        }
        step<0>(blocks, sc, a, a_stride, i, iacc);
        step<1>(blocks, sc, a, a_stride, i, iacc);
        step<2>(blocks, sc, a, a_stride, i, iacc);
        step<3>(blocks, sc, a, a_stride, i, iacc);

        for (int r = 0; r < R; ++r) {
            __m256 f[C];
            for (int c = 0; c < C; ++c) {
                const uint8_t* y = a + c * a_stride + i * kQ8KBytes;
                const float dy = load_f32(y);
                const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 260));
                __m256i isum = fold(iacc[r][c]);
                if constexpr (T::kBias != 0) {
                    // sum of sc * (u - bias) * q = sum of sc * u * q - bias * sum of sc * bsum
                    static_assert((T::kBias & (T::kBias - 1)) == 0);
                    const __m256i scb = _mm256_slli_epi16(prep[r].sc16, __builtin_ctz(T::kBias));
                    isum = _mm256_sub_epi32(isum, _mm256_madd_epi16(scb, bsums));
                }
                f[c] = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(prep[r].d * dy));
                if constexpr (T::kMins) {
                    const __m256i mins = _mm256_madd_epi16(prep[r].mn16, bsums);
                    f[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(prep[r].dmin * dy), f[c]);
                }
            }
            if constexpr (C == 1) {
                facc[r] = _mm256_add_ps(facc[r], f[0]);
            } else {
                facc[r] = _mm256_add_ps(facc[r], transpose_sums<C>(f));
            }
        }
    }
};

constexpr int k_rows(int cols) {
    if (kRegisters >= 32) return cols <= 4 ? 4 : 2;
    return cols == 1 ? 2 : 1;
}

template <typename T>
void dot_k(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<KTile, T, k_rows>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace

void dot_q2_K(TANDEM_DOT_TILE_PARAMS) { dot_k<Q2K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q3_K(TANDEM_DOT_TILE_PARAMS) { dot_k<Q3K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q4_K(TANDEM_DOT_TILE_PARAMS) { dot_k<Q4K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q5_K(TANDEM_DOT_TILE_PARAMS) { dot_k<Q5K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q6_K(TANDEM_DOT_TILE_PARAMS) { dot_k<Q6K>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_iq4_xs(TANDEM_DOT_TILE_PARAMS) { dot_k<Iq4Xs>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }

}  // namespace tandem::TANDEM_VARIANT_NS
