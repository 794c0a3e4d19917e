// SIMD dot-product tiles for the 32-value block formats against q8_0 / q8_1 activations:
// q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, nvfp4 (64-value blocks over two q8_0
// blocks), and on x86 q2_0 (64-value blocks) and q1_0 (128-value blocks). A step covers 64
// values (two activation blocks); each weight step is decoded once into unsigned bytes u
// (weight = u - bias, legacy_formats.h) and dotted with every column of the tile. These step
// tiles serve NEON only: x86 takes the unit-lane tiles for every format (legacy_unit_lanes.h).
// The measurements in their comments are from x86, when they served there too.

#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/legacy_formats.h"
#include "kernels/variant/legacy_unit_lanes.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;
using namespace legacy;

#if defined(__aarch64__)
// Rows per tile: one for the matvec (tile.h); for the small matmul as many as the registers
// hold accumulators for (a V is two registers on AVX2).
constexpr int legacy_rows(int cols) {
    if (cols == 1) return 1;
    return kRegisters >= 32 ? (cols <= 3 ? 4 : 2) : 1;
}

// A step's weight scales in its lanes: per block (nvfp4: per 16 values).
// nvfp4's four UE4M3 scales are halved (doubled E2M1 values): the 7 low bits placed at float
// bit 20 make 2^(e - 127) (1 + m / 8) (or m 2^-129 when e = 0); times 2^119 that is half of
// 2^(e - 7) (1 + m / 8) (m 2^-9): exact. 0x7f decodes as 0 as in ggml; bit 7 is ignored.
inline float32x4_t ue4m3_half4(const uint8_t* p) {
    const uint32x4_t x = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(load_u32(p)))));
    const uint32x4_t bits = vshlq_n_u32(vandq_u32(x, vdupq_n_u32(0x7f)), 20);
    const float32x4_t v = vmulq_f32(vreinterpretq_f32_u32(bits), vdupq_n_f32(0x1p119f));
    return vreinterpretq_f32_u32(
        vbicq_u32(vreinterpretq_u32_f32(v), vceqq_u32(x, vdupq_n_u32(0x7f))));
}
template <typename T>
TANDEM_ALWAYS_INLINE VF step_scales(const uint8_t* p0, const uint8_t* p1) {
    if constexpr (scales_per_step<T>() == 4) {
        return quarters(ue4m3_half4(p0));
    } else if constexpr (T::kFp16Scale) {
        return halves_fp16(p0, p1);
    } else {  // mxfp4: an E8M0 byte, halved (kE8m0)
        return halves(kE8m0.half[*p0], kE8m0.half[*p1]);
    }
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
struct ColStep {
    V q, bias;
    VF d;
};
template <typename T, int C>
struct LegacyTile {
    static constexpr int R = legacy_rows(C);
    static constexpr bool kQ8_1 = T::kMin;
    static constexpr int kActBytes = kQ8_1 ? 36 : 34, kActQs = kQ8_1 ? 4 : 2;
    static constexpr int64_t kStepBytes = T::kBlocksPerStep * T::kBlockBytes;
    using Col = ColStep;
    // Steps per prepared chunk: column data that stays in L1 (32 KiB: Zen 4's L1D; a 64 KiB
    // chunk made C = 8 15-20% slower).
    static constexpr int64_t kChunkBytes = 32768;
    // Chunks start at whole weight blocks (and whole groups where the rows are gathered).
    static constexpr bool kGroupScales = T::kFp16Scale && C > 1, kGroups = kGroupScales || T::kMin;
    static constexpr int64_t kStepAlign = kGroups ? kGroupSteps : 1;
    static constexpr int64_t kColBytes = sizeof(Col) + (T::kMin ? 2 * sizeof(float) : 0);
    static constexpr int64_t kChunk = kChunkBytes / (C * kColBytes) / kStepAlign * kStepAlign;
    struct Chunk {
        Col cols[kChunk][C];
        // q8_1's s of the blocks of each min group (lane j: block j of the group; 0 past the end)
        alignas(64) float s[T::kMin ? kChunk / kGroupSteps : 1][C][2 * kGroupSteps];
    };
    // Rows per block when k needs several chunks: a block's rows stay in L2 between chunks,
    // and their accumulators wait in memory (the sums of one column must not depend on C, so
    // chunks continue the accumulators rather than adding partial sums). 128 rows amortise
    // preparing each chunk (32 rows: 5-10% slower at C = 8).
    static constexpr int kRowBlock = 128;

    using Carry = ChunkCarry<AccRow<C>>;

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        const int64_t n_act = k / 32;
        alignas(64) Chunk cols;
        alignas(64) AccRow<C> carried[kRowBlock];
        run_chunks<kRowBlock>(
            n_rows, (n_act + 1) / 2, kChunk, carried,
            [&](int64_t s0, int64_t ns) { prepare(a, a_stride, n_act, s0, ns, cols); },
            [&](int rb, int count, int64_t s0, int64_t ns, const Carry& carry) {
                rows(w, w_stride, rb, count, n_act, s0, ns, cols, out, out_stride, carry);
            });
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
        // (Zeroed: step 0 gathers before any use, but GCC for aarch64 warns it may not.)
        RowGroup group[kGroups ? R : 1] = {};
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
                dw[r] = step_scales<T>(p0, p1);
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
using LegacyTiles = LegacyTile<T, C>;
#else
template <typename T, int C>
using LegacyTiles = UnitLaneTile<T, C>;
#endif

template <typename T>
void dot_legacy(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<LegacyTiles, T>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
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
