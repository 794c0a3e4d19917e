// Ternary (tq1_0, tq2_0), 1- and 2-bit (q1_0, q2_0) and 4-bit float (mxfp4, nvfp4) formats:
// dequantizers bit-identical to ggml, simple weight quantizers and reference dot products
// (block layouts: ggml-common.h).
#include "formats/quants_lowbit.h"

#include <cmath>
#include <initializer_list>

#include "formats/iq_tables.h"
#include "formats/quant_util.h"

namespace tandem {
namespace {

using namespace formats_detail;

// tq1_0, 54 bytes, 256 values: x = d * (t - 1), trits t in 0..2. Five trits t0..t4 share a
// byte as ceil(256 * q / 243) with q = t0 3^4 + t1 3^3 + t2 3^2 + t3 3 + t4; trit k comes back
// as (uint8(byte * 3^k) * 3) >> 8.
//   qs[0..31]   trit k of byte m: value 32 k + m        (values 0..159)
//   qs[32..47]  trit k of byte 32 + m: value 160 + 16 k + m  (values 160..239)
//   qh[4]       trit k (k < 4) of byte m: value 240 + 4 k + m; trit 4 is 0
//   d           fp16
struct BlockTQ1 {
    uint8_t qs[48];
    uint8_t qh[4];
    uint16_t d;
};
// tq2_0, 66 bytes, 256 values: x = d * (q - 1), q in 0..2 (3 decodes as +2 but is not written).
//   qs[64]  value v = 128 c + 32 k + m (c < 2, k < 4, m < 32): bits 2k..2k+1 of qs[32 c + m]
//   d       fp16
struct BlockTQ2 {
    uint8_t qs[64];
    uint16_t d;
};
// q1_0, 18 bytes, 128 values: x = bit ? d : -d; bit j % 8 of qs[j / 8] belongs to value j.
struct BlockQ1_0 {
    uint16_t d;
    uint8_t qs[16];
};
// q2_0, 18 bytes, 64 values: x = d * (q - 1), q in 0..3; bits 2(j % 4).. of qs[j / 4] = value j.
struct BlockQ2_0 {
    uint16_t d;
    uint8_t qs[16];
};
// mxfp4 (OCP MX), 17 bytes, 32 values: x = E2M1(code) * 2^(e - 127).
//   e       E8M0 shared exponent
//   qs[16]  4-bit E2M1 codes: low nibble of qs[j] = value j, high nibble = value j + 16
struct BlockMxfp4 {
    uint8_t e;
    uint8_t qs[16];
};
// nvfp4, 36 bytes, 64 values in 4 sub-blocks of 16: x = E2M1(code) * UE4M3(d[s]).
//   d[4]    UE4M3 scale of sub-block s (values 16 s .. 16 s + 15)
//   qs[32]  sub-block s uses qs[8 s .. 8 s + 7]: low nibble of qs[8 s + j] = value 16 s + j,
//           high nibble = value 16 s + j + 8
struct BlockNvfp4 {
    uint8_t d[4];
    uint8_t qs[32];
};
// q8_0 (the activations of q1_0, q2_0, mxfp4 and nvfp4): x = d * q over 32 values.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[32];
};
// q8_K (the activations of tq1_0 and tq2_0): x = d * q over 256 values.
struct BlockQ8K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};
static_assert(sizeof(BlockTQ1) == 54 && sizeof(BlockTQ2) == 66 && sizeof(BlockQ1_0) == 18 &&
              sizeof(BlockQ2_0) == 18 && sizeof(BlockMxfp4) == 17 && sizeof(BlockNvfp4) == 36 &&
              sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8K) == 292);

constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};

int trit_of(uint8_t byte, int k) {
    const auto q = static_cast<uint8_t>(byte * kPow3[k]);
    return (q * 3) >> 8;
}
// Packs 5 trits (t[0] most significant) into one byte.
uint8_t pack_trits(const int* t) {
    int q = 0;
    for (int k = 0; k < 5; ++k) q = q * 3 + t[k];
    return static_cast<uint8_t>((q * 256 + 242) / 243);
}
// The trit of value v of a tq1_0 block.
int tq1_trit(const BlockTQ1& b, int v) {
    if (v < 160) return trit_of(b.qs[v % 32], v / 32);
    if (v < 240) return trit_of(b.qs[32 + (v - 160) % 16], (v - 160) / 16);
    return trit_of(b.qh[(v - 240) % 4], (v - 240) / 4);
}
int tq2_code(const BlockTQ2& b, int v) {
    return (b.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}

int mxfp4_code(const BlockMxfp4& b, int j) {
    return j < 16 ? b.qs[j] & 15 : b.qs[j - 16] >> 4;
}
int nvfp4_code(const BlockNvfp4& b, int v) {
    const int s = v / 16, j = v % 16;
    return j < 8 ? b.qs[8 * s + j] & 15 : b.qs[8 * s + j - 8] >> 4;
}

// Squared error of x[0..n) quantized to d * q with integer q in lo..hi.
double uniform_sse(const float* x, int n, float d, int lo, int hi) {
    const float id = d != 0 ? 1.0f / d : 0.0f;
    double sse = 0;
    for (int j = 0; j < n; ++j) {
        const float v = d * static_cast<float>(clamp_int(round_even(x[j] * id), lo, hi));
        sse += static_cast<double>(x[j] - v) * (x[j] - v);
    }
    return sse;
}

// Ternary scale: the best of d = amax * r for r = 1, 0.9, ..., 0.3 (r = 1 is exact for
// weights that are ternary already).
float ternary_scale(const float* x, int n) {
    const float amax = max_abs(x, n);
    float best = amax;
    double best_sse = uniform_sse(x, n, amax, -1, 1);
    for (int step = 1; step <= 7; ++step) {
        const float d = fp16_to_f32(f32_to_fp16(amax * (1.0f - 0.1f * static_cast<float>(step))));
        const double sse = uniform_sse(x, n, d, -1, 1);
        if (sse < best_sse) {
            best_sse = sse;
            best = d;
        }
    }
    return best;
}

// Trits t[0..255] (0..2) into a tq1_0 block's qs and qh.
void pack_tq1(const int* t, BlockTQ1& b) {
    int group[5];
    for (int m = 0; m < 32; ++m) {
        for (int k = 0; k < 5; ++k) group[k] = t[32 * k + m];
        b.qs[m] = pack_trits(group);
    }
    for (int m = 0; m < 16; ++m) {
        for (int k = 0; k < 5; ++k) group[k] = t[160 + 16 * k + m];
        b.qs[32 + m] = pack_trits(group);
    }
    for (int m = 0; m < 4; ++m) {
        for (int k = 0; k < 4; ++k) group[k] = t[240 + 4 * k + m];
        group[4] = 0;
        b.qh[m] = pack_trits(group);
    }
}
// Codes q[0..255] (0..3) into a tq2_0 block's qs.
void pack_tq2(const int* q, BlockTQ2& b) {
    std::memset(b.qs, 0, sizeof b.qs);
    for (int v = 0; v < 256; ++v) {
        b.qs[32 * (v / 128) + v % 32] |= static_cast<uint8_t>(q[v] << (2 * ((v % 128) / 32)));
    }
}

// The 8 E2M1 magnitudes of the doubled table (codes 0..7; bit 3 is the sign).
using E2m1Magnitudes = LevelSet<8>;

// The E2M1 code nearest to v (in units of the doubled table): the nearest magnitude, with the
// sign bit for negative values (a negative zero is written as +0).
int e2m1_code(const E2m1Magnitudes& mags, float v) {
    const int m = mags.nearest(std::fabs(v));
    return (v < 0 && m != 0) ? (m | 8) : m;
}
double e2m1_sse(const E2m1Magnitudes& mags, const float* x, int n, float d) {
    const float id = d != 0 ? 1.0f / d : 0.0f;
    double sse = 0;
    for (int j = 0; j < n; ++j) {
        const float v = d * static_cast<float>(kE2m1DoubledValues[e2m1_code(mags, x[j] * id)]);
        sse += static_cast<double>(x[j] - v) * (x[j] - v);
    }
    return sse;
}
// A random block sign for the 4-bit float formats, whose scales carry none: flip every code.
void flip_e2m1_signs(uint8_t* qs, size_t n) {
    for (size_t i = 0; i < n; ++i) qs[i] ^= 0x88;
}

}  // namespace

// ---------------------------------------------------------------- tq1_0

void dequantize_tq1_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; ++i) {
        const auto b = load_block<BlockTQ1>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int v = 0; v < 256; ++v) dst[i * 256 + v] = static_cast<float>(tq1_trit(b, v) - 1) * d;
    }
}
void quantize_tq1_0(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; ++i) {
        const float* x = src + i * 256;
        BlockTQ1 b{};
        b.d = f32_to_fp16(ternary_scale(x, 256));
        const float d = fp16_to_f32(b.d);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        int t[256];
        for (int v = 0; v < 256; ++v) t[v] = clamp_int(round_even(x[v] * id), -1, 1) + 1;
        pack_tq1(t, b);
        store_block(dst, i, b);
    }
}
double ref_dot_tq1_0(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / 256; ++i) {
        const auto w = load_block<BlockTQ1>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int isum = 0;
        for (int v = 0; v < 256; ++v) isum += (tq1_trit(w, v) - 1) * a.qs[v];
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * isum;
    }
    return sum;
}
void random_tq1_0(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockTQ1, 256>(
        dst, n_blocks, seed, scale, dequantize_tq1_0,
        [](Rng& rng, BlockTQ1& b) {
            int t[256];
            for (int& trit : t) trit = rng.below(3);
            pack_tq1(t, b);
            b.d = kFp16One;
        },
        [](BlockTQ1& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- tq2_0

void dequantize_tq2_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; ++i) {
        const auto b = load_block<BlockTQ2>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int v = 0; v < 256; ++v) dst[i * 256 + v] = static_cast<float>(tq2_code(b, v) - 1) * d;
    }
}
void quantize_tq2_0(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / 256; ++i) {
        const float* x = src + i * 256;
        BlockTQ2 b{};
        b.d = f32_to_fp16(ternary_scale(x, 256));
        const float d = fp16_to_f32(b.d);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        int q[256];
        for (int v = 0; v < 256; ++v) q[v] = clamp_int(round_even(x[v] * id), -1, 1) + 1;
        pack_tq2(q, b);
        store_block(dst, i, b);
    }
}
double ref_dot_tq2_0(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / 256; ++i) {
        const auto w = load_block<BlockTQ2>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int isum = 0;
        for (int v = 0; v < 256; ++v) isum += (tq2_code(w, v) - 1) * a.qs[v];
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * isum;
    }
    return sum;
}
void random_tq2_0(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockTQ2, 256>(
        dst, n_blocks, seed, scale, dequantize_tq2_0,
        [](Rng& rng, BlockTQ2& b) {
            int q[256];
            for (int& code : q) code = rng.below(3);  // ternary: code 3 (+2) is never written
            pack_tq2(q, b);
            b.d = kFp16One;
        },
        [](BlockTQ2& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- q1_0

void dequantize_q1_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / 128; ++i) {
        const auto b = load_block<BlockQ1_0>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < 128; ++j) dst[i * 128 + j] = (b.qs[j / 8] >> (j % 8)) & 1 ? d : -d;
    }
}
// d = mean |x|: the least-squares scale once the signs are fixed.
void quantize_q1_0(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / 128; ++i) {
        const float* x = src + i * 128;
        BlockQ1_0 b{};
        double sum_abs = 0;
        for (int j = 0; j < 128; ++j) sum_abs += std::fabs(x[j]);
        b.d = f32_to_fp16(static_cast<float>(sum_abs / 128));
        for (int j = 0; j < 128; ++j) {
            if (x[j] >= 0) b.qs[j / 8] |= static_cast<uint8_t>(1 << (j % 8));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_q1_0(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / 128; ++i) {
        const auto w = load_block<BlockQ1_0>(weights, i);
        double block = 0;
        for (int k = 0; k < 4; ++k) {  // one q1_0 block spans four q8_0 blocks
            const auto a = load_block<BlockQ8_0>(act, 4 * i + k);
            int isum = 0;
            for (int l = 0; l < 32; ++l) {
                const int j = 32 * k + l;
                isum += ((w.qs[j / 8] >> (j % 8)) & 1) ? a.qs[l] : -a.qs[l];
            }
            block += static_cast<double>(fp16_to_f32(a.d)) * isum;
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * block;
    }
    return sum;
}
void random_q1_0(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ1_0, 128>(
        dst, n_blocks, seed, scale, dequantize_q1_0,
        [](Rng& rng, BlockQ1_0& b) {
            rng.fill(b.qs, sizeof b.qs);
            b.d = kFp16One;
        },
        [](BlockQ1_0& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- q2_0

void dequantize_q2_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / 64; ++i) {
        const auto b = load_block<BlockQ2_0>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < 64; ++j) {
            const int q = (b.qs[j / 4] >> (2 * (j % 4))) & 3;
            dst[i * 64 + j] = static_cast<float>(q - 1) * d;
        }
    }
}
// The levels -1, 0, 1, 2 are lopsided: try both signs of d (so the long tail gets level 2) and
// a range of magnitudes, keep the least squared error.
void quantize_q2_0(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / 64; ++i) {
        const float* x = src + i * 64;
        const float amax = max_abs(x, 64);
        float best = amax;
        double best_sse = uniform_sse(x, 64, amax, -1, 2);
        for (int step = 0; step < 8; ++step) {
            for (float sign : {1.0f, -1.0f}) {
                const float magnitude = amax * (0.3f + 0.1f * static_cast<float>(step));
                const float d = fp16_to_f32(f32_to_fp16(sign * magnitude));
                const double sse = uniform_sse(x, 64, d, -1, 2);
                if (sse < best_sse) {
                    best_sse = sse;
                    best = d;
                }
            }
        }
        BlockQ2_0 b{};
        b.d = f32_to_fp16(best);
        const float d = fp16_to_f32(b.d);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < 64; ++j) {
            const int q = clamp_int(round_even(x[j] * id), -1, 2) + 1;
            b.qs[j / 4] |= static_cast<uint8_t>(q << (2 * (j % 4)));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_q2_0(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / 64; ++i) {
        const auto w = load_block<BlockQ2_0>(weights, i);
        double block = 0;
        for (int k = 0; k < 2; ++k) {  // one q2_0 block spans two q8_0 blocks
            const auto a = load_block<BlockQ8_0>(act, 2 * i + k);
            int isum = 0;
            for (int l = 0; l < 32; ++l) {
                const int j = 32 * k + l;
                isum += (((w.qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * a.qs[l];
            }
            block += static_cast<double>(fp16_to_f32(a.d)) * isum;
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * block;
    }
    return sum;
}
void random_q2_0(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ2_0, 64>(
        dst, n_blocks, seed, scale, dequantize_q2_0,
        [](Rng& rng, BlockQ2_0& b) {
            rng.fill(b.qs, sizeof b.qs);
            b.d = kFp16One;
        },
        [](BlockQ2_0& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- mxfp4

// The doubled E2M1 table times half the E8M0 scale (as ggml computes it; all exact).
void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / 32; ++i) {
        const auto b = load_block<BlockMxfp4>(src, i);
        const float d = e8m0_to_f32_half(b.e);
        for (int j = 0; j < 32; ++j) {
            dst[i * 32 + j] = static_cast<float>(kE2m1DoubledValues[mxfp4_code(b, j)]) * d;
        }
    }
}
// The OCP MX exponent floor(log2(amax)) - 2 (E2M1's largest value is 6 = 1.5 * 2^2), or one
// more when clipping the top values costs more than the coarser steps.
void quantize_mxfp4(const float* src, void* dst, int64_t n) {
    const E2m1Magnitudes mags(kE2m1DoubledValues);
    for (int64_t i = 0; i < n / 32; ++i) {
        const float* x = src + i * 32;
        const float amax = max_abs(x, 32);
        BlockMxfp4 b{};
        if (amax > 0) {
            const int e0 =
                clamp_int(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 1, 253);
            b.e = static_cast<uint8_t>(e0);
            double best_sse = -1;
            for (int e = e0; e <= e0 + 1; ++e) {
                const double sse = e2m1_sse(mags, x, 32, e8m0_to_f32_half(static_cast<uint8_t>(e)));
                if (best_sse < 0 || sse < best_sse) {
                    best_sse = sse;
                    b.e = static_cast<uint8_t>(e);
                }
            }
        }
        const float d = e8m0_to_f32_half(b.e);
        for (int j = 0; j < 32; ++j) {
            const int code = e2m1_code(mags, x[j] / d);
            if (j < 16) {
                b.qs[j] |= static_cast<uint8_t>(code);
            } else {
                b.qs[j - 16] |= static_cast<uint8_t>(code << 4);
            }
        }
        store_block(dst, i, b);
    }
}
double ref_dot_mxfp4(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / 32; ++i) {
        const auto w = load_block<BlockMxfp4>(weights, i);
        const auto a = load_block<BlockQ8_0>(act, i);
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += kE2m1DoubledValues[mxfp4_code(w, j)] * a.qs[j];
        sum += static_cast<double>(e8m0_to_f32_half(w.e)) * fp16_to_f32(a.d) * isum;
    }
    return sum;
}
// E8M0 has no sign and only powers of two: the scale is the nearest power of two, and a
// negative factor flips the codes.
void random_mxfp4(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockMxfp4, 32>(
        dst, n_blocks, seed, scale, dequantize_mxfp4,
        [](Rng& rng, BlockMxfp4& b) {
            rng.fill(b.qs, sizeof b.qs);
            b.e = 128;  // half-scale 1
        },
        [](BlockMxfp4& b, float f) {
            const int e = 128 + static_cast<int>(std::lround(std::log2(std::fabs(f))));
            b.e = static_cast<uint8_t>(clamp_int(e, 1, 254));
            if (f < 0) flip_e2m1_signs(b.qs, sizeof b.qs);
        });
}

// ---------------------------------------------------------------- nvfp4

void dequantize_nvfp4(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / 64; ++i) {
        const auto b = load_block<BlockNvfp4>(src, i);
        for (int v = 0; v < 64; ++v) {
            const float d = ue4m3_to_f32_half(b.d[v / 16]);
            dst[i * 64 + v] = static_cast<float>(kE2m1DoubledValues[nvfp4_code(b, v)]) * d;
        }
    }
}
// Per sub-block: the UE4M3 scale nearest to amax / 6 (E2M1's largest value) and its two
// neighbours; the one with the least squared error wins.
void quantize_nvfp4(const float* src, void* dst, int64_t n) {
    const E2m1Magnitudes mags(kE2m1DoubledValues);
    for (int64_t i = 0; i < n / 64; ++i) {
        BlockNvfp4 b{};
        for (int s = 0; s < 4; ++s) {
            const float* x = src + i * 64 + 16 * s;
            const float amax = max_abs(x, 16);
            const int center = f32_to_ue4m3(amax / 6.0f);
            b.d[s] = static_cast<uint8_t>(center);
            double best_sse = -1;
            for (int code = center - 1; code <= center + 1; ++code) {
                if (code < 0 || code > 0x7e) continue;
                const double sse =
                    e2m1_sse(mags, x, 16, ue4m3_to_f32_half(static_cast<uint8_t>(code)));
                if (best_sse < 0 || sse < best_sse) {
                    best_sse = sse;
                    b.d[s] = static_cast<uint8_t>(code);
                }
            }
            const float d = ue4m3_to_f32_half(b.d[s]);
            for (int j = 0; j < 16; ++j) {
                const int code = d != 0 ? e2m1_code(mags, x[j] / d) : 0;
                if (j < 8) {
                    b.qs[8 * s + j] |= static_cast<uint8_t>(code);
                } else {
                    b.qs[8 * s + j - 8] |= static_cast<uint8_t>(code << 4);
                }
            }
        }
        store_block(dst, i, b);
    }
}
double ref_dot_nvfp4(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / 64; ++i) {
        const auto w = load_block<BlockNvfp4>(weights, i);
        for (int s = 0; s < 4; ++s) {  // sub-blocks 2k and 2k+1 share q8_0 block k
            const auto a = load_block<BlockQ8_0>(act, 2 * i + s / 2);
            int isum = 0;
            for (int j = 0; j < 16; ++j) {
                isum += kE2m1DoubledValues[nvfp4_code(w, 16 * s + j)] * a.qs[16 * (s % 2) + j];
            }
            sum += static_cast<double>(ue4m3_to_f32_half(w.d[s])) * fp16_to_f32(a.d) * isum;
        }
    }
    return sum;
}
// UE4M3 has no sign: a negative factor flips the codes. Block scales below UE4M3's range
// (2^-10 in ggml's half units) come out as 0.
void random_nvfp4(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockNvfp4, 64>(
        dst, n_blocks, seed, scale, dequantize_nvfp4,
        [](Rng& rng, BlockNvfp4& b) {
            rng.fill(b.qs, sizeof b.qs);
            for (uint8_t& d : b.d) d = 0x40;  // 2.0, half-scale 1
        },
        [](BlockNvfp4& b, float f) {
            for (uint8_t& d : b.d) d = f32_to_ue4m3(2.0f * std::fabs(f));
            if (f < 0) flip_e2m1_signs(b.qs, sizeof b.qs);
        });
}

}  // namespace tandem
