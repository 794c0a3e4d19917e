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
// Non-linear levels through vpshufb, shifted to unsigned by the bias.
inline __m128i shifted_table(const int8_t* values, int bias) {
    return _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)),
                        _mm_set1_epi8(static_cast<char>(bias)));
}
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
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(kE8m0.half[*p0], kE8m0.half[*p1]); }
};
// Four UE4M3 scales, halved (doubled E2M1 values): the 7 low bits placed at float bit 20 make
// 2^(e - 127) (1 + m / 8) (or m 2^-129 when e = 0); times 2^119 that is half of
// 2^(e - 7) (1 + m / 8) (m 2^-9): exact. 0x7f decodes as 0 as in ggml; bit 7 is ignored.
inline __m128 ue4m3_half4(const uint8_t* p) {
    const __m128i x = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(load_u32(p))));
    const __m128i bits = _mm_slli_epi32(_mm_and_si128(x, _mm_set1_epi32(0x7f)), 20);
    const __m128 v = _mm_mul_ps(_mm_castsi128_ps(bits), _mm_set1_ps(0x1p119f));
    return _mm_andnot_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(x, _mm_set1_epi32(0x7f))), v);
}
struct Nvfp4 {
    static constexpr int kBlockBytes = 36, kBlocksPerStep = 1, kBias = 12, kMaxU = 24;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t*) {
        return lookup16(nibbles8x4(p0 + 4), shifted_table(kE2m1DoubledValues, kBias));
    }
    static VF scale(const uint8_t* p0, const uint8_t*) { return quarters(ue4m3_half4(p0)); }
};

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

// Activation side of one step for one column.
template <bool kQ8_1>
struct Column {
    static constexpr int kBytes = kQ8_1 ? 36 : 34, kQs = kQ8_1 ? 4 : 2;
    V q;
    VF d, s{};
    Column(const uint8_t* a0, bool two) {
        const uint8_t* a1 = a0 + kBytes;
        q = two ? load32x2(a0 + kQs, a1 + kQs) : load32_lo(a0 + kQs);
        d = halves(fp16(a0), two ? fp16(a1) : 0.0f);
        if constexpr (kQ8_1) s = halves(fp16(a0 + 2), two ? fp16(a1 + 2) : 0.0f);
    }
};

// Rows per small-matmul tile: as many as the registers hold accumulators for (a V is two
// registers on AVX2). The matvec reads one row at a time (tile.h).
constexpr int legacy_rows(int cols) {
    if (kRegisters >= 32) return cols <= 3 ? 4 : 2;
    return 1;
}

template <typename T>
void accumulate(FAcc& acc, V u, VF dw, VF mw, V q, V bias, VF d, VF s) {
    acc = fma_acc(acc, cvt(weight_dot<T>(bias, u, q)), mul(dw, d));
    if constexpr (T::kMin) acc = fma_acc(acc, mw, s);
}

// Byte offset of weight step s, and of its second block (0 in the half step that ends an odd
// block count: the decoders then read the first block twice against a zero activation half).
template <typename T>
struct StepAt {
    int64_t offset;
    int next;
    StepAt(int64_t s, int64_t n_act) {
        offset = s * T::kBlocksPerStep * T::kBlockBytes;
        next = T::kBlocksPerStep == 2 && 2 * s + 1 < n_act ? T::kBlockBytes : 0;
    }
};

template <typename T, int C>
struct LegacyTile {
    using Col = Column<T::kMin>;

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        if constexpr (C == 1) {
            matvec(k, w, w_stride, n_rows, a, out);
        } else {
            constexpr int R = legacy_rows(C);
            const size_t ahead = prefetch_ahead(R, w_stride);
            for_row_groups<R>(w, w_stride, n_rows, [&](const uint8_t* const* rows, int n_valid, int r0) {
                tile<R>(k, rows, n_valid, ahead, a, a_stride, out + r0, out_stride);
            });
        }
    }

    static constexpr int64_t kStepBytes = T::kBlocksPerStep * T::kBlockBytes;

    static void matvec_step(FAcc& acc, const uint8_t* p0, int next, size_t ahead, V q, V bias, VF d, VF s) {
        prefetch_l2(p0 + ahead);
        VF mw{};
        if constexpr (T::kMin) mw = T::min(p0, p0 + next);
        accumulate<T>(acc, T::decode(p0, p0 + next), T::scale(p0, p0 + next), mw, q, bias, d, s);
    }

    // One row at a time against activation data prepared once per call (its q, bias, scales),
    // in chunks of kChunk steps so the preparation stays in L1.
    static void matvec(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a, float* out) {
        constexpr int64_t kChunk = 128;
        const int64_t n_act = k / 32, n_steps = (n_act + 1) / 2;
        const size_t ahead = prefetch_ahead(1, w_stride);
        V q[kChunk], bias[kChunk];
        VF d[kChunk], s[T::kMin ? kChunk : 1];
        for (int64_t s0 = 0; s0 < n_steps; s0 += kChunk) {
            const int64_t ns = min_i64(kChunk, n_steps - s0);
            for (int64_t i = 0; i < ns; ++i) {
                const Col col(a + (s0 + i) * 2 * Col::kBytes, 2 * (s0 + i) + 1 < n_act);
                q[i] = col.q;
                bias[i] = column_bias<T>(col.q);
                d[i] = col.d;
                if constexpr (T::kMin) s[i] = col.s;
            }
            // Steps before n_full have two blocks; one half step may end an odd block count.
            const int64_t n_full = min_i64(ns, n_act / 2 - s0);
            for (int r = 0; r < n_rows; ++r) {
                const uint8_t* row = w + r * w_stride + s0 * kStepBytes;
                // Two accumulators: consecutive steps do not wait on each other's FMA.
                FAcc acc0 = facc_zero(), acc1 = facc_zero();
                int64_t i = 0;
                for (; i + 2 <= n_full; i += 2) {
                    matvec_step(acc0, row + i * kStepBytes, T::kBlockBytes, ahead, q[i], bias[i], d[i], s[T::kMin ? i : 0]);
                    matvec_step(acc1, row + (i + 1) * kStepBytes, T::kBlockBytes, ahead, q[i + 1], bias[i + 1], d[i + 1],
                                s[T::kMin ? i + 1 : 0]);
                }
                for (; i < ns; ++i) {
                    matvec_step(acc0, row + i * kStepBytes, i < n_full ? T::kBlockBytes : 0, ahead, q[i], bias[i], d[i],
                                s[T::kMin ? i : 0]);
                }
                const float sum = hsum(acc0) + hsum(acc1);
                out[r] = s0 == 0 ? sum : out[r] + sum;
            }
        }
    }

    // R rows side by side: each row's step decoded once for all C columns.
    template <int R>
    static void tile(int64_t k, const uint8_t* const* rows, int n_valid, size_t ahead, const uint8_t* a,
                     size_t a_stride, float* out, size_t out_stride) {
        FAcc acc[R][C];
        TANDEM_UNROLL
        for (auto& row : acc) {
            TANDEM_UNROLL
            for (auto& x : row) x = facc_zero();
        }
        const int64_t n_act = k / 32, n_steps = (n_act + 1) / 2;
        for (int64_t st = 0; st < n_steps; ++st) {
            const StepAt<T> at(st, n_act);
            V u[R];
            VF dw[R], mw[R];
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                const uint8_t* p0 = rows[r] + at.offset;
                prefetch_l2(p0 + ahead);
                u[r] = T::decode(p0, p0 + at.next);
                dw[r] = T::scale(p0, p0 + at.next);
                if constexpr (T::kMin) mw[r] = T::min(p0, p0 + at.next);
            }
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                const Col col(a + c * a_stride + st * 2 * Col::kBytes, 2 * st + 1 < n_act);
                const V bias = column_bias<T>(col.q);
                TANDEM_UNROLL
                for (int r = 0; r < R; ++r) accumulate<T>(acc[r][c], u[r], dw[r], mw[r], col.q, bias, col.d, col.s);
            }
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                if (r < n_valid) out[c * out_stride + r] = hsum(acc[r][c]);
            }
        }
    }
};

template <typename T>
void dot_legacy(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<LegacyTile, T>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace

void dot_q4_0(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Q4_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q4_1(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Q4_1>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q5_0(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Q5_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q5_1(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Q5_1>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_q8_0(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Q8_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_iq4_nl(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Iq4Nl>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_mxfp4(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Mxfp4>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }
void dot_nvfp4(TANDEM_DOT_TILE_PARAMS) { dot_legacy<Nvfp4>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride); }

}  // namespace tandem::TANDEM_VARIANT_NS
