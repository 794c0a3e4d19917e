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
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(fp16(p0), fp16(p1)); }
};
struct Q4_1 {
    static constexpr int kBlockBytes = 20, kBlocksPerStep = 2, kBias = 0, kMaxU = 15;
    static constexpr bool kMin = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) { return nibbles16x2(p0 + 4, p1 + 4); }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(fp16(p0), fp16(p1)); }
    static VF min(const uint8_t* p0, const uint8_t* p1) { return lane0s(fp16(p0 + 2), fp16(p1 + 2)); }
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
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(fp16(p0), fp16(p1)); }
};
struct Q5_1 {
    static constexpr int kBlockBytes = 24, kBlocksPerStep = 2, kBias = 0, kMaxU = 31;
    static constexpr bool kMin = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return or_(nibbles16x2(p0 + 8, p1 + 8), high_bits(p0 + 4, p1 + 4));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(fp16(p0), fp16(p1)); }
    static VF min(const uint8_t* p0, const uint8_t* p1) { return lane0s(fp16(p0 + 2), fp16(p1 + 2)); }
};
struct Q8_0 {
    static constexpr int kBlockBytes = 34, kBlocksPerStep = 2, kBias = 128, kMaxU = 255;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return xor_(load32x2(p0 + 2, p1 + 2), set1_8(0x80));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(fp16(p0), fp16(p1)); }
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
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(fp16(p0), fp16(p1)); }
};
// E2M1 doubled (-12..12), so the E8M0 scale is halved: 2^(e - 128), e = 0 and 1 subnormal.
inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : static_cast<uint32_t>(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
struct Mxfp4 {
    static constexpr int kBlockBytes = 17, kBlocksPerStep = 2, kBias = 12, kMaxU = 24;
    static constexpr bool kMin = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return lookup16(nibbles16x2(p0 + 1, p1 + 1), shifted_table(kE2m1DoubledValues, kBias));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves(e8m0_half(*p0), e8m0_half(*p1)); }
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
    VF d, s;
    Column(const uint8_t* a0, bool two) {
        const uint8_t* a1 = a0 + kBytes;
        q = two ? load32x2(a0 + kQs, a1 + kQs) : load32_lo(a0 + kQs);
        d = halves(fp16(a0), two ? fp16(a1) : 0.0f);
        if constexpr (kQ8_1) s = halves(fp16(a0 + 2), two ? fp16(a1 + 2) : 0.0f);
    }
};

template <typename T, int R, int C>
struct LegacyTile {
    static constexpr bool kQ8_1 = T::kMin;
    using Col = Column<kQ8_1>;

    static void run(int64_t k, const uint8_t* const* rows, int n_valid, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        FAcc acc[R][C];
        for (auto& row : acc) {
            for (auto& x : row) x = facc_zero();
        }
        const int64_t n_act = k / 32;
        const int64_t n_steps = n_act / 2;
        for (int64_t s = 0; s < n_steps; ++s) step(s, true, rows, a, a_stride, acc);
        if (n_act % 2 != 0) step(n_steps, false, rows, a, a_stride, acc);
        for (int c = 0; c < C; ++c) {
            for (int r = 0; r < n_valid; ++r) out[c * out_stride + r] = hsum(acc[r][c]);
        }
    }

    static void accumulate(FAcc& acc, V u, VF dw, const VF* mw, const Col& col, V bias) {
        acc = fma_acc(acc, cvt(weight_dot<T>(bias, u, col.q)), mul(dw, col.d));
        if constexpr (T::kMin) acc = fma_acc(acc, *mw, col.s);
    }

    static void step(int64_t s, bool two, const uint8_t* const* rows, const uint8_t* a,
                     size_t a_stride, FAcc (&acc)[R][C]) {
        const int64_t offset = s * T::kBlocksPerStep * T::kBlockBytes;
        const int next = two && T::kBlocksPerStep == 2 ? T::kBlockBytes : 0;
        const int64_t a_offset = s * 2 * Col::kBytes;
        if constexpr (C == 1) {
            // Matvec: the column is shared, each row decoded as it is used.
            const Col col(a + a_offset, two);
            const V bias = column_bias<T>(col.q);
            for (int r = 0; r < R; ++r) {
                const uint8_t* p0 = rows[r] + offset;
                VF mw;
                if constexpr (T::kMin) mw = T::min(p0, p0 + next);
                accumulate(acc[r][0], T::decode(p0, p0 + next), T::scale(p0, p0 + next), &mw, col, bias);
            }
        } else {
            // Small matmul: each row's step decoded once for all the columns.
            V u[R];
            VF dw[R], mw[R];
            for (int r = 0; r < R; ++r) {
                const uint8_t* p0 = rows[r] + offset;
                u[r] = T::decode(p0, p0 + next);
                dw[r] = T::scale(p0, p0 + next);
                if constexpr (T::kMin) mw[r] = T::min(p0, p0 + next);
            }
            for (int c = 0; c < C; ++c) {
                const Col col(a + c * a_stride + a_offset, two);
                const V bias = column_bias<T>(col.q);
                for (int r = 0; r < R; ++r) accumulate(acc[r][c], u[r], dw[r], &mw[r], col, bias);
            }
        }
    }
};

// Rows per tile: as many as the registers hold accumulators for (a V is two registers on AVX2).
constexpr int legacy_rows(int cols) {
    if (kRegisters >= 32) return cols <= 3 ? 4 : 2;
    return cols == 1 ? 4 : 1;
}

template <typename T>
void dot_legacy(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<LegacyTile, T, legacy_rows>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
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
