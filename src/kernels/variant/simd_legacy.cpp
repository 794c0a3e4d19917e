// SIMD dot-product tiles for the 32-value block formats against q8_0 / q8_1 activations:
// q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, nvfp4 (64-value blocks over two q8_0
// blocks), and on x86 q2_0 (64-value blocks) and q1_0 (128-value blocks over two steps). A
// step covers 64 values (two activation blocks); each weight step is decoded once into
// unsigned bytes u (weight = u - bias) and dotted with every column of the tile.
#include "formats/iq_tables.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

// Weight traits. decode(p0, p1) gives the 64 u values of blocks p0 and p1 (p1 == p0 in the
// last step of an odd block count: its activation half is zero), scale() the weight scale of
// each int32 lane. kFp16Scale: each block starts with its fp16 scale d (the small-matmul tiles
// gather those per group of steps). kMin (q4_1/q5_1): each block's fp16 min m at byte 2
// (weight = d u + m).
//   kBias: weight value = u - kBias;  kMaxU: largest u (vpmaddubsw pairs saturate past 128).
struct Q4_0 {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 2, kBias = 8, kMaxU = 15;
    static constexpr bool kMin = false, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) { return nibbles16x2(p0 + 2, p1 + 2); }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
struct Q4_1 {
    static constexpr int kBlockBytes = 20, kBlocksPerStep = 2, kBias = 0, kMaxU = 15;
    static constexpr bool kMin = true, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) { return nibbles16x2(p0 + 4, p1 + 4); }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
// q5: bit 4 of value j is bit j of the 32-bit qh.
inline V high_bits(const uint8_t* qh0, const uint8_t* qh1) {
    return and_(bits_to_bytes(load_u32(qh0), load_u32(qh1)), set1_8(0x10));
}
struct Q5_0 {
    static constexpr int kBlockBytes = 22, kBlocksPerStep = 2, kBias = 16, kMaxU = 31;
    static constexpr bool kMin = false, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return or_(nibbles16x2(p0 + 6, p1 + 6), high_bits(p0 + 2, p1 + 2));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
struct Q5_1 {
    static constexpr int kBlockBytes = 24, kBlocksPerStep = 2, kBias = 0, kMaxU = 31;
    static constexpr bool kMin = true, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return or_(nibbles16x2(p0 + 8, p1 + 8), high_bits(p0 + 4, p1 + 4));
    }
    static VF scale(const uint8_t* p0, const uint8_t* p1) { return halves_fp16(p0, p1); }
};
struct Q8_0 {
    static constexpr int kBlockBytes = 34, kBlocksPerStep = 2, kBias = 128, kMaxU = 255;
    static constexpr bool kMin = false, kFp16Scale = true;
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
    static constexpr bool kMin = false, kFp16Scale = true;
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
    static constexpr bool kMin = false, kFp16Scale = false;
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
    static constexpr bool kMin = false, kFp16Scale = false;
    static V decode(const uint8_t* p0, const uint8_t*) {
        return lookup16(nibbles8x4(p0 + 4), shifted_table(kE2m1DoubledValues, kBias));
    }
    static VF scale(const uint8_t* p0, const uint8_t*) { return quarters(ue4m3_half4(p0)); }
};

#if !defined(__aarch64__)
// q1_0, 18 bytes, 128 values: d, then bit j of qs[16] = value j: weight = bit ? 1 : -1, here
// u = 2 bit, bias 1. Two steps per block: decode gets the block (p0) and the step's half of it
// (p1 = p0 or p0 + 8). Values in simd.h's bit order (by bit planes on AVX2), the activations
// reordered to match once per column.
struct Q1_0 {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 1, kStepsPerBlock = 2, kBias = 1,
                         kMaxU = 2;
    static constexpr bool kMin = false, kFp16Scale = false, kOneScale = true;
    static V decode(const uint8_t*, const uint8_t* p1) { return bits2(p1 + 2); }
    static VF scale(const uint8_t* p0, const uint8_t*) { return splat_fp16(p0); }
    static V act_q(V q) { return to_bit_order(q); }
    static V act_bias(const int32_t* b) { return bit_order_bias(b); }
    static VF act_scales(const float* d) { return bit_order_scales(d); }
};
// q2_0, 18 bytes, 64 values: d, then value j = bits 2(j % 4).. of qs[j / 4], weight = q - 1.
// Decoded by bit planes (crumbs16); the activations are put in the same order once per column
// (act_q), which mixes the two q8_0 blocks over the int32 lanes (act_d).
struct Q2_0 {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 1, kBias = 1, kMaxU = 3;
    static constexpr bool kMin = false, kFp16Scale = false, kOneScale = true;
    static V decode(const uint8_t* p0, const uint8_t*) { return crumbs16(p0 + 2); }
    static VF scale(const uint8_t* p0, const uint8_t*) { return splat_fp16(p0); }
    static V act_q(V q) { return to_crumb_order(q); }
    static V act_bias(const int32_t* b) { return crumb_order_bias(b); }
    static VF act_scales(const float* d) { return crumb_order_scales(d); }
};
#endif

// Optional traits: steps per weight block (default 1), the activation values and scales of a
// step in the weights' value order (default: as they come, block 0 in lanes 0..7).
template <typename T>
constexpr int steps_per_block() {
    if constexpr (requires { T::kStepsPerBlock; }) {
        return T::kStepsPerBlock;
    } else {
        return 1;
    }
}
// Formats whose blocks (one or two steps) are scaled by one weight scale in every lane: the
// scale multiplies the block's sum of activation-scaled terms (block_step).
template <typename T>
constexpr bool one_scale() {
    if constexpr (requires { T::kOneScale; }) {
        return T::kOneScale;
    } else {
        return false;
    }
}
template <typename T>
V act_q(V q) {
    if constexpr (requires { T::act_q(q); }) {
        return T::act_q(q);
    } else {
        return q;
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

// One step's term into the accumulator: the only float work whose order matters (with the
// min terms, LegacyTile::min_terms), the same for every tile shape. One fused operation on the
// accumulator's chain, so consecutive steps overlap.
template <typename T>
TANDEM_ALWAYS_INLINE void accumulate(FAcc& acc, V u, VF dw, V q, V bias, VF d) {
    acc = add_product(acc, cvt(weight_dot<T>(bias, u, q)), mul(dw, d));
}

// Steps whose row data the tiles gather at once (16 blocks): the mins of q4_1 / q5_1, whose
// terms (m * s per block, s = the q8_1 block's d * sum of its values) go into the accumulators
// together, one fused multiply-add per (row, column) instead of a multiply and an add per step;
// and in the small matmul the fp16 scales, converted in one instruction instead of one and a
// permute per step (the same values: the matvec, which that makes 10-30% slower on Zen 5, keeps
// its conversion per step).
constexpr int kGroupSteps = 8;
// A row's gathered group: block j's scale and min in lane j (0 past the row's end).
struct RowGroup {
    alignas(64) float d[2 * kGroupSteps];
    alignas(64) float m[2 * kGroupSteps];
};

// The activation side of one step of one column, prepared once for all rows: values, the
// bias start of the integer sums, the scales.
template <bool kOneScale = false>
struct ColStep {
    V q, bias;
    VF d;
};
// One-scale formats (block_step): the values only, and apart (ColExtra) per q8_0 block the
// start of the integer sum (-bias * sum of its values, added once) and the scale; the column
// data read for every row is 80 bytes a step instead of 192.
template <>
struct ColStep<true> {
    V q;
};
struct ColExtra {
    int32_t b[2];
    float d[2];
};

template <typename T, int C>
struct LegacyTile {
    static constexpr int R = legacy_rows(C);
    static constexpr bool kQ8_1 = T::kMin;
    static constexpr int kActBytes = kQ8_1 ? 36 : 34, kActQs = kQ8_1 ? 4 : 2;
    static constexpr int kStepsPerBlock = steps_per_block<T>();
    static constexpr bool kOneScale = one_scale<T>();
    // (With two steps per block: bytes per step on average; chunks start at whole blocks.)
    static constexpr int64_t kStepBytes = T::kBlocksPerStep * T::kBlockBytes / kStepsPerBlock;
    using Col = ColStep<kOneScale>;
    // Steps per prepared chunk: column data that stays in L1 (32 KiB: Zen 4's L1D; a 64 KiB
    // chunk made C = 8 15-20% slower). The one-scale formats take 64 KiB: their column data is
    // small (80 bytes a step, K = 4096 fits one chunk) and costlier to prepare again per row
    // block.
    static constexpr int64_t kChunkBytes = kOneScale ? 65536 : 32768;
    // Chunks start at whole weight blocks (and whole groups where the rows are gathered).
    static constexpr bool kGroupScales = T::kFp16Scale && C > 1, kGroups = kGroupScales || T::kMin;
    static constexpr int64_t kStepAlign = kGroups ? kGroupSteps : kStepsPerBlock;
    static constexpr int64_t kColBytes = sizeof(Col) + (kOneScale ? sizeof(ColExtra) : 0) +
                                         (T::kMin ? 2 * sizeof(float) : 0);
    static constexpr int64_t kChunk = kChunkBytes / (C * kColBytes) / kStepAlign * kStepAlign;
    struct Chunk {
        Col cols[kChunk][C];
        ColExtra extra[kOneScale ? kChunk : 1][C];
        // q8_1's s of the blocks of each min group (lane j: block j of the group; 0 past the end)
        alignas(64) float s[T::kMin ? kChunk / kGroupSteps : 1][C][2 * kGroupSteps];
    };
    // Rows per block when k needs several chunks: a block's rows stay in L2 between chunks,
    // and their accumulators wait in memory (the sums of one column must not depend on C, so
    // chunks continue the accumulators rather than adding partial sums). 128 rows amortise
    // preparing each chunk (32 rows: 5-10% slower at C = 8).
    static constexpr int kRowBlock = 128;

    // Accumulators of a row block across chunks of k: loaded before a chunk (in), stored after
    // it instead of the result (out).
    struct Carry {
        FAcc (*acc)[C] = nullptr;  // [kRowBlock][C]
        bool in = false, out = false;
    };

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride);
    static void run_tiles(int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                          const uint8_t* a, size_t a_stride, float* out, size_t out_stride) {
        const int64_t n_act = k / 32, n_steps = (n_act + 1) / 2;
        alignas(64) Chunk cols;
        if (n_steps <= kChunk) {
            prepare(a, a_stride, n_act, 0, n_steps, cols);
            rows(w, w_stride, 0, n_rows, n_act, 0, n_steps, cols, out, out_stride, Carry{});
            return;
        }
        alignas(64) FAcc carried[kRowBlock][C];
        for (int rb = 0; rb < n_rows; rb += kRowBlock) {
            for (int64_t s0 = 0; s0 < n_steps; s0 += kChunk) {
                const int64_t ns = min_i64(kChunk, n_steps - s0);
                prepare(a, a_stride, n_act, s0, ns, cols);
                const Carry carry{carried, s0 > 0, s0 + ns < n_steps};
                rows(w, w_stride, rb, min_int(kRowBlock, n_rows - rb), n_act, s0, ns, cols, out,
                     out_stride, carry);
            }
        }
    }

    static void prepare(const uint8_t* a, size_t a_stride, int64_t n_act, int64_t s0, int64_t ns,
                        Chunk& cols) {
        for (int64_t i = 0; i < ns; ++i) {
            const int64_t b = 2 * (s0 + i);  // first activation block of the step
            const bool two = b + 1 < n_act;
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                const uint8_t* a0 = a + c * a_stride + b * kActBytes;
                const uint8_t* a1 = a0 + kActBytes;
                Col& col = cols.cols[i][c];
                if constexpr (kOneScale) {
#if !defined(__aarch64__)
                    // (a whole number of steps per block: two activation blocks)
                    col.q = T::act_q(load32x2(a0 + kActQs, a1 + kActQs));
                    ColExtra& e = cols.extra[i][c];
                    e.b[0] = -T::kBias * sum_i8x32(a0 + kActQs);
                    e.b[1] = -T::kBias * sum_i8x32(a1 + kActQs);
                    e.d[0] = fp16(a0);
                    e.d[1] = fp16(a1);
#endif
                } else {
                    col.q = act_q<T>(two ? load32x2(a0 + kActQs, a1 + kActQs)
                                         : load32_lo(a0 + kActQs));
                    col.bias = column_bias<T>(col.q);
                    col.d = halves(fp16(a0), two ? fp16(a1) : 0.0f);
                    if constexpr (kQ8_1) {
                        float* s = &cols.s[i / kGroupSteps][c][2 * (i % kGroupSteps)];
                        s[0] = fp16(a0 + 2);
                        s[1] = two ? fp16(a1 + 2) : 0.0f;
                    }
                }
            }
        }
        if constexpr (kQ8_1) {  // the lanes of the last group past the chunk's steps
            for (int64_t i = ns; i % kGroupSteps != 0; ++i) {
                for (int c = 0; c < C; ++c) {
                    float* s = &cols.s[i / kGroupSteps][c][2 * (i % kGroupSteps)];
                    s[0] = s[1] = 0.0f;
                }
            }
        }
    }

    // Rows [r_begin, r_begin + count) over steps [s0, s0 + ns).
    static void rows(const uint8_t* w, size_t w_stride, int r_begin, int count, int64_t n_act,
                     int64_t s0, int64_t ns, const Chunk& cols, float* out,
                     size_t out_stride, const Carry& carry) {
        const size_t ahead = prefetch_ahead(R, w_stride);
        for_row_groups<R>(w + r_begin * w_stride + s0 * kStepBytes, w_stride, count,
                          [&](const uint8_t* const* rows, int n_valid, int r0) {
                              Carry c = carry;
                              if (c.acc != nullptr) c.acc += r0;
                              tile(rows, n_valid, ahead, n_act, s0, ns, cols, out + r_begin + r0,
                                   out_stride, c);
                          });
    }

    static void tile(const uint8_t* const* rows, int n_valid, size_t ahead, int64_t n_act,
                     int64_t s0, int64_t ns, const Chunk& cols, float* out,
                     size_t out_stride, const Carry& carry) {
        FAcc acc[R][C];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                acc[r][c] = carry.in && r < n_valid ? carry.acc[r][c] : facc_zero();
            }
        }
        // Steps before n_full hold two blocks; a last half step may end an odd block count.
        const int64_t n_full = min_i64(ns, n_act / 2 - s0);
        if constexpr (kOneScale) {
            for (int64_t i = 0; i < ns; i += kStepsPerBlock) block_step(rows, ahead, i, cols, acc);
        } else {
            RowGroup group[kGroups ? R : 1];
            for (int64_t i = 0; i < ns; ++i) {
                if constexpr (kGroups) {
                    if (i % kGroupSteps == 0)
                        gather(rows, i, min_i64(2 * kGroupSteps, n_act - 2 * (s0 + i)), group);
                }
                step(rows, ahead, i, i < n_full ? T::kBlockBytes : 0, group, cols, acc);
                if constexpr (T::kMin) {
                    if (i % kGroupSteps == kGroupSteps - 1 || i == ns - 1)
                        min_terms(group, i / kGroupSteps, cols, acc);
                }
            }
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                if (r >= n_valid) continue;
                if (carry.out) {
                    carry.acc[r][c] = acc[r][c];
                } else {
                    out[c * out_stride + r] = hsum(acc[r][c]);
                }
            }
        }
    }

    // One weight block of the one-scale formats (q1_0, q2_0: a step or two, one weight scale):
    // each row decoded once, then for every column the steps' integer sums times the
    // activation scales, summed, go into the accumulator times the weight scale.
    TANDEM_ALWAYS_INLINE static void block_step(const uint8_t* const* rows, size_t ahead,
                                                int64_t i, const Chunk& cols,
                                                FAcc (&acc)[R][C]) {
        constexpr int S = kStepsPerBlock;
        V u[R][S];
        VF dw[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const uint8_t* p0 = rows[r] + (i / S) * T::kBlockBytes;
            if constexpr (R == 1) {
                prefetch_next_page(p0, T::kBlockBytes);
            } else {
                prefetch_l2(p0 + ahead);
            }
            TANDEM_UNROLL
            for (int s = 0; s < S; ++s) u[r][s] = T::decode(p0, p0 + 8 * s);
            dw[r] = T::scale(p0, p0);
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                const ColExtra& e0 = cols.extra[i][c];
                VF x = mul(cvt(dot4(T::act_bias(e0.b), u[r][0], cols.cols[i][c].q)),
                           T::act_scales(e0.d));
                TANDEM_UNROLL
                for (int s = 1; s < S; ++s) {
                    const ColExtra& es = cols.extra[i + s][c];
                    x = fma_vf(cvt(dot4(T::act_bias(es.b), u[r][s], cols.cols[i + s][c].q)),
                               T::act_scales(es.d), x);
                }
                acc[r][c] = fma_acc(acc[r][c], x, dw[r]);
            }
        }
    }

    // Each row's scales (and mins) of the n_blocks blocks of the group of steps from g0.
    TANDEM_ALWAYS_INLINE static void gather(const uint8_t* const* rows, int64_t g0,
                                            int64_t n_blocks, RowGroup (&group)[R]) {
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            alignas(32) uint16_t d[2 * kGroupSteps] = {}, m[2 * kGroupSteps] = {};
            const uint8_t* p = rows[r] + g0 * kStepBytes;
            const auto block = [&](int j) {
                if constexpr (kGroupScales) d[j] = load_u16(p + j * T::kBlockBytes);
                if constexpr (T::kMin) m[j] = load_u16(p + j * T::kBlockBytes + 2);
            };
            if (n_blocks == 2 * kGroupSteps) {
                TANDEM_UNROLL
                for (int j = 0; j < 2 * kGroupSteps; ++j) block(j);
            } else {
                for (int j = 0; j < n_blocks; ++j) block(j);
            }
            if constexpr (kGroupScales) store16f(group[r].d, fp16x16(d));
            if constexpr (T::kMin) store16f(group[r].m, fp16x16(m));
        }
    }

    // The min terms of group g: per row its mins times each column's s, one fused
    // multiply-add.
    TANDEM_ALWAYS_INLINE static void min_terms(const RowGroup (&group)[R], int64_t g,
                                               const Chunk& cols, FAcc (&acc)[R][C]) {
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const VF mins = load16f(group[r].m);
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c)
                acc[r][c] = add_product(acc[r][c], mins, load16f(cols.s[g][c]));
        }
    }

    // Step i of the chunk: each row decoded once, then dotted with every column.
    TANDEM_ALWAYS_INLINE static void step(const uint8_t* const* rows, size_t ahead, int64_t i,
                                          int next, const RowGroup* group, const Chunk& cols,
                                          FAcc (&acc)[R][C]) {
        V u[R];
        VF dw[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const uint8_t* p0 = rows[r] + i * kStepBytes;
            const uint8_t* p1 = p0 + next;
            if constexpr (R == 1) {
                prefetch_next_page(p0, kStepBytes);
            } else {
                prefetch_l2(p0 + ahead);
            }
            u[r] = T::decode(p0, p1);
            if constexpr (kGroupScales) {
                const float* d = group[r].d + 2 * (i % kGroupSteps);
                dw[r] = halves(d[0], d[1]);
            } else {
                dw[r] = T::scale(p0, p1);
            }
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const Col& col = cols.cols[i][c];
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r)
                accumulate<T>(acc[r][c], u[r], dw[r], col.q, col.bias, col.d);
        }
    }
};

template <typename T, int C>
void LegacyTile<T, C>::run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                           const uint8_t* a, size_t a_stride, float* out, size_t out_stride) {
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
#if !defined(__aarch64__)
void dot_q1_0(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Q1_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q2_0(TANDEM_DOT_TILE_PARAMS) {
    dot_legacy<Q2_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
#endif

}  // namespace tandem::TANDEM_VARIANT_NS
