// SIMD dot-product tiles for float weights against activations in the same format (ggml's
// vec_dot types): f32, f16 (F16C conversions) and bf16 (vdpbf16ps where AVX-512 BF16 exists,
// else widened to f32). Float accumulation in R x C registers; a zero-padded copy handles
// the last values when k is not a multiple of the step.
#include <cstring>

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

// One step: kLanes values of every row and column, both converted to f32.
template <typename Load, int R, int C>
struct Widen {
    static constexpr int kStep = kLanes;
    static constexpr int kBytes = Load::kBytes;
    static void step(const uint8_t* const* w, const uint8_t* const* a, F (&acc)[R][C]) {
        F x[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) x[r] = Load::load(w[r]);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const F y = Load::load(a[c]);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) acc[r][c] = fma(x[r], y, acc[r][c]);
        }
    }
};

#if defined(__AVX512BF16__)
// vdpbf16ps: 32 bf16 products per instruction, summed in pairs into 16 f32 lanes.
template <int R, int C>
struct Bf16Pairs {
    static constexpr int kStep = 32;
    static constexpr int kBytes = 2;
    static __m512bh load(const uint8_t* p) {
        return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
    }
    static void step(const uint8_t* const* w, const uint8_t* const* a, F (&acc)[R][C]) {
        __m512bh x[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) x[r] = load(w[r]);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const __m512bh y = load(a[c]);
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], x[r], y);
        }
    }
};
template <typename, int R, int C>
using Bf16Step = Bf16Pairs<R, C>;
#endif

constexpr int float_rows(int cols) {
    if (cols == 1) return 1;
    if (simd::kRegisters >= 32) return cols <= 4 ? 4 : 2;
    return cols <= 2 ? 4 : (cols <= 4 ? 2 : 1);
}

template <template <typename, int, int> class Step, typename Load>
struct FloatTileOf {
    template <typename, int C>
    struct Tile {
        static constexpr int R = float_rows(C);
        using S = Step<Load, R, C>;

        // Matvecs of 16-bit floats convert the activation once per call, not once per row.
        static constexpr bool kConvertColumn = C == 1 && Load::kBytes == 2 && S::kStep == kLanes;

        static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                        size_t a_stride, float* out, size_t out_stride) {
            if constexpr (kConvertColumn) {
                matvec_converted(k, w, w_stride, n_rows, a, out);
                return;
            }
            const size_t ahead = prefetch_ahead(R, w_stride);
            for_row_groups<R>(w, w_stride, n_rows,
                              [&](const uint8_t* const* rows, int n_valid, int r0) {
                                  tile(k, rows, n_valid, ahead, a, a_stride, out + r0, out_stride);
                              });
        }

        static void matvec_converted(int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                                     const uint8_t* a, float* out) {
            constexpr int64_t kChunk = 4096;  // values per converted chunk (16 KiB)
            alignas(64) float y[kChunk + kLanes];
            alignas(64) uint8_t pad[kLanes * 2];
            for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
                const int64_t kc = min_i64(kChunk, k - k0);
                const int64_t n_steps = kc / kLanes, tail = kc - n_steps * kLanes;
                for (int64_t s = 0; s < n_steps; ++s)
                    store(y + s * kLanes, Load::load(a + 2 * (k0 + s * kLanes)));
                if (tail > 0) {
                    std::memset(pad, 0, sizeof(pad));
                    std::memcpy(pad, a + 2 * (k0 + n_steps * kLanes), 2 * tail);
                    store(y + n_steps * kLanes, Load::load(pad));
                }
                for (int r = 0; r < n_rows; ++r) {
                    const uint8_t* row = w + r * w_stride + 2 * k0;
                    F acc[4] = {fzero(), fzero(), fzero(), fzero()};
                    int64_t s = 0;
                    for (; s + 4 <= n_steps; s += 4) {
                        prefetch_next_page(row + 2 * s * kLanes, 8 * kLanes);
                        TANDEM_UNROLL
                        for (int u = 0; u < 4; ++u) {
                            acc[u] = fma(Load::load(row + 2 * (s + u) * kLanes),
                                         fload(y + (s + u) * kLanes), acc[u]);
                        }
                    }
                    for (; s < n_steps; ++s)
                        acc[0] =
                            fma(Load::load(row + 2 * s * kLanes), fload(y + s * kLanes), acc[0]);
                    if (tail > 0) {
                        std::memset(pad, 0, sizeof(pad));
                        std::memcpy(pad, row + 2 * n_steps * kLanes, 2 * tail);
                        acc[1] = fma(Load::load(pad), fload(y + n_steps * kLanes), acc[1]);
                    }
                    const float sum = fsum(fadd(fadd(acc[0], acc[1]), fadd(acc[2], acc[3])));
                    out[r] = k0 == 0 ? sum : out[r] + sum;
                }
            }
        }

        static void tile(int64_t k, const uint8_t* const* rows, int n_valid, size_t ahead,
                         const uint8_t* a, size_t a_stride, float* out, size_t out_stride) {
            // Independent accumulator sets for small tiles, so FMAs do not wait on each other.
            constexpr int kU = R * C >= 4 ? 1 : 4;
            F acc[kU][R][C];
            TANDEM_UNROLL
            for (auto& set : acc) {
                TANDEM_UNROLL
                for (auto& row : set) {
                    TANDEM_UNROLL
                    for (auto& x : row) x = fzero();
                }
            }
            const uint8_t* w[R];
            const uint8_t* y[C];
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) w[r] = rows[r];
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) y[c] = a + c * a_stride;
            const int64_t n_steps = k / S::kStep;
            // Rows side by side: a prefetch per line of each row (fewer, one per 128 bytes,
            // loses a third of the DRAM bandwidth); one row: one per page (tile.h), checked once
            // per group of steps (checking every step costs a quarter of the f32 speed in L2).
            constexpr int kStepBytes = S::kStep * S::kBytes;
            constexpr int kPrefetchEvery = kStepBytes >= 64 ? 1 : 64 / kStepBytes;
            auto one_step = [&](F(&set)[R][C], bool prefetch) {
                if constexpr (R == 1) {
                    // once per group of kU steps, in the main loop below
                } else if (prefetch) {
                    TANDEM_UNROLL
                    for (int r = 0; r < R; ++r) prefetch_l2(w[r] + ahead);
                }
                S::step(w, y, set);
                TANDEM_UNROLL
                for (auto& p : w) p += S::kStep * S::kBytes;
                TANDEM_UNROLL
                for (auto& p : y) p += S::kStep * S::kBytes;
            };
            int64_t s = 0;
            for (; s + kU <= n_steps; s += kU) {
                if constexpr (R == 1) prefetch_next_page(w[0], kU * kStepBytes);
                TANDEM_UNROLL
                for (int u = 0; u < kU; ++u)
                    one_step(acc[u], kPrefetchEvery == 1 || u % kPrefetchEvery == 0);
            }
            for (; s < n_steps; ++s) {
                if constexpr (R == 1) prefetch_next_page(w[0], kStepBytes);
                one_step(acc[0], s % kPrefetchEvery == 0);
            }
            if (const int64_t tail = k - n_steps * S::kStep; tail > 0) {
                // The last values through zero-padded copies (zeros add nothing).
                alignas(64) uint8_t wbuf[R][S::kStep * S::kBytes];
                alignas(64) uint8_t ybuf[C][S::kStep * S::kBytes];
                std::memset(wbuf, 0, sizeof(wbuf));
                std::memset(ybuf, 0, sizeof(ybuf));
                TANDEM_UNROLL
                for (int r = 0; r < R; ++r) {
                    std::memcpy(wbuf[r], w[r], tail * S::kBytes);
                    w[r] = wbuf[r];
                }
                TANDEM_UNROLL
                for (int c = 0; c < C; ++c) {
                    std::memcpy(ybuf[c], y[c], tail * S::kBytes);
                    y[c] = ybuf[c];
                }
                S::step(w, y, acc[0]);
            }
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                TANDEM_UNROLL
                for (int r = 0; r < R; ++r) {
                    F sum = acc[0][r][c];
                    TANDEM_UNROLL
                    for (int u = 1; u < kU; ++u) sum = fadd(sum, acc[u][r][c]);
                    if (r < n_valid) out[c * out_stride + r] = fsum(sum);
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
