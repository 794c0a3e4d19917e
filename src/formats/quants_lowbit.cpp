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

// Ternary scale: the best of d = amax * r for r = 1, 0.95, ..., 0.3 (r = 1 is exact for
// weights that are ternary already).
float ternary_scale(const float* x, int n) {
    static constexpr int kTernary[3] = {-1, 0, 1};
    float amax = 0;
    for (int j = 0; j < n; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    float best = amax;
    double best_sse = level_sse(x, n, amax, kTernary, 3);
    for (int step = 1; step <= 14; ++step) {
        const float d = fp16_to_f32(f32_to_fp16(amax * (1.0f - 0.05f * static_cast<float>(step))));
        const double sse = level_sse(x, n, d, kTernary, 3);
        if (sse < best_sse) {
            best_sse = sse;
            best = d;
        }
    }
    return best;
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
    random_by_quantizing<256, sizeof(BlockTQ1)>(quantize_tq1_0, dst, n_blocks, seed, scale);
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
        for (int v = 0; v < 256; ++v) {
            const int q = clamp_int(round_even(x[v] * id), -1, 1) + 1;
            b.qs[32 * (v / 128) + v % 32] |= static_cast<uint8_t>(q << (2 * ((v % 128) / 32)));
        }
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
    random_by_quantizing<256, sizeof(BlockTQ2)>(quantize_tq2_0, dst, n_blocks, seed, scale);
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
    random_by_quantizing<128, sizeof(BlockQ1_0)>(quantize_q1_0, dst, n_blocks, seed, scale);
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
    static constexpr int kLevels[4] = {-1, 0, 1, 2};
    for (int64_t i = 0; i < n / 64; ++i) {
        const float* x = src + i * 64;
        float amax = 0;
        for (int j = 0; j < 64; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        float best = amax;
        double best_sse = level_sse(x, 64, amax, kLevels, 4);
        for (int step = 0; step < 32; ++step) {
            for (float sign : {1.0f, -1.0f}) {
                const float magnitude = amax * (0.25f + 0.025f * static_cast<float>(step));
                const float d = fp16_to_f32(f32_to_fp16(sign * magnitude));
                const double sse = level_sse(x, 64, d, kLevels, 4);
                if (sse < best_sse) {
                    best_sse = sse;
                    best = d;
                }
            }
        }
        BlockQ2_0 b{};
        b.d = f32_to_fp16(best);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < 64; ++j) {
            const int q = nearest_level(d != 0 ? x[j] / d : 0.0f, kLevels, 4);
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
    random_by_quantizing<64, sizeof(BlockQ2_0)>(quantize_q2_0, dst, n_blocks, seed, scale);
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
    for (int64_t i = 0; i < n / 32; ++i) {
        const float* x = src + i * 32;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        BlockMxfp4 b{};
        if (amax > 0) {
            const int e0 =
                clamp_int(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 1, 253);
            b.e = static_cast<uint8_t>(e0);
            double best_sse = -1;
            for (int e = e0; e <= e0 + 1; ++e) {
                const double sse = level_sse(x, 32, e8m0_to_f32_half(static_cast<uint8_t>(e)),
                                             kE2m1DoubledValues, 16);
                if (best_sse < 0 || sse < best_sse) {
                    best_sse = sse;
                    b.e = static_cast<uint8_t>(e);
                }
            }
        }
        const float d = e8m0_to_f32_half(b.e);
        for (int j = 0; j < 32; ++j) {
            const int code = nearest_level(x[j] / d, kE2m1DoubledValues, 16);
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
void random_mxfp4(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_by_quantizing<32, sizeof(BlockMxfp4)>(quantize_mxfp4, dst, n_blocks, seed, scale);
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
    for (int64_t i = 0; i < n / 64; ++i) {
        BlockNvfp4 b{};
        for (int s = 0; s < 4; ++s) {
            const float* x = src + i * 64 + 16 * s;
            float amax = 0;
            for (int j = 0; j < 16; ++j) amax = std::fmax(amax, std::fabs(x[j]));
            const int center = f32_to_ue4m3(amax / 6.0f);
            b.d[s] = static_cast<uint8_t>(center);
            double best_sse = -1;
            for (int code = center - 1; code <= center + 1; ++code) {
                if (code < 0 || code > 0x7e) continue;
                const double sse = level_sse(x, 16, ue4m3_to_f32_half(static_cast<uint8_t>(code)),
                                             kE2m1DoubledValues, 16);
                if (best_sse < 0 || sse < best_sse) {
                    best_sse = sse;
                    b.d[s] = static_cast<uint8_t>(code);
                }
            }
            const float d = ue4m3_to_f32_half(b.d[s]);
            for (int j = 0; j < 16; ++j) {
                const int code = nearest_level(d != 0 ? x[j] / d : 0.0f, kE2m1DoubledValues, 16);
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
void random_nvfp4(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_by_quantizing<64, sizeof(BlockNvfp4)>(quantize_nvfp4, dst, n_blocks, seed, scale);
}

}  // namespace tandem
