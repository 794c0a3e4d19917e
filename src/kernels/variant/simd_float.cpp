// SIMD dot-product tiles for float weights against activations in the same format (ggml's
// vec_dot types): f32, f16 (F16C conversions) and bf16 (vdpbf16ps where AVX-512 BF16 exists,
// else widened to f32). Float accumulation in R x C registers; a zero-padded copy handles
// the last values when k is not a multiple of the step.
#include <cstring>
#include <type_traits>

#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

#if defined(TANDEM_SIMD_ZMM)
using F = __m512;
constexpr int kLanes = 16;
inline F fzero() {
    return _mm512_setzero_ps();
}
inline F fma(F a, F b, F c) {
    return _mm512_fmadd_ps(a, b, c);
}
inline F fadd(F a, F b) {
    return _mm512_add_ps(a, b);
}
inline F fmul(F a, F b) {
    return _mm512_mul_ps(a, b);
}
inline F fload(const float* p) {
    return _mm512_load_ps(p);
}
inline void store(float* p, F v) {
    _mm512_store_ps(p, v);
}
inline float fsum(F a) {
    return _mm512_reduce_add_ps(a);
}
struct LoadF32 {
    static constexpr int kBytes = 4;
    static F load(const uint8_t* p) { return _mm512_loadu_ps(p); }
};
struct LoadF16 {
    static constexpr int kBytes = 2;
    static F load(const uint8_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
};
struct LoadBf16 {
    static constexpr int kBytes = 2;
    static F load(const uint8_t* p) {
        const __m512i x =
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    }
};
#elif defined(__aarch64__)
// NEON: 8 floats in two registers (two independent FMA chains per step); f16 through fcvtl,
// bf16 widened by a 16-bit shift.
struct F {
    float32x4_t lo, hi;
};
constexpr int kLanes = 8;
inline F fzero() {
    return {vdupq_n_f32(0), vdupq_n_f32(0)};
}
inline F fma(F a, F b, F c) {
    return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)};
}
inline F fadd(F a, F b) {
    return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)};
}
inline F fmul(F a, F b) {
    return {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)};
}
inline F fload(const float* p) {
    return {vld1q_f32(p), vld1q_f32(p + 4)};
}
inline void store(float* p, F v) {
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}
inline float fsum(F a) {
    return vaddvq_f32(vaddq_f32(a.lo, a.hi));
}
struct LoadF32 {
    static constexpr int kBytes = 4;
    static F load(const uint8_t* p) {
        const auto* f = reinterpret_cast<const float*>(p);
        return {vld1q_f32(f), vld1q_f32(f + 4)};
    }
};
struct LoadF16 {
    static constexpr int kBytes = 2;
    static F load(const uint8_t* p) {
        const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
        return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
    }
};
struct LoadBf16 {
    static constexpr int kBytes = 2;
    static F load(const uint8_t* p) {
        const uint16x8_t x = vreinterpretq_u16_u8(vld1q_u8(p));
        return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(x), 16)),
                vreinterpretq_f32_u32(vshll_high_n_u16(x, 16))};
    }
};
#else
using F = __m256;
constexpr int kLanes = 8;
inline F fzero() {
    return _mm256_setzero_ps();
}
inline F fma(F a, F b, F c) {
    return _mm256_fmadd_ps(a, b, c);
}
inline F fadd(F a, F b) {
    return _mm256_add_ps(a, b);
}
inline F fmul(F a, F b) {
    return _mm256_mul_ps(a, b);
}
inline F fload(const float* p) {
    return _mm256_load_ps(p);
}
inline void store(float* p, F v) {
    _mm256_store_ps(p, v);
}
inline float fsum(F a) {
    return simd::hsum(a);
}
struct LoadF32 {
    static constexpr int kBytes = 4;
    static F load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct LoadF16 {
    static constexpr int kBytes = 2;
    static F load(const uint8_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
};
struct LoadBf16 {
    static constexpr int kBytes = 2;
    static F load(const uint8_t* p) {
        const __m256i x =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    }
};
#endif

// The arithmetic of one column, the same whatever the tile (so batched rows get exactly what
// they would get alone): the steps go in groups of kGroup = 4; a group's products make two terms
// (x0 y0 + x1 y1 and x2 y2 + x3 y3, each a multiply and an FMA), which are added together and
// then to the column's accumulator. Successive groups are independent until that last add, so
// they overlap in the pipeline without several accumulators per column. The last values are
// zero-padded to a whole group.
constexpr int kGroup = 4;

// One step: kLanes values of every row and column, both converted to f32; kFirst starts a term.
// The columns are read with YLoad (f32 where the tile converted them ahead).
template <typename Load, int R, int C, typename YLoad>
struct WidenY {
    static constexpr int kStep = kLanes;
    static constexpr int kBytes = Load::kBytes, kYBytes = YLoad::kBytes;
    template <bool kFirst>
    static void step(const uint8_t* const* w, const uint8_t* const* a, F (&t)[R][C]) {
        F x[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) x[r] = Load::load(w[r]);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const F y = YLoad::load(a[c]);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) t[r][c] = kFirst ? fmul(x[r], y) : fma(x[r], y, t[r][c]);
        }
    }
};
template <typename Load, int R, int C>
using Widen = WidenY<Load, R, C, Load>;

#if defined(__AVX512BF16__)
// vdpbf16ps: 32 bf16 products per instruction, summed in pairs into 16 f32 lanes.
template <int R, int C>
struct Bf16Pairs {
    static constexpr int kStep = 32;
    static constexpr int kBytes = 2, kYBytes = 2;
    static __m512bh load(const uint8_t* p) {
        return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
    }
    template <bool kFirst>
    static void step(const uint8_t* const* w, const uint8_t* const* a, F (&t)[R][C]) {
        __m512bh x[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) x[r] = load(w[r]);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const __m512bh y = load(a[c]);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r)
                t[r][c] = _mm512_dpbf16_ps(kFirst ? fzero() : t[r][c], x[r], y);
        }
    }
};
template <typename, int R, int C>
using Bf16Step = Bf16Pairs<R, C>;
#endif

// Rows per small-matmul tile: accumulators and terms (3 R C registers) must fit.
constexpr int float_rows(int cols) {
    if (cols == 1) return 1;
    if (simd::kRegisters >= 32) return cols <= 2 ? 4 : (cols <= 4 ? 2 : 1);
    return 1;
}

template <template <typename, int, int> class Step, typename Load>
struct FloatTileOf {
    template <typename, int C>
    struct Tile {
        static constexpr int R = float_rows(C);
        // 16-bit floats widened per step: matvecs convert the activation once per call, small
        // matmuls their columns once per chunk and row block (not once per row: f16 at C = 8
        // 40% faster on Zen 5).
        static constexpr bool kWidened16 = Load::kBytes == 2 && Step<Load, R, C>::kStep == kLanes;
        static constexpr bool kConvertColumn = C == 1 && kWidened16;
        static constexpr bool kConvertColumns = C > 1 && kWidened16;
        template <int kC>
        using StepFor = std::conditional_t<kConvertColumns, WidenY<Load, R, kC, LoadF32>,
                                           Step<Load, R, kC>>;
        using S = StepFor<C>;
        static constexpr int kStepBytes = S::kStep * S::kBytes;
        static constexpr int kYStepBytes = S::kStep * S::kYBytes;

        static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                        size_t a_stride, float* out, size_t out_stride) {
            if constexpr (kConvertColumn) {
                matvec_converted(k, w, w_stride, n_rows, a, out);
                return;
            }
            const size_t ahead = prefetch_ahead(R, w_stride);
            if (C == 1 || (!kConvertColumns && k <= kChunk)) {
                for_row_groups<R>(w, w_stride, n_rows,
                                  [&](const uint8_t* const* rows, int n_valid, int r0) {
                                      tile(k, rows, n_valid, ahead, a, a_stride, nullptr, false,
                                           false, out + r0, out_stride);
                                  });
                return;
            }
            // k in chunks whose C columns stay in L1, for blocks of rows whose accumulators
            // wait in memory between chunks (continued at whole groups: the matvec's sums).
            alignas(64) F carried[kRowBlock][C];
            alignas(64) float converted[kConvertColumns ? C : 1]
                                       [kConvertColumns ? kChunk + kGroupValues : 1];
            for (int rb = 0; rb < n_rows; rb += kRowBlock) {
                for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
                    const int64_t kc = min_i64(kChunk, k - k0);
                    const size_t skip = static_cast<size_t>(k0) * Load::kBytes;
                    const uint8_t* y = a + skip;
                    size_t y_stride = a_stride;
                    if constexpr (kConvertColumns) {
                        for (int c = 0; c < C; ++c) convert(y + c * a_stride, kc, converted[c]);
                        y = reinterpret_cast<const uint8_t*>(converted[0]);
                        y_stride = sizeof(converted[0]);
                    }
                    for_row_groups<R>(w + rb * w_stride + skip, w_stride,
                                      min_int(kRowBlock, n_rows - rb),
                                      [&](const uint8_t* const* rows, int n_valid, int r0) {
                                          tile(kc, rows, n_valid, ahead, y, y_stride,
                                               carried + r0, k0 > 0, k0 + kc < k,
                                               out + rb + r0, out_stride);
                                      });
                }
            }
        }
        // Values per chunk of the small matmul: the C columns' share in 32 KiB of L1 (C = 8
        // reading its columns from L2 ran at a third of the speed on Zen 5), in whole groups.
        static constexpr int64_t kGroupValues = kGroup * S::kStep;
        static constexpr int64_t kChunk =
            32768 / (C * S::kYBytes) / kGroupValues * kGroupValues;
        static_assert(kChunk > 0);
        static constexpr int kRowBlock = 64;

        // Columns per pass over a group's steps: where the accumulators and the two terms of
        // every column do not fit the registers (AVX2: 16, C = 8 spilled), the group runs over
        // the columns in blocks, the rows' values loaded again (from L1) per block; a column
        // gets the same operations either way. (AVX2 variant, C = 8: 15% faster on Zen 5.)
        static constexpr int kFreeRegisters = simd::kRegisters - R * C - R - 1;
        static constexpr int kColBlock = 2 * R * C <= kFreeRegisters    ? C
                                         : kFreeRegisters / (2 * R) > 1 ? kFreeRegisters / (2 * R)
                                                                        : 1;

        // One group of kGroup steps at w and y (which then advance past it): two terms of two
        // steps each, added, then added to the accumulator.
        template <int kR, int kC>
        TANDEM_ALWAYS_INLINE static void group(const uint8_t** w, const uint8_t** y,
                                               F (&acc)[kR][kC]) {
            group_columns<0>(w, y, acc);
            TANDEM_UNROLL
            for (int r = 0; r < kR; ++r) w[r] += kGroup * kStepBytes;
            TANDEM_UNROLL
            for (int c = 0; c < kC; ++c) y[c] += kGroup * kYStepBytes;
        }
        // The group for columns kC0 .. kC0 + n - 1, then the next block.
        template <int kC0, int kR, int kC>
        TANDEM_ALWAYS_INLINE static void group_columns(const uint8_t* const* w,
                                                       const uint8_t* const* y,
                                                       F (&acc)[kR][kC]) {
            constexpr int n = min_int(kColBlock, kC - kC0);
            const uint8_t* yb[n];
            TANDEM_UNROLL
            for (int c = 0; c < n; ++c) yb[c] = y[kC0 + c];
            F t01[kR][n], t23[kR][n];
            step_at<true>(0, w, yb, t01);
            step_at<false>(1, w, yb, t01);
            step_at<true>(2, w, yb, t23);
            step_at<false>(3, w, yb, t23);
            TANDEM_UNROLL
            for (int r = 0; r < kR; ++r) {
                TANDEM_UNROLL
                for (int c = 0; c < n; ++c)
                    acc[r][kC0 + c] = fadd(acc[r][kC0 + c], fadd(t01[r][c], t23[r][c]));
            }
            if constexpr (kC0 + n < kC) group_columns<kC0 + n>(w, y, acc);
        }
        template <bool kFirst, int kR, int kC>
        TANDEM_ALWAYS_INLINE static void step_at(int u, const uint8_t* const* w,
                                                 const uint8_t* const* y, F (&t)[kR][kC]) {
            const uint8_t* ws[kR];
            const uint8_t* ys[kC];
            TANDEM_UNROLL
            for (int r = 0; r < kR; ++r) ws[r] = w[r] + u * kStepBytes;
            TANDEM_UNROLL
            for (int c = 0; c < kC; ++c) ys[c] = y[c] + u * kYStepBytes;
            StepFor<kC>::template step<kFirst>(ws, ys, t);
        }

        // The last n values of every row and column (less than a group), zero-padded to a group
        // (zeros add nothing).
        template <int kR, int kC>
        static void last_group(int64_t n, const uint8_t** w, const uint8_t** y,
                               F (&acc)[kR][kC]) {
            if (n == 0) return;
            const int64_t bytes = n * S::kBytes, y_bytes = n * S::kYBytes;
            alignas(64) uint8_t wbuf[kR][kGroup * kStepBytes];
            alignas(64) uint8_t ybuf[kC][kGroup * kYStepBytes];
            TANDEM_UNROLL
            for (int r = 0; r < kR; ++r) {
                std::memset(wbuf[r], 0, sizeof(wbuf[r]));
                std::memcpy(wbuf[r], w[r], bytes);
                w[r] = wbuf[r];
            }
            TANDEM_UNROLL
            for (int c = 0; c < kC; ++c) {
                std::memset(ybuf[c], 0, sizeof(ybuf[c]));
                std::memcpy(ybuf[c], y[c], y_bytes);
                y[c] = ybuf[c];
            }
            group(w, y, acc);
        }

        // f16 / bf16 matvec: the activation converted to f32 a chunk at a time, every row's
        // accumulator carried from chunk to chunk (chunks hold whole groups).
        static void matvec_converted(int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                                     const uint8_t* a, float* out) {
            constexpr int64_t kChunk = 4096;  // values per converted chunk (16 KiB)
            static_assert(kChunk % (kGroup * kLanes) == 0);
            constexpr int kRowBlock = 64;
            alignas(64) float y[kChunk + kGroup * kLanes];
            alignas(64) F carried[kRowBlock];
            for (int r0 = 0; r0 < n_rows; r0 += kRowBlock) {
                const int rows = min_int(kRowBlock, n_rows - r0);
                for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
                    const int64_t kc = min_i64(kChunk, k - k0);
                    convert(a + 2 * k0, kc, y);
                    for (int r = 0; r < rows; ++r) {
                        F acc[1][1] = {{k0 == 0 ? fzero() : carried[r]}};
                        matvec_chunk(w + (r0 + r) * w_stride + 2 * k0, y, kc, acc);
                        if (k0 + kc < k) {
                            carried[r] = acc[0][0];
                        } else {
                            out[r0 + r] = fsum(acc[0][0]);
                        }
                    }
                }
            }
        }
        // kc values of 16-bit floats into y, zero-padded to a whole group.
        static void convert(const uint8_t* a, int64_t kc, float* y) {
            const int64_t n_steps = kc / kLanes, tail = kc - n_steps * kLanes;
            for (int64_t s = 0; s < n_steps; ++s) store(y + s * kLanes, Load::load(a + 2 * s * kLanes));
            int64_t s = n_steps;
            if (tail > 0) {
                alignas(64) uint8_t pad[kLanes * 2] = {};
                std::memcpy(pad, a + 2 * n_steps * kLanes, 2 * tail);
                store(y + s++ * kLanes, Load::load(pad));
            }
            for (; s % kGroup != 0; ++s) store(y + s * kLanes, fzero());
        }
        // One row over kc values against the converted y: the tile's groups, the same sums.
        static void matvec_chunk(const uint8_t* row, const float* y, int64_t kc, F (&acc)[1][1]) {
            auto group_at = [&](const uint8_t* x, const float* v) {
                const F t01 = fma(Load::load(x + kStepBytes), fload(v + kLanes),
                                  fmul(Load::load(x), fload(v)));
                const F t23 = fma(Load::load(x + 3 * kStepBytes), fload(v + 3 * kLanes),
                                  fmul(Load::load(x + 2 * kStepBytes), fload(v + 2 * kLanes)));
                acc[0][0] = fadd(acc[0][0], fadd(t01, t23));
            };
            constexpr int64_t kGroupValues = kGroup * kLanes;
            constexpr int kGroupBytes = kGroup * kStepBytes;
            const int64_t n_groups = kc / kGroupValues;
            // No software prefetch: the hardware prefetchers follow the one row. Touching each
            // next page's first line as the row entered a page (as the float matvecs did) made
            // Zen 3 (2 threads, 256 MiB) read f16 and bf16 0.8-0.9x as fast; on Sapphire
            // Rapids (16 threads, 1200 MiB) dropping it took 0.94-1.03x the time (AVX2 variant
            // 0.92-0.99x, and 0.86-0.89x from L2). The same for f32's matvec (tile, C = 1).
            for (int64_t g = 0; g < n_groups; ++g)
                group_at(row + g * kGroupBytes, y + g * kGroupValues);
            const int64_t i = n_groups * kGroupValues;
            row += n_groups * kGroupBytes;
            if (i < kc) {
                // The last values, zero-padded to a group (y is zero beyond kc).
                alignas(64) uint8_t wbuf[kGroup * kStepBytes] = {};
                std::memcpy(wbuf, row, (kc - i) * S::kBytes);
                group_at(wbuf, y + i);
            }
        }

        // The accumulators start from carry (in) or zero and end in carry (keep) or as results
        // in out.
        static void tile(int64_t k, const uint8_t* const* rows, int n_valid, size_t ahead,
                         const uint8_t* a, size_t a_stride, F (*carry)[C], bool in, bool keep,
                         float* out, size_t out_stride) {
            F acc[R][C];
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                TANDEM_UNROLL
                for (int c = 0; c < C; ++c) acc[r][c] = in && r < n_valid ? carry[r][c] : fzero();
            }
            const uint8_t* w[R];
            const uint8_t* y[C];
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) w[r] = rows[r];
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) y[c] = a + c * a_stride;
            // Small matmuls: a prefetch per line of each row (fewer, one per 128 bytes, loses
            // a third of the DRAM bandwidth; their rows are read in chunks of k, so each chunk
            // of a row starts a page); matvecs: none (see matvec_chunk).
            const int64_t n_groups = k / kGroupValues;
            if constexpr (C == 1) {
                for (int64_t g = 0; g < n_groups; ++g) group(w, y, acc);
            } else {
                for (int64_t g = 0; g < n_groups; ++g) {
                    for (int line = 0; line < kGroup * kStepBytes; line += 64) {
                        TANDEM_UNROLL
                        for (int r = 0; r < R; ++r) prefetch_l2(w[r] + ahead + line);
                    }
                    group(w, y, acc);
                }
            }
            last_group(k - n_groups * kGroupValues, w, y, acc);
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                TANDEM_UNROLL
                for (int r = 0; r < R; ++r) {
                    if (r >= n_valid) continue;
                    if (keep) {
                        carry[r][c] = acc[r][c];
                    } else {
                        out[c * out_stride + r] = fsum(acc[r][c]);
                    }
                }
            }
        }
    };
};

template <template <typename, int, int> class Step, typename Load>
void dot_float(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<FloatTileOf<Step, Load>::template Tile, void>(k, w, w_stride, n_rows, a, a_stride,
                                                            n_cols, out, out_stride);
}

}  // namespace

void dot_f32(TANDEM_DOT_TILE_PARAMS) {
    dot_float<Widen, LoadF32>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_f16(TANDEM_DOT_TILE_PARAMS) {
    dot_float<Widen, LoadF16>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
#if defined(__AVX512BF16__)
void dot_bf16(TANDEM_DOT_TILE_PARAMS) {
    dot_float<Bf16Step, LoadBf16>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
#else
void dot_bf16(TANDEM_DOT_TILE_PARAMS) {
    dot_float<Widen, LoadBf16>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
#endif

}  // namespace tandem::TANDEM_VARIANT_NS
