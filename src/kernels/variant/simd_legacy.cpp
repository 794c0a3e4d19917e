// SIMD dot-product tiles for the 32-value block formats against q8_0 / q8_1 activations:
// q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, and nvfp4 (64-value blocks over two q8_0
// blocks). A step covers 64 values (two activation blocks); each weight step is decoded once
// into unsigned bytes u (weight = u - bias) and dotted with every column of the tile.
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

// Weight traits. decode(p0, p1) gives the 64 u values of blocks p0 and p1 (p1 == p0 in the
// last step of an odd block count: its activation half is zero), scale() the weight scale of
// each int32 lane, min() (q4_1/q5_1) the min term in lanes 0 and 8.
//   kBias: weight value = u - kBias;  kMaxU: largest u (vpmaddubsw pairs saturate past 128).
struct Q4_0 {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 2, kBias = 8, kMaxU = 15;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) { return nibbles16x2(p0 + 2, p1 + 2); }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
struct Q4_1 {
    static constexpr int kBlockBytes = 20, kBlocksPerStep = 2, kBias = 0, kMaxU = 15;
    static constexpr bool kMin = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) { return nibbles16x2(p0 + 4, p1 + 4); }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
    static VF min(const uint8_t* p0, const uint8_t* p1) { return lane0s_fp16(p0 + 2, p1 + 2); }
};
// q5: bit 4 of value j is bit j of the 32-bit qh.
inline V high_bits(const uint8_t* qh0, const uint8_t* qh1) {
    return and_(bits_to_bytes(load_u32(qh0), load_u32(qh1)), set1_8(0x10));
}
struct Q5_0 {
    static constexpr int kBlockBytes = 22, kBlocksPerStep = 2, kBias = 16, kMaxU = 31;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return or_(nibbles16x2(p0 + 6, p1 + 6), high_bits(p0 + 2, p1 + 2));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
struct Q5_1 {
    static constexpr int kBlockBytes = 24, kBlocksPerStep = 2, kBias = 0, kMaxU = 31;
    static constexpr bool kMin = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return or_(nibbles16x2(p0 + 8, p1 + 8), high_bits(p0 + 4, p1 + 4));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
    static VF min(const uint8_t* p0, const uint8_t* p1) { return lane0s_fp16(p0 + 2, p1 + 2); }
};
struct Q8_0 {
    static constexpr int kBlockBytes = 34, kBlocksPerStep = 2, kBias = 128, kMaxU = 255;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return xor_(load32x2(p0 + 2, p1 + 2), set1_8(0x80));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
#if !defined(__aarch64__)  // (NEON: simd_neon.h)
// Non-linear levels through vpshufb, shifted to unsigned by the bias.
inline __m128i shifted_table(const int8_t* values, int bias) {
    return _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)),
                        _mm_set1_epi8(static_cast<char>(bias)));
}
#endif
struct Iq4Nl {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 2, kBias = 128, kMaxU = 255;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return lookup16(nibbles16x2(p0 + 2, p1 + 2), shifted_table(kIq4nlValues, kBias));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
// E2M1 doubled (-12..12), so the E8M0 scale is halved: 2^(e - 128), e = 0 and 1 subnormal.
struct E8m0Table {
    float half[256];
};
consteval E8m0Table make_e8m0_table() {
    E8m0Table t{};
    for (int e = 0; e < 256; ++e) {
        const uint32_t bits = e < 2 ? (0x00200000u << e) : static_cast<uint32_t>(e - 1) << 23;
        t.half[e] = __builtin_bit_cast(float, bits);
    }
    return t;
}
inline constexpr E8m0Table kE8m0 = make_e8m0_table();
struct Mxfp4 {
    static constexpr int kBlockBytes = 17, kBlocksPerStep = 2, kBias = 12, kMaxU = 24;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return lookup16(nibbles16x2(p0 + 1, p1 + 1), shifted_table(kE2m1DoubledValues, kBias));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) {
        return halves(kE8m0.half[*p0], kE8m0.half[*p1]);
    }
};
// Four UE4M3 scales, halved (doubled E2M1 values): the 7 low bits placed at float bit 20 make
// 2^(e - 127) (1 + m / 8) (or m 2^-129 when e = 0); times 2^119 that is half of
// 2^(e - 7) (1 + m / 8) (m 2^-9): exact. 0x7f decodes as 0 as in ggml; bit 7 is ignored.
#if defined(__aarch64__)
inline float32x4_t ue4m3_half4(const uint8_t* p) {
    const uint32x4_t x = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(load_u32(p)))));
    const uint32x4_t bits = vshlq_n_u32(vandq_u32(x, vdupq_n_u32(0x7f)), 20);
    const float32x4_t v = vmulq_f32(vreinterpretq_f32_u32(bits), vdupq_n_f32(0x1p119f));
    return vreinterpretq_f32_u32(
        vbicq_u32(vreinterpretq_u32_f32(v), vceqq_u32(x, vdupq_n_u32(0x7f))));
}
#else
inline __m128 ue4m3_half4(const uint8_t* p) {
    const __m128i x = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(load_u32(p))));
    const __m128i bits = _mm_slli_epi32(_mm_and_si128(x, _mm_set1_epi32(0x7f)), 20);
    const __m128 v = _mm_mul_ps(_mm_castsi128_ps(bits), _mm_set1_ps(0x1p119f));
    return _mm_andnot_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(x, _mm_set1_epi32(0x7f))), v);
}
#endif
struct Nvfp4 {
    static constexpr int kBlockBytes = 36, kBlocksPerStep = 1, kBias = 12, kMaxU = 24;
    static constexpr int kSegments = 4;  // scales per step (16 values each)
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t*) {
        return lookup16(nibbles8x4(p0 + 4), shifted_table(kE2m1DoubledValues, kBias));
    }
    static VF scale(const uint8_t* p0, const uint8_t*) { return quarters(ue4m3_half4(p0)); }
};

// Scales per 64-value step: one per 32-value block unless the type says otherwise.
template <typename T>
constexpr int segments_of() {
    if constexpr (requires { T::kSegments; }) {
        return T::kSegments;
    } else {
        return 2;
    }
}

// The bias is removed by starting each column's integer sum at -bias * sum(activation); that
// needs u * a pairs that cannot saturate vpmaddubsw (or VNNI). Otherwise (u up to 255 without
// VNNI) the signed weights use the sign trick.
template <typename T>
constexpr bool kUseBias = kVnni || T::kMaxU <= 128;

template <typename T>
V column_bias(V a) {
    if constexpr (T::kBias == 0 || !kUseBias<T>) {
        return zero();
    } else {
        return sub32(zero(), dot4(zero(), set1_8(T::kBias), a));
    }
}
template <typename T>
V weight_dot(V bias, V u, V a) {
    if constexpr (kUseBias<T>) {
        return dot4(bias, u, a);
    } else {
        static_assert(T::kBias == 128);
        V abs_w, signed_a;
        sign_split(xor_(u, set1_8(0x80)), a, abs_w, signed_a);
        return dot4(zero(), abs_w, signed_a);
    }
}

// Rows per tile: one for the matvec (tile.h); for the small matmul as many as the registers
// hold accumulators for (a V is two registers on AVX2).
constexpr int legacy_rows(int cols) {
    if (cols == 1) return 1;
    return kRegisters >= 32 ? (cols <= 3 ? 4 : 2) : 1;
}

template <typename T>
TANDEM_ALWAYS_INLINE void accumulate(FAcc& acc, V u, VF dw, VF mw, V q, V bias, VF d, VF s) {
    acc = fma_acc(acc, cvt(weight_dot<T>(bias, u, q)), mul(dw, d));
    if constexpr (T::kMin) acc = fma_acc(acc, mw, s);
}

// The activation side of one step of one column, prepared once for all rows: values, the
// bias start of the integer sums, the scales (and q8_1's s).
template <bool kQ8_1>
struct ColStep {
    V q, bias;
    VF d;
    VF s[kQ8_1 ? 1 : 0];
};

template <typename T, int C>
struct LegacyTile {
    static constexpr int R = legacy_rows(C);
    static constexpr bool kQ8_1 = T::kMin;
    static constexpr int kActBytes = kQ8_1 ? 36 : 34, kActQs = kQ8_1 ? 4 : 2;
    static constexpr int64_t kStepBytes = T::kBlocksPerStep * T::kBlockBytes;
    using Col = ColStep<kQ8_1>;
    // Steps per prepared chunk: at most 64 KiB of column data on the stack.
    static constexpr int64_t kChunk = 65536 / (C * sizeof(Col));
    // Rows per block when k needs several chunks: a block's rows stay in L2 between chunks.
    static constexpr int kRowBlock = 32;
    // Two accumulator sets when a tile has few accumulators, so steps do not wait on each
    // other's FMA.
    static constexpr int kSets = R * C < 4 ? 2 : 1;

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride);
    static void run_tiles(int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                          const uint8_t* a, size_t a_stride, float* out, size_t out_stride) {
        const int64_t n_act = k / 32, n_steps = (n_act + 1) / 2;
        alignas(64) Col cols[kChunk][C];
        if (n_steps <= kChunk) {
            prepare(a, a_stride, n_act, 0, n_steps, cols);
            rows(w, w_stride, 0, n_rows, n_act, 0, n_steps, cols, out, out_stride);
            return;
        }
        for (int rb = 0; rb < n_rows; rb += kRowBlock) {
            for (int64_t s0 = 0; s0 < n_steps; s0 += kChunk) {
                const int64_t ns = min_i64(kChunk, n_steps - s0);
                prepare(a, a_stride, n_act, s0, ns, cols);
                rows(w, w_stride, rb, min_int(kRowBlock, n_rows - rb), n_act, s0, ns, cols, out,
                     out_stride);
            }
        }
    }

    static void prepare(const uint8_t* a, size_t a_stride, int64_t n_act, int64_t s0, int64_t ns,
                        Col (&cols)[kChunk][C]) {
        for (int64_t i = 0; i < ns; ++i) {
            const int64_t b = 2 * (s0 + i);  // first activation block of the step
            const bool two = b + 1 < n_act;
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                const uint8_t* a0 = a + c * a_stride + b * kActBytes;
                const uint8_t* a1 = a0 + kActBytes;
                Col& col = cols[i][c];
                col.q = two ? load32x2(a0 + kActQs, a1 + kActQs) : load32_lo(a0 + kActQs);
                col.bias = column_bias<T>(col.q);
                col.d = halves(fp16(a0), two ? fp16(a1) : 0.0f);
                if constexpr (kQ8_1) col.s[0] = halves(fp16(a0 + 2), two ? fp16(a1 + 2) : 0.0f);
            }
        }
    }

    // Rows [r_begin, r_begin + count) over steps [s0, s0 + ns); the first chunk stores, later
    // chunks add.
    static void rows(const uint8_t* w, size_t w_stride, int r_begin, int count, int64_t n_act,
                     int64_t s0, int64_t ns, const Col (&cols)[kChunk][C], float* out,
                     size_t out_stride) {
        const size_t ahead = prefetch_ahead(R, w_stride);
        for_row_groups<R>(w + r_begin * w_stride + s0 * kStepBytes, w_stride, count,
                          [&](const uint8_t* const* rows, int n_valid, int r0) {
                              tile(rows, n_valid, ahead, n_act, s0, ns, cols, out + r_begin + r0,
                                   out_stride);
                          });
    }

    static void tile(const uint8_t* const* rows, int n_valid, size_t ahead, int64_t n_act,
                     int64_t s0, int64_t ns, const Col (&cols)[kChunk][C], float* out,
                     size_t out_stride) {
        FAcc acc[kSets][R][C];
        TANDEM_UNROLL
        for (auto& set : acc) {
            TANDEM_UNROLL
            for (auto& row : set) {
                TANDEM_UNROLL
                for (auto& x : row) x = facc_zero();
            }
        }
        // Steps before n_full hold two blocks; a last half step may end an odd block count.
        const int64_t n_full = min_i64(ns, n_act / 2 - s0);
        int64_t i = 0;
        for (; i + kSets <= n_full; i += kSets) {
            TANDEM_UNROLL
            for (int set = 0; set < kSets; ++set)
                step(rows, ahead, i + set, T::kBlockBytes, cols, acc[set]);
        }
        for (; i < ns; ++i) step(rows, ahead, i, i < n_full ? T::kBlockBytes : 0, cols, acc[0]);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                float sum = hsum(acc[0][r][c]);
                if constexpr (kSets == 2) sum += hsum(acc[1][r][c]);
                if (r < n_valid)
                    out[c * out_stride + r] = s0 == 0 ? sum : out[c * out_stride + r] + sum;
            }
        }
    }

    // Step i of the chunk: each row decoded once, then dotted with every column.
    TANDEM_ALWAYS_INLINE static void step(const uint8_t* const* rows, size_t ahead, int64_t i,
                                          int next, const Col (&cols)[kChunk][C],
                                          FAcc (&acc)[R][C]) {
        V u[R];
        VF dw[R], mw[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const uint8_t* p0 = rows[r] + i * kStepBytes;
            if constexpr (R == 1) {
                prefetch_next_page(p0, kStepBytes);
            } else {
                prefetch_l2(p0 + ahead);
            }
            u[r] = T::decode(p0, p0 + next);
            dw[r] = T::scale(p0, p0 + next);
            if constexpr (T::kMin) mw[r] = T::min(p0, p0 + next);
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const Col& col = cols[i][c];
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                VF s{};
                if constexpr (kQ8_1) s = col.s[0];
                accumulate<T>(acc[r][c], u[r], dw[r], mw[r], col.q, col.bias, col.d, s);
            }
        }
    }
};

#if defined(TANDEM_SIMD_ZMM) && defined(__AVX512VNNI__)
// Small matmul with the rows in the lanes (AVX-512 VNNI): 16 rows' steps are decoded as usual,
// then transposed so that vector g holds values 4g..4g+3 of every row; one vpdpbusd against the
// broadcast 4 activation bytes then advances 16 rows at once, and the float scaling is one FMA
// per scale segment for 16 rows, not one per row. The transposes and the decoding are shared by
// the C columns, so this pays from a few columns on.
template <typename T, int C>
struct LegacyLanes {
    static constexpr int kRows = 16;
    static constexpr int kSeg = segments_of<T>();
    static constexpr int kGroupsPerSeg = 16 / kSeg;
    static constexpr bool kQ8_1 = T::kMin;
    static constexpr int kActBytes = kQ8_1 ? 36 : 34, kActQs = kQ8_1 ? 4 : 2;
    static constexpr int64_t kStepBytes = T::kBlocksPerStep * T::kBlockBytes;
    // The activation side of one step of one column: the integer start of each segment
    // (-bias * sum of its activation values), block scales and q8_1's s.
    struct Col {
        int32_t bias[4];
        float d[2], s[2];
    };
    static constexpr int64_t kChunk = 256;  // steps per prepared chunk (16384 values)

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        const int64_t n_act = k / 32, n_steps = (n_act + 1) / 2;
        Col cols[kChunk][C];
        const size_t ahead = prefetch_ahead(kRows, w_stride);
        for (int64_t s0 = 0; s0 < n_steps; s0 += kChunk) {
            const int64_t ns = min_i64(kChunk, n_steps - s0);
            prepare(a, a_stride, n_act, s0, ns, cols);
            for_row_groups<kRows>(w + s0 * kStepBytes, w_stride, n_rows,
                                  [&](const uint8_t* const* rows, int n_valid, int r0) {
                                      tile(rows, n_valid, ahead, n_act, s0, ns, a, a_stride, cols,
                                           out + r0, out_stride);
                                  });
        }
    }

    static void prepare(const uint8_t* a, size_t a_stride, int64_t n_act, int64_t s0, int64_t ns,
                        Col (&cols)[kChunk][C]) {
        for (int64_t i = 0; i < ns; ++i) {
            const int64_t b = 2 * (s0 + i);
            const bool two = b + 1 < n_act;
            for (int c = 0; c < C; ++c) {
                const uint8_t* a0 = a + c * a_stride + b * kActBytes;
                Col& col = cols[i][c];
                for (int h = 0; h < 2; ++h) {
                    const uint8_t* ab = a0 + h * kActBytes;
                    const bool here = h == 0 || two;
                    col.d[h] = here ? fp16(ab) : 0.0f;
                    col.s[h] = here && kQ8_1 ? fp16(ab + 2) : 0.0f;
                    // Sums of the 16-value halves of the block (vpmaddubsw with ones).
                    int sums[2] = {0, 0};
                    if (here) {
                        for (int half = 0; half < 2; ++half) {
                            const __m128i x = _mm_loadu_si128(
                                reinterpret_cast<const __m128i*>(ab + kActQs + 16 * half));
                            __m128i t = _mm_madd_epi16(_mm_maddubs_epi16(_mm_set1_epi8(1), x),
                                                       _mm_set1_epi16(1));
                            t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
                            sums[half] =
                                _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 1)));
                        }
                    }
                    for (int g = 0; g < kSeg / 2; ++g) {
                        const int sum = kSeg == 2 ? sums[0] + sums[1] : sums[g];
                        col.bias[h * kSeg / 2 + g] = -T::kBias * sum;
                    }
                }
            }
        }
    }

    // 16 x 16 int32 transpose in place: row r's vector in, w[g] lane r = its bytes 4g..4g+3 out.
    TANDEM_ALWAYS_INLINE static void transpose(__m512i (&w)[16]) {
        __m512i t[16], u[16];
        TANDEM_UNROLL
        for (int k = 0; k < 8; ++k) {
            t[2 * k] = _mm512_unpacklo_epi32(w[2 * k], w[2 * k + 1]);
            t[2 * k + 1] = _mm512_unpackhi_epi32(w[2 * k], w[2 * k + 1]);
        }
        TANDEM_UNROLL
        for (int k = 0; k < 4; ++k) {  // u[4k + j], 128-bit lane L: rows 4k..4k+3, dword 4L + j
            u[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
            u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
            u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
            u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
        }
        TANDEM_UNROLL
        for (int j = 0; j < 4;
             ++j) {  // gather 128-bit lane L of u[j], u[4 + j], u[8 + j], u[12 + j]
            const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
            const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
            const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
            const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);
            w[j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
            w[4 + j] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
            w[8 + j] = _mm512_shuffle_i32x4(v1, v3, 0x88);
            w[12 + j] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
        }
    }

    static void tile(const uint8_t* const* rows, int n_valid, size_t ahead, int64_t n_act,
                     int64_t s0, int64_t ns, const uint8_t* a, size_t a_stride,
                     const Col (&cols)[kChunk][C], float* out, size_t out_stride) {
        alignas(64) float sbuf[kRows][16], mbuf[kRows][16];
        __m512 acc[C];
        TANDEM_UNROLL
        for (auto& x : acc) x = _mm512_setzero_ps();
        const __m512i lane_index = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(16));
        for (int64_t i = 0; i < ns; ++i) {
            const int64_t b = 2 * (s0 + i);
            const bool two = b + 1 < n_act;
            const int next = two && T::kBlocksPerStep == 2 ? T::kBlockBytes : 0;
            __m512i wv[16];
            TANDEM_UNROLL
            for (int r = 0; r < kRows; ++r) {
                const uint8_t* p0 = rows[r] + i * kStepBytes;
                prefetch_l2(p0 + ahead);
                wv[r] = T::decode(p0, p0 + next).x;
                _mm512_store_ps(sbuf[r], T::scale(p0, p0 + next).x);
                if constexpr (T::kMin) _mm512_store_ps(mbuf[r], T::min(p0, p0 + next).x);
            }
            transpose(wv);
            // Scale of segment s for every row: lane s * 16 / kSeg of each row's scale vector.
            __m512 seg[kSeg], m[2];
            TANDEM_UNROLL
            for (int sg = 0; sg < kSeg; ++sg) {
                seg[sg] = _mm512_i32gather_ps(
                    _mm512_add_epi32(lane_index, _mm512_set1_epi32(sg * kGroupsPerSeg)),
                    &sbuf[0][0], 4);
            }
            if constexpr (T::kMin) {
                m[0] = _mm512_i32gather_ps(lane_index, &mbuf[0][0], 4);
                m[1] = _mm512_i32gather_ps(_mm512_add_epi32(lane_index, _mm512_set1_epi32(8)),
                                           &mbuf[0][0], 4);
            }
            // Segment by segment, the C columns' sums advance together (C independent chains).
            const int n_seg = two ? kSeg : kSeg / 2;
            TANDEM_UNROLL
            for (int sg = 0; sg < kSeg; ++sg) {
                if (sg >= n_seg) break;
                const int half = sg / (kSeg / 2);
                __m512i isum[C];
                TANDEM_UNROLL
                for (int c = 0; c < C; ++c) isum[c] = _mm512_set1_epi32(cols[i][c].bias[sg]);
                TANDEM_UNROLL
                for (int gg = 0; gg < kGroupsPerSeg; ++gg) {
                    const int g = sg * kGroupsPerSeg + gg;
                    const int offset =
                        static_cast<int>(b + half) * kActBytes + kActQs + 4 * (g % 8);
                    TANDEM_UNROLL
                    for (int c = 0; c < C; ++c) {
                        const __m512i q =
                            _mm512_broadcastd_epi32(_mm_loadu_si32(a + c * a_stride + offset));
                        isum[c] = _mm512_dpbusd_epi32(isum[c], wv[g], q);
                    }
                }
                TANDEM_UNROLL
                for (int c = 0; c < C; ++c) {
                    acc[c] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(isum[c]),
                        _mm512_mul_ps(seg[sg], _mm512_set1_ps(cols[i][c].d[half])), acc[c]);
                }
            }
            if constexpr (T::kMin) {
                TANDEM_UNROLL
                for (int c = 0; c < C; ++c) {
                    acc[c] = _mm512_fmadd_ps(m[0], _mm512_set1_ps(cols[i][c].s[0]), acc[c]);
                    acc[c] = _mm512_fmadd_ps(m[1], _mm512_set1_ps(cols[i][c].s[1]), acc[c]);
                }
            }
        }
        const __mmask16 valid = static_cast<__mmask16>((1u << n_valid) - 1);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            float* o = out + c * out_stride;
            const __m512 prev = s0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(valid, o);
            _mm512_mask_storeu_ps(o, valid, _mm512_add_ps(prev, acc[c]));
        }
    }
};

// Where the rows-in-lanes tile pays (measured: from 4 columns on).
template <typename T, int C>
constexpr bool kUseLanes = C >= 4;
#endif

#if defined(__ARM_FEATURE_MATMUL_INT8)
// Small matmul with i8mm: one usmmla multiplies 2 x 8 unsigned weight bytes (two rows) by
// 8 x 2 signed activation bytes (two columns) into the 2 x 2 int32 sums [r0 c0, r0 c1, r1 c0,
// r1 c1], where one sdot serves one row-column pair. Rows go in pairs (kPairs per tile), the
// columns in pairs prepared once per chunk (the two columns' bytes interleaved by 8); the
// integer sums of a block start at -bias * sum(activation) as in LegacyTile. Types with one
// scale per 32-value block only (nvfp4's 16-value scales stay with LegacyTile).
template <typename T, int C>
struct LegacyMmla {
    static constexpr int kPairs = 2, kRows = 2 * kPairs;
    static constexpr int kColPairs = (C + 1) / 2;
    static constexpr bool kQ8_1 = T::kMin;
    static constexpr int kActBytes = kQ8_1 ? 36 : 34, kActQs = kQ8_1 ? 4 : 2;
    static constexpr int64_t kStepBytes = T::kBlocksPerStep * T::kBlockBytes;
    // One step of one column pair; per block h: bytes 8m..8m+7 of both columns in q[h][m],
    // bias, d and (q8_1) s in the lane order of the sums.
    struct Col {
        int8x16_t q[2][4];
        int32x4_t bias[2];
        float32x4_t d[2];
        float32x4_t s[kQ8_1 ? 2 : 0];
    };
    static constexpr int64_t kChunk = 65536 / (kColPairs * sizeof(Col));
    static constexpr int kRowBlock = 32;

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        const int64_t n_act = k / 32, n_steps = (n_act + 1) / 2;
        alignas(64) Col cols[kChunk][kColPairs];
        const size_t ahead = prefetch_ahead(kRows, w_stride);
        // Several chunks: a block of rows at a time, so that its rows stay in L2.
        const int row_block = n_steps <= kChunk ? n_rows : kRowBlock;
        for (int rb = 0; rb < n_rows; rb += row_block) {
            const int count = min_int(row_block, n_rows - rb);
            for (int64_t s0 = 0; s0 < n_steps; s0 += kChunk) {
                const int64_t ns = min_i64(kChunk, n_steps - s0);
                if (rb == 0 || n_steps > kChunk) prepare(a, a_stride, n_act, s0, ns, cols);
                for_row_groups<kRows>(w + rb * w_stride + s0 * kStepBytes, w_stride, count,
                                      [&](const uint8_t* const* rows, int n_valid, int r0) {
                                          tile(rows, n_valid, ahead, n_act, s0, ns, cols,
                                               out + rb + r0, out_stride);
                                      });
            }
        }
    }

    static void prepare(const uint8_t* a, size_t a_stride, int64_t n_act, int64_t s0, int64_t ns,
                        Col (&cols)[kChunk][kColPairs]) {
        for (int64_t i = 0; i < ns; ++i) {
            const int64_t b = 2 * (s0 + i);
            for (int cp = 0; cp < kColPairs; ++cp) {
                // An odd last column is paired with itself; its copy's sums are dropped.
                const uint8_t* col0 = a + 2 * cp * a_stride;
                const uint8_t* col1 = a + min_int(2 * cp + 1, C - 1) * a_stride;
                Col& col = cols[i][cp];
                for (int h = 0; h < 2; ++h) {
                    if (b + h >= n_act) {  // the missing half of a last half step
                        for (auto& q : col.q[h]) q = vdupq_n_s8(0);
                        col.bias[h] = vdupq_n_s32(0);
                        col.d[h] = vdupq_n_f32(0);
                        if constexpr (kQ8_1) col.s[h] = vdupq_n_f32(0);
                        continue;
                    }
                    const uint8_t* a0 = col0 + (b + h) * kActBytes;
                    const uint8_t* a1 = col1 + (b + h) * kActBytes;
                    int32_t sum[2] = {0, 0};
                    for (int half = 0; half < 2; ++half) {
                        const int64x2_t x0 = vreinterpretq_s64_s8(
                            vld1q_s8(reinterpret_cast<const int8_t*>(a0 + kActQs + 16 * half)));
                        const int64x2_t x1 = vreinterpretq_s64_s8(
                            vld1q_s8(reinterpret_cast<const int8_t*>(a1 + kActQs + 16 * half)));
                        col.q[h][2 * half] = vreinterpretq_s8_s64(vzip1q_s64(x0, x1));
                        col.q[h][2 * half + 1] = vreinterpretq_s8_s64(vzip2q_s64(x0, x1));
                        sum[0] += vaddlvq_s8(vreinterpretq_s8_s64(x0));
                        sum[1] += vaddlvq_s8(vreinterpretq_s8_s64(x1));
                    }
                    const int32_t b0 = -T::kBias * sum[0], b1 = -T::kBias * sum[1];
                    col.bias[h] = int32x4_t{b0, b1, b0, b1};
                    const float d0 = fp16(a0), d1 = fp16(a1);
                    col.d[h] = float32x4_t{d0, d1, d0, d1};
                    if constexpr (kQ8_1) {
                        const float t0 = fp16(a0 + 2), t1 = fp16(a1 + 2);
                        col.s[h] = float32x4_t{t0, t1, t0, t1};
                    }
                }
            }
        }
    }

    static void tile(const uint8_t* const* rows, int n_valid, size_t ahead, int64_t n_act,
                     int64_t s0, int64_t ns, const Col (&cols)[kChunk][kColPairs], float* out,
                     size_t out_stride) {
        float32x4_t acc[kPairs][kColPairs];
        TANDEM_UNROLL
        for (auto& pair : acc) {
            TANDEM_UNROLL
            for (auto& x : pair) x = vdupq_n_f32(0);
        }
        for (int64_t i = 0; i < ns; ++i) {
            const bool two = 2 * (s0 + i) + 1 < n_act;
            const int next = two && T::kBlocksPerStep == 2 ? T::kBlockBytes : 0;
            V u[kRows];
            float32x4_t dw[kPairs][2], mw[kPairs][2];
            TANDEM_UNROLL
            for (int r = 0; r < kRows; ++r) {
                const uint8_t* p0 = rows[r] + i * kStepBytes;
                prefetch_l2(p0 + ahead);
                u[r] = T::decode(p0, p0 + next);
            }
            TANDEM_UNROLL
            for (int p = 0; p < kPairs; ++p) {
                const uint8_t* p0 = rows[2 * p] + i * kStepBytes;
                const uint8_t* p1 = rows[2 * p + 1] + i * kStepBytes;
                // Lanes 0 and 8 of the row's scale vector hold the two blocks' scales.
                const VF s0v = T::scale(p0, p0 + next), s1v = T::scale(p1, p1 + next);
                TANDEM_UNROLL
                for (int h = 0; h < 2; ++h) {
                    const float x0 = vgetq_lane_f32(s0v.f[2 * h], 0);
                    const float x1 = vgetq_lane_f32(s1v.f[2 * h], 0);
                    dw[p][h] = float32x4_t{x0, x0, x1, x1};
                }
                if constexpr (T::kMin) {
                    const VF m0v = T::min(p0, p0 + next), m1v = T::min(p1, p1 + next);
                    TANDEM_UNROLL
                    for (int h = 0; h < 2; ++h) {
                        const float x0 = vgetq_lane_f32(m0v.f[2 * h], 0);
                        const float x1 = vgetq_lane_f32(m1v.f[2 * h], 0);
                        mw[p][h] = float32x4_t{x0, x0, x1, x1};
                    }
                }
            }
            TANDEM_UNROLL
            for (int h = 0; h < 2; ++h) {
                // Block h of each row pair as four 2 x 8 operands.
                uint8x16_t wm[kPairs][4];
                TANDEM_UNROLL
                for (int p = 0; p < kPairs; ++p) {
                    TANDEM_UNROLL
                    for (int half = 0; half < 2; ++half) {
                        const uint64x2_t x0 = vreinterpretq_u64_u8(u[2 * p].b[2 * h + half]);
                        const uint64x2_t x1 = vreinterpretq_u64_u8(u[2 * p + 1].b[2 * h + half]);
                        wm[p][2 * half] = vreinterpretq_u8_u64(vzip1q_u64(x0, x1));
                        wm[p][2 * half + 1] = vreinterpretq_u8_u64(vzip2q_u64(x0, x1));
                    }
                }
                TANDEM_UNROLL
                for (int cp = 0; cp < kColPairs; ++cp) {
                    const Col& col = cols[i][cp];
                    TANDEM_UNROLL
                    for (int p = 0; p < kPairs; ++p) {
                        int32x4_t isum = col.bias[h];
                        TANDEM_UNROLL
                        for (int m = 0; m < 4; ++m)
                            isum = vusmmlaq_s32(isum, wm[p][m], col.q[h][m]);
                        acc[p][cp] = vfmaq_f32(acc[p][cp], vcvtq_f32_s32(isum),
                                               vmulq_f32(dw[p][h], col.d[h]));
                        if constexpr (T::kMin)
                            acc[p][cp] = vfmaq_f32(acc[p][cp], mw[p][h], col.s[h]);
                    }
                }
            }
        }
        TANDEM_UNROLL
        for (int p = 0; p < kPairs; ++p) {
            TANDEM_UNROLL
            for (int cp = 0; cp < kColPairs; ++cp) {
                float lanes[4];
                vst1q_f32(lanes, acc[p][cp]);
                for (int j = 0; j < 4; ++j) {
                    const int r = 2 * p + j / 2, c = 2 * cp + j % 2;
                    if (r >= n_valid || c >= C) continue;
                    float& o = out[c * out_stride + r];
                    o = s0 == 0 ? lanes[j] : o + lanes[j];
                }
            }
        }
    }
};
#endif

template <typename T, int C>
void LegacyTile<T, C>::run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                           const uint8_t* a, size_t a_stride, float* out, size_t out_stride) {
#if defined(TANDEM_SIMD_ZMM) && defined(__AVX512VNNI__)
    if constexpr (kUseLanes<T, C>) {
        // (Fewer than 16 rows would mostly compute padding.)
        if (n_rows >= 16) {
            LegacyLanes<T, C>::run(k, w, w_stride, n_rows, a, a_stride, out, out_stride);
            return;
        }
    }
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
    if constexpr (C >= 2 && segments_of<T>() == 2) {
        LegacyMmla<T, C>::run(k, w, w_stride, n_rows, a, a_stride, out, out_stride);
        return;
    }
#endif
    run_tiles(k, w, w_stride, n_rows, a, a_stride, out, out_stride);
}

template <typename T>
void dot_legacy(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<LegacyTile, T>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace

void dot_q4_0(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Q4_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q4_1(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Q4_1>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q5_0(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Q5_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q5_1(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Q5_1>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q8_0(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Q8_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_iq4_nl(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Iq4Nl>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_mxfp4(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Mxfp4>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_nvfp4(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Nvfp4>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace tandem::TANDEM_VARIANT_NS
