// The 256-value super-block "k-quants" q2_K..q6_K (weights) and q8_K (activations):
// dequantizers bit-identical to ggml, simple min/max (or absmax) weight quantizers, ggml's q8_K
// activation quantizer, and reference dot products (block layouts: ggml-common.h).
#include "formats/quants_k.h"

#include <algorithm>
#include <cmath>

#include "formats/quant_util.h"

namespace tandem {
namespace {

using namespace formats_detail;

constexpr int kQK = 256;

// q2_K, 84 bytes: 16 sub-blocks of 16 values; x = d * sc * q - dmin * m, q in 0..3.
//   scales[16] sub-block k: low nibble = sc, high nibble = m
//   qs[64]     value v = 128 n + 32 j + l (n < 2, j < 4, l < 32): bits 2j..2j+1 of qs[32 n + l]
//   d, dmin    fp16
struct BlockQ2K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d;
    uint16_t dmin;
};
// q3_K, 110 bytes: 16 sub-blocks of 16 values; x = d * (sc - 32) * q, q in -4..3.
//   hmask[32]  value v = 128 n + 32 j + l: bit 4n+j of hmask[l] set -> q = low bits, clear ->
//              q = low bits - 4
//   qs[64]     low 2 bits of q, placed as in q2_K
//   scales[12] sub-block k's 6-bit sc: low 4 bits = k < 8 ? scales[k] & 15 : scales[k - 8] >> 4,
//              high 2 bits = bits 2(k/4)..2(k/4)+1 of scales[8 + k % 4]
//   d          fp16
struct BlockQ3K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
// q4_K, 144 bytes: 8 sub-blocks of 32 values; x = d * sc * q - dmin * m, q in 0..15.
//   d, dmin    fp16
//   scales[12] 6-bit sc and m of sub-block k: k < 4: sc = scales[k] & 63, m = scales[k+4] & 63;
//              k >= 4: sc = (scales[k+4] & 15) | (scales[k-4] >> 6) << 4,
//                      m  = (scales[k+4] >> 4) | (scales[k] >> 6) << 4
//   qs[128]    value v = 64 c + 32 h + l (c < 4, h < 2, l < 32): nibble h of qs[32 c + l]
struct BlockQ4K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
// q5_K, 176 bytes: as q4_K with q in 0..31; bit 4 of q for v = 64 c + 32 h + l is bit 2c+h of
// qh[l].
struct BlockQ5K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
// q6_K, 210 bytes: 16 sub-blocks of 16 values; x = d * sc * (q - 32), q in 0..63, sc int8.
//   ql[128]    value v = 128 n + 32 g + l (n < 2, g < 4, l < 32): low 4 bits = nibble g / 2 of
//              ql[64 n + 32 (g % 2) + l]
//   qh[64]     high 2 bits = bits 2g..2g+1 of qh[32 n + l]
//   scales[16] int8 sc of sub-block v / 16
//   d          fp16
struct BlockQ6K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// q8_K, 292 bytes (activations): x = d * q with a float d; bsums[k] = sum of q over values
// 16k..16k+15, which the dot products of formats with mins use.
struct BlockQ8K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};
static_assert(sizeof(BlockQ2K) == 84 && sizeof(BlockQ3K) == 110 && sizeof(BlockQ4K) == 144 &&
              sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210 && sizeof(BlockQ8K) == 292);

// ---------------------------------------------------------------- field access

int q2k_code(const BlockQ2K& b, int v) {
    return (b.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}
void set_q2k_code(uint8_t* qs, int v, int q) {
    qs[32 * (v / 128) + v % 32] |= static_cast<uint8_t>(q << (2 * ((v % 128) / 32)));
}

int q3k_code(const BlockQ3K& b, int v) {
    const int high = (b.hmask[v % 32] >> (4 * (v / 128) + (v % 128) / 32)) & 1;
    return (b.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32)) & 3) - (high ? 0 : 4);
}
int q3k_scale(const BlockQ3K& b, int k) {
    const int low = k < 8 ? b.scales[k] & 15 : b.scales[k - 8] >> 4;
    const int high = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 3;
    return (low | high << 4) - 32;
}

// The 6-bit scale and min of sub-block k of q4_K / q5_K.
void k4_scale_min(const uint8_t* scales, int k, int* sc, int* m) {
    if (k < 4) {
        *sc = scales[k] & 63;
        *m = scales[k + 4] & 63;
    } else {
        *sc = (scales[k + 4] & 15) | (scales[k - 4] >> 6) << 4;
        *m = (scales[k + 4] >> 4) | (scales[k] >> 6) << 4;
    }
}
void set_k4_scale_min(uint8_t* scales, int k, int sc, int m) {
    if (k < 4) {
        scales[k] |= static_cast<uint8_t>(sc);
        scales[k + 4] |= static_cast<uint8_t>(m);
    } else {
        scales[k + 4] |= static_cast<uint8_t>((sc & 15) | (m & 15) << 4);
        scales[k - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
        scales[k] |= static_cast<uint8_t>((m >> 4) << 6);
    }
}

int q4k_code(const BlockQ4K& b, int v) {
    const uint8_t byte = b.qs[32 * (v / 64) + v % 32];
    return (v % 64) < 32 ? byte & 15 : byte >> 4;
}
int q5k_code(const BlockQ5K& b, int v) {
    const uint8_t byte = b.qs[32 * (v / 64) + v % 32];
    const int low = (v % 64) < 32 ? byte & 15 : byte >> 4;
    const int bit = 2 * (v / 64) + (v % 64) / 32;
    return low | ((b.qh[v % 32] >> bit) & 1) << 4;
}
void set_q45k_low(uint8_t* qs, int v, int q) {
    qs[32 * (v / 64) + v % 32] |= static_cast<uint8_t>((v % 64) < 32 ? q : q << 4);
}

int q6k_code(const BlockQ6K& b, int v) {
    const int n = v / 128, g = (v % 128) / 32, l = v % 32;
    const uint8_t low_byte = b.ql[64 * n + 32 * (g % 2) + l];
    const int low = g < 2 ? low_byte & 15 : low_byte >> 4;
    const int high = (b.qh[32 * n + l] >> (2 * g)) & 3;
    return (low | high << 4) - 32;
}
void set_q6k_code(BlockQ6K& b, int v, int q) {  // q in -32..31
    const int n = v / 128, g = (v % 128) / 32, l = v % 32;
    const int u = q + 32;
    b.ql[64 * n + 32 * (g % 2) + l] |= static_cast<uint8_t>(g < 2 ? (u & 15) : (u & 15) << 4);
    b.qh[32 * n + l] |= static_cast<uint8_t>((u >> 4) << (2 * g));
}

// ---------------------------------------------------------------- simple weight quantizers

// Asymmetric sub-blocks (q2_K, q4_K, q5_K): x ~ a * q - b with a = d * sc, b = dmin * m.
// Each sub-block spans [min(x, 0), max(x)]; the super-block scales put the largest a and b on
// the top code of sc and m; codes are then chosen against the rounded scales.
struct AsymmetricPlan {
    float d = 0, dmin = 0;
    int sc[16] = {}, m[16] = {};
};
AsymmetricPlan plan_asymmetric(const float* x, int sub_size, int n_sub, int q_max, int scale_max) {
    float a[16], b[16], a_max = 0, b_max = 0;
    for (int k = 0; k < n_sub; ++k) {
        float lo = 0, hi = x[k * sub_size];
        for (int l = 0; l < sub_size; ++l) {
            lo = min_f(lo, x[k * sub_size + l]);
            hi = max_f(hi, x[k * sub_size + l]);
        }
        a[k] = (hi - lo) / static_cast<float>(q_max);
        b[k] = -lo;
        a_max = max_f(a_max, a[k]);
        b_max = max_f(b_max, b[k]);
    }
    AsymmetricPlan p;
    p.d = fp16_to_f32(f32_to_fp16(a_max / static_cast<float>(scale_max)));
    p.dmin = fp16_to_f32(f32_to_fp16(b_max / static_cast<float>(scale_max)));
    for (int k = 0; k < n_sub; ++k) {
        p.sc[k] = p.d > 0 ? clamp_int(round_even(a[k] / p.d), 0, scale_max) : 0;
        p.m[k] = p.dmin > 0 ? clamp_int(round_even(b[k] / p.dmin), 0, scale_max) : 0;
    }
    return p;
}
int asymmetric_code(float x, float a, float b, int q_max) {
    return a > 0 ? clamp_int(round_even((x + b) / a), 0, q_max) : 0;
}

// Symmetric sub-blocks (q3_K, q6_K): x ~ d * sc * q with q in -q_half..q_half-1 and sc in
// -scale_half..scale_half-1; the extreme value of each sub-block maps to -q_half and the
// sub-block with the largest scale to -scale_half.
struct SymmetricPlan {
    float d = 0;
    int sc[16] = {};
};
SymmetricPlan plan_symmetric(const float* x, int sub_size, int n_sub, int q_half, int scale_half) {
    float s[16], s_extreme = 0;
    for (int k = 0; k < n_sub; ++k) {
        float amax = 0, max = 0;
        for (int l = 0; l < sub_size; ++l) {
            if (std::fabs(x[k * sub_size + l]) > amax) {
                amax = std::fabs(x[k * sub_size + l]);
                max = x[k * sub_size + l];
            }
        }
        s[k] = max / static_cast<float>(-q_half);
        if (std::fabs(s[k]) > std::fabs(s_extreme)) s_extreme = s[k];
    }
    SymmetricPlan p;
    p.d = fp16_to_f32(f32_to_fp16(s_extreme / static_cast<float>(-scale_half)));
    for (int k = 0; k < n_sub; ++k) {
        p.sc[k] = p.d != 0 ? clamp_int(round_even(s[k] / p.d), -scale_half, scale_half - 1) : 0;
    }
    return p;
}
int symmetric_code(float x, float scale, int q_half) {
    return scale != 0 ? clamp_int(round_even(x / scale), -q_half, q_half - 1) : 0;
}

}  // namespace

// ---------------------------------------------------------------- q2_K

void dequantize_q2_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ2K>(src, i);
        const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
        for (int v = 0; v < kQK; ++v) {
            const float dl = d * static_cast<float>(b.scales[v / 16] & 15);
            const float ml = dmin * static_cast<float>(b.scales[v / 16] >> 4);
            dst[i * kQK + v] = dl * static_cast<float>(q2k_code(b, v)) - ml;
        }
    }
}
void quantize_q2_K(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const AsymmetricPlan p = plan_asymmetric(x, 16, 16, 3, 15);
        BlockQ2K b{};
        b.d = f32_to_fp16(p.d);
        b.dmin = f32_to_fp16(p.dmin);
        for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<uint8_t>(p.sc[k] | p.m[k] << 4);
        for (int v = 0; v < kQK; ++v) {
            const float a = p.d * static_cast<float>(p.sc[v / 16]);
            const float bias = p.dmin * static_cast<float>(p.m[v / 16]);
            set_q2k_code(b.qs, v, asymmetric_code(x[v], a, bias, 3));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_q2_K(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ2K>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int64_t isum = 0, summs = 0;
        for (int k = 0; k < 16; ++k) {
            int sub = 0;
            for (int l = 0; l < 16; ++l) sub += q2k_code(w, 16 * k + l) * a.qs[16 * k + l];
            isum += (w.scales[k] & 15) * sub;
            summs += (w.scales[k] >> 4) * a.bsums[k];
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * static_cast<double>(isum) -
               static_cast<double>(fp16_to_f32(w.dmin)) * a.d * static_cast<double>(summs);
    }
    return sum;
}
// Random sub-block scales, with mins at about 1.5 steps (dmin = 2 d) so sub-blocks are centred.
void random_q2_K(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ2K, kQK>(
        dst, n_blocks, seed, scale, dequantize_q2_K,
        [](Rng& rng, BlockQ2K& b) {
            rng.fill(b.qs, sizeof b.qs);
            for (uint8_t& s : b.scales) {
                const int sc = 1 + rng.below(15);
                s = static_cast<uint8_t>(sc | round_even(0.75f * static_cast<float>(sc)) << 4);
            }
            b.d = kFp16One;
            b.dmin = f32_to_fp16(2.0f);
        },
        [](BlockQ2K& b, float f) {
            b.d = finite_fp16(f);
            b.dmin = finite_fp16(2.0f * f);
        });
}

// ---------------------------------------------------------------- q3_K

void dequantize_q3_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ3K>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int v = 0; v < kQK; ++v) {
            const float dl = d * static_cast<float>(q3k_scale(b, v / 16));
            dst[i * kQK + v] = dl * static_cast<float>(q3k_code(b, v));
        }
    }
}
void quantize_q3_K(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const SymmetricPlan p = plan_symmetric(x, 16, 16, 4, 32);
        BlockQ3K b{};
        b.d = f32_to_fp16(p.d);
        for (int k = 0; k < 16; ++k) {
            const int u = p.sc[k] + 32;  // 6 bits
            if (k < 8) {
                b.scales[k] |= static_cast<uint8_t>(u & 15);
            } else {
                b.scales[k - 8] |= static_cast<uint8_t>((u & 15) << 4);
            }
            b.scales[8 + k % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (k / 4)));
        }
        for (int v = 0; v < kQK; ++v) {
            const float scale = p.d * static_cast<float>(p.sc[v / 16]);
            const int u = symmetric_code(x[v], scale, 4) + 4;  // 0..7
            set_q2k_code(b.qs, v, u & 3);  // the low bits sit where q2_K keeps its codes
            if (u >= 4)
                b.hmask[v % 32] |= static_cast<uint8_t>(1 << (4 * (v / 128) + (v % 128) / 32));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_q3_K(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ3K>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int64_t isum = 0;
        for (int k = 0; k < 16; ++k) {
            int sub = 0;
            for (int l = 0; l < 16; ++l) sub += q3k_code(w, 16 * k + l) * a.qs[16 * k + l];
            isum += q3k_scale(w, k) * sub;
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * static_cast<double>(isum);
    }
    return sum;
}
void random_q3_K(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ3K, kQK>(
        dst, n_blocks, seed, scale, dequantize_q3_K,
        [](Rng& rng, BlockQ3K& b) {
            rng.fill(&b, sizeof b);
            b.d = kFp16One;
        },
        [](BlockQ3K& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- q4_K

void dequantize_q4_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ4K>(src, i);
        const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
        for (int v = 0; v < kQK; ++v) {
            int sc, m;
            k4_scale_min(b.scales, v / 32, &sc, &m);
            const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
            dst[i * kQK + v] = dl * static_cast<float>(q4k_code(b, v)) - ml;
        }
    }
}
void quantize_q4_K(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const AsymmetricPlan p = plan_asymmetric(x, 32, 8, 15, 63);
        BlockQ4K b{};
        b.d = f32_to_fp16(p.d);
        b.dmin = f32_to_fp16(p.dmin);
        for (int k = 0; k < 8; ++k) set_k4_scale_min(b.scales, k, p.sc[k], p.m[k]);
        for (int v = 0; v < kQK; ++v) {
            const float a = p.d * static_cast<float>(p.sc[v / 32]);
            const float bias = p.dmin * static_cast<float>(p.m[v / 32]);
            set_q45k_low(b.qs, v, asymmetric_code(x[v], a, bias, 15));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_q4_K(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ4K>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int64_t isum = 0, summs = 0;
        for (int k = 0; k < 8; ++k) {
            int sc, m;
            k4_scale_min(w.scales, k, &sc, &m);
            int sub = 0;
            for (int l = 0; l < 32; ++l) sub += q4k_code(w, 32 * k + l) * a.qs[32 * k + l];
            isum += sc * sub;
            summs += m * (a.bsums[2 * k] + a.bsums[2 * k + 1]);
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * static_cast<double>(isum) -
               static_cast<double>(fp16_to_f32(w.dmin)) * a.d * static_cast<double>(summs);
    }
    return sum;
}
// Random 6-bit scales, with mins at about 7.5 steps (dmin = 8 d) so sub-blocks are centred.
void random_q4_K(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ4K, kQK>(
        dst, n_blocks, seed, scale, dequantize_q4_K,
        [](Rng& rng, BlockQ4K& b) {
            b = BlockQ4K{};
            rng.fill(b.qs, sizeof b.qs);
            for (int k = 0; k < 8; ++k) {
                const int sc = 1 + rng.below(63);
                set_k4_scale_min(b.scales, k, sc, round_even(static_cast<float>(sc) * 15 / 16));
            }
            b.d = kFp16One;
            b.dmin = f32_to_fp16(8.0f);
        },
        [](BlockQ4K& b, float f) {
            b.d = finite_fp16(f);
            b.dmin = finite_fp16(8.0f * f);
        });
}

// ---------------------------------------------------------------- q5_K

void dequantize_q5_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ5K>(src, i);
        const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
        for (int v = 0; v < kQK; ++v) {
            int sc, m;
            k4_scale_min(b.scales, v / 32, &sc, &m);
            const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
            dst[i * kQK + v] = dl * static_cast<float>(q5k_code(b, v)) - ml;
        }
    }
}
void quantize_q5_K(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const AsymmetricPlan p = plan_asymmetric(x, 32, 8, 31, 63);
        BlockQ5K b{};
        b.d = f32_to_fp16(p.d);
        b.dmin = f32_to_fp16(p.dmin);
        for (int k = 0; k < 8; ++k) set_k4_scale_min(b.scales, k, p.sc[k], p.m[k]);
        for (int v = 0; v < kQK; ++v) {
            const float a = p.d * static_cast<float>(p.sc[v / 32]);
            const float bias = p.dmin * static_cast<float>(p.m[v / 32]);
            const int q = asymmetric_code(x[v], a, bias, 31);
            set_q45k_low(b.qs, v, q & 15);
            b.qh[v % 32] |= static_cast<uint8_t>((q >> 4) << (2 * (v / 64) + (v % 64) / 32));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_q5_K(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ5K>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int64_t isum = 0, summs = 0;
        for (int k = 0; k < 8; ++k) {
            int sc, m;
            k4_scale_min(w.scales, k, &sc, &m);
            int sub = 0;
            for (int l = 0; l < 32; ++l) sub += q5k_code(w, 32 * k + l) * a.qs[32 * k + l];
            isum += sc * sub;
            summs += m * (a.bsums[2 * k] + a.bsums[2 * k + 1]);
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * static_cast<double>(isum) -
               static_cast<double>(fp16_to_f32(w.dmin)) * a.d * static_cast<double>(summs);
    }
    return sum;
}
// As q4_K, with mins at about 15.5 steps (dmin = 16 d).
void random_q5_K(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ5K, kQK>(
        dst, n_blocks, seed, scale, dequantize_q5_K,
        [](Rng& rng, BlockQ5K& b) {
            b = BlockQ5K{};
            rng.fill(b.qh, sizeof b.qh);
            rng.fill(b.qs, sizeof b.qs);
            for (int k = 0; k < 8; ++k) {
                const int sc = 1 + rng.below(63);
                set_k4_scale_min(b.scales, k, sc, round_even(static_cast<float>(sc) * 31 / 32));
            }
            b.d = kFp16One;
            b.dmin = f32_to_fp16(16.0f);
        },
        [](BlockQ5K& b, float f) {
            b.d = finite_fp16(f);
            b.dmin = finite_fp16(16.0f * f);
        });
}

// ---------------------------------------------------------------- q6_K

void dequantize_q6_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ6K>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int v = 0; v < kQK; ++v) {
            // ggml rounds (d * sc) * q: d * sc is exact, the second product may round.
            const float dl = d * static_cast<float>(b.scales[v / 16]);
            dst[i * kQK + v] = dl * static_cast<float>(q6k_code(b, v));
        }
    }
}
void quantize_q6_K(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const SymmetricPlan p = plan_symmetric(x, 16, 16, 32, 128);
        BlockQ6K b{};
        b.d = f32_to_fp16(p.d);
        for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(p.sc[k]);
        for (int v = 0; v < kQK; ++v) {
            const float scale = p.d * static_cast<float>(p.sc[v / 16]);
            set_q6k_code(b, v, symmetric_code(x[v], scale, 32));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_q6_K(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ6K>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int64_t isum = 0;
        for (int k = 0; k < 16; ++k) {
            int sub = 0;
            for (int l = 0; l < 16; ++l) sub += q6k_code(w, 16 * k + l) * a.qs[16 * k + l];
            isum += w.scales[k] * sub;
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * static_cast<double>(isum);
    }
    return sum;
}
void random_q6_K(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ6K, kQK>(
        dst, n_blocks, seed, scale, dequantize_q6_K,
        [](Rng& rng, BlockQ6K& b) {
            rng.fill(&b, sizeof b);
            b.d = kFp16One;
        },
        [](BlockQ6K& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- q8_K

void dequantize_q8_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ8K>(src, i);
        for (int v = 0; v < kQK; ++v) dst[i * kQK + v] = b.d * static_cast<float>(b.qs[v]);
    }
}
// ggml's quantize_row_q8_K (the same scalar code in every CPU variant): the first value of
// largest magnitude maps to -127 exactly (scale -127 / max), rounding to nearest even, and
// d = 1 / scale; an all-zero block stores d = 0.
void quantize_q8_K(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        BlockQ8K b{};
        float amax = 0, max = 0;
        for (int v = 0; v < kQK; ++v) {
            if (std::fabs(x[v]) > amax) {
                amax = std::fabs(x[v]);
                max = x[v];
            }
        }
        if (amax != 0) {
            const float iscale = -127.0f / max;
            for (int v = 0; v < kQK; ++v) {
                b.qs[v] = static_cast<int8_t>(std::min(127, round_even(iscale * x[v])));
            }
            for (int k = 0; k < 16; ++k) {
                int s = 0;
                for (int l = 0; l < 16; ++l) s += b.qs[16 * k + l];
                b.bsums[k] = static_cast<int16_t>(s);
            }
            b.d = 1.0f / iscale;
        }
        store_block(dst, i, b);
    }
}

}  // namespace tandem
