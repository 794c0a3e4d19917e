// The 32-value block formats q4_0, q4_1, q5_0, q5_1, q8_0 (weights) and q8_1 (activations):
// dequantizers bit-identical to ggml, simple weight quantizers, ggml's activation quantizers,
// and reference dot products (block layouts: ggml-common.h).
#include "formats/quants_legacy.h"

#include <cmath>

#include "formats/quant_util.h"

namespace tandem {
namespace {

using namespace formats_detail;

constexpr int kQK = 32;

// q4_0, 18 bytes: x = d * (q - 8), q in 0..15.
//   d      fp16
//   qs[16] byte j: low nibble = q of value j, high nibble = q of value j + 16
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[16];
};
// q4_1, 20 bytes: x = d * q + m, q in 0..15; qs packed as in q4_0.
struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[16];
};
// q5_0, 22 bytes: x = d * (q - 16), q in 0..31.
//   d      fp16
//   qh[4]  little-endian uint32: bit j = bit 4 of the q of value j (j = 0..31)
//   qs[16] low 4 bits, packed as in q4_0
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
// q5_1, 24 bytes: x = d * q + m, q in 0..31; qh and qs as in q5_0.
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[16];
};
// q8_0, 34 bytes: x = d * q, q in -127..127 (int8).
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[32];
};
// q8_1, 36 bytes (activations of q4_1 and q5_1): x = d * q; s = fp16(d * sum(q)), which the
// dot product uses for the weights' min term.
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[32];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);

// The 4-bit code of value j (0..31) from a 16-byte nibble array.
int nibble(const uint8_t* qs, int j) {
    return j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
}
void set_nibble(uint8_t* qs, int j, int q) {
    if (j < 16) {
        qs[j] = static_cast<uint8_t>((qs[j] & 0xf0) | q);
    } else {
        qs[j - 16] = static_cast<uint8_t>((qs[j - 16] & 0x0f) | (q << 4));
    }
}
uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
int q5_code(const uint8_t* qs, const uint8_t* qh, int j) {
    return nibble(qs, j) | static_cast<int>(((load_u32(qh) >> j) & 1) << 4);
}
void set_q5_code(uint8_t* qs, uint8_t* qh, int j, int q) {
    set_nibble(qs, j, q & 0xf);
    uint32_t h = load_u32(qh) | (static_cast<uint32_t>(q >> 4) << j);
    std::memcpy(qh, &h, 4);
}

// The value of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

// Symmetric quantizer shared by q4_0 and q5_0: the extreme value maps to code 0 (q - offset =
// -offset), codes 0..2*offset-1.
template <typename Block, int kOffset>
Block quantize_symmetric(const float* x) {
    Block b{};
    const float d = fp16_to_f32(f32_to_fp16(signed_absmax(x, kQK) / -kOffset));
    b.d = f32_to_fp16(d);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < kQK; ++j) {
        int q = clamp_int(round_even(x[j] * id) + kOffset, 0, 2 * kOffset - 1);
        if constexpr (kOffset == 8) {
            set_nibble(b.qs, j, q);
        } else {
            set_q5_code(b.qs, b.qh, j, q);
        }
    }
    return b;
}

// Min/max quantizer shared by q4_1 and q5_1: codes 0..kMax between the block's min and max.
template <typename Block, int kMax>
Block quantize_min_max(const float* x) {
    Block b{};
    float lo = x[0], hi = x[0];
    for (int j = 1; j < kQK; ++j) {
        lo = min_f(lo, x[j]);
        hi = max_f(hi, x[j]);
    }
    b.d = f32_to_fp16((hi - lo) / kMax);
    b.m = f32_to_fp16(lo);
    const float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < kQK; ++j) {
        int q = clamp_int(round_even((x[j] - m) * id), 0, kMax);
        if constexpr (kMax == 15) {
            set_nibble(b.qs, j, q);
        } else {
            set_q5_code(b.qs, b.qh, j, q);
        }
    }
    return b;
}

// ggml's AVX quantize_row_q8_0 / q8_1 (what its CPU backend uses on every x86 machine with
// AVX): d = amax / 127, multiplier 127 / amax, rounding to nearest even. (The scalar
// quantize_row_q8_0_ref multiplies by 1 / d and rounds ties away from zero; both rarely differ.)
// Returns the unrounded scale d; q8_1 needs it for s.
template <typename Block>
float q8_quantize_block(const float* x, Block& b) {
    const float amax = max_abs(x, kQK);
    const float d = amax / 127.0f;
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    b.d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(round_even(x[j] * id));
    return d;
}

}  // namespace

// ---------------------------------------------------------------- q4_0

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ4_0>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < kQK; ++j)
            dst[i * kQK + j] = static_cast<float>(nibble(b.qs, j) - 8) * d;
    }
}
void quantize_q4_0(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        store_block(dst, i, quantize_symmetric<BlockQ4_0, 8>(src + i * kQK));
    }
}
double ref_dot_q4_0(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ4_0>(weights, i);
        const auto a = load_block<BlockQ8_0>(act, i);
        int isum = 0;
        for (int j = 0; j < kQK; ++j) isum += (nibble(w.qs, j) - 8) * a.qs[j];
        sum += static_cast<double>(fp16_to_f32(w.d)) * fp16_to_f32(a.d) * isum;
    }
    return sum;
}
void random_q4_0(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ4_0, kQK>(
        dst, n_blocks, seed, scale, dequantize_q4_0,
        [](Rng& rng, BlockQ4_0& b) {
            rng.fill(b.qs, sizeof b.qs);
            b.d = kFp16One;
        },
        [](BlockQ4_0& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- q4_1

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ4_1>(src, i);
        const float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
        for (int j = 0; j < kQK; ++j)
            dst[i * kQK + j] = static_cast<float>(nibble(b.qs, j)) * d + m;
    }
}
void quantize_q4_1(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        store_block(dst, i, quantize_min_max<BlockQ4_1, 15>(src + i * kQK));
    }
}
// The min term uses the activation's fp16 s field, as ggml's vec_dot does: sum(m * y) is
// m * s, not m * d * sum(q).
double ref_dot_q4_1(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ4_1>(weights, i);
        const auto a = load_block<BlockQ8_1>(act, i);
        int isum = 0;
        for (int j = 0; j < kQK; ++j) isum += nibble(w.qs, j) * a.qs[j];
        sum += static_cast<double>(fp16_to_f32(w.d)) * fp16_to_f32(a.d) * isum +
               static_cast<double>(fp16_to_f32(w.m)) * fp16_to_f32(a.s);
    }
    return sum;
}
// The min sits at -7.5 steps, so blocks are centred like quantized real weights.
void random_q4_1(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ4_1, kQK>(
        dst, n_blocks, seed, scale, dequantize_q4_1,
        [](Rng& rng, BlockQ4_1& b) {
            rng.fill(b.qs, sizeof b.qs);
            b.d = kFp16One;
            b.m = f32_to_fp16(-7.5f);
        },
        [](BlockQ4_1& b, float f) {
            b.d = finite_fp16(f);
            b.m = finite_fp16(-7.5f * f);
        });
}

// ---------------------------------------------------------------- q5_0

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ5_0>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < kQK; ++j) {
            dst[i * kQK + j] = static_cast<float>(q5_code(b.qs, b.qh, j) - 16) * d;
        }
    }
}
void quantize_q5_0(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        store_block(dst, i, quantize_symmetric<BlockQ5_0, 16>(src + i * kQK));
    }
}
double ref_dot_q5_0(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ5_0>(weights, i);
        const auto a = load_block<BlockQ8_0>(act, i);
        int isum = 0;
        for (int j = 0; j < kQK; ++j) isum += (q5_code(w.qs, w.qh, j) - 16) * a.qs[j];
        sum += static_cast<double>(fp16_to_f32(w.d)) * fp16_to_f32(a.d) * isum;
    }
    return sum;
}
void random_q5_0(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ5_0, kQK>(
        dst, n_blocks, seed, scale, dequantize_q5_0,
        [](Rng& rng, BlockQ5_0& b) {
            rng.fill(b.qh, sizeof b.qh);
            rng.fill(b.qs, sizeof b.qs);
            b.d = kFp16One;
        },
        [](BlockQ5_0& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- q5_1

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ5_1>(src, i);
        const float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
        for (int j = 0; j < kQK; ++j) {
            dst[i * kQK + j] = static_cast<float>(q5_code(b.qs, b.qh, j)) * d + m;
        }
    }
}
void quantize_q5_1(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        store_block(dst, i, quantize_min_max<BlockQ5_1, 31>(src + i * kQK));
    }
}
double ref_dot_q5_1(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ5_1>(weights, i);
        const auto a = load_block<BlockQ8_1>(act, i);
        int isum = 0;
        for (int j = 0; j < kQK; ++j) isum += q5_code(w.qs, w.qh, j) * a.qs[j];
        sum += static_cast<double>(fp16_to_f32(w.d)) * fp16_to_f32(a.d) * isum +
               static_cast<double>(fp16_to_f32(w.m)) * fp16_to_f32(a.s);
    }
    return sum;
}
void random_q5_1(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ5_1, kQK>(
        dst, n_blocks, seed, scale, dequantize_q5_1,
        [](Rng& rng, BlockQ5_1& b) {
            rng.fill(b.qh, sizeof b.qh);
            rng.fill(b.qs, sizeof b.qs);
            b.d = kFp16One;
            b.m = f32_to_fp16(-15.5f);
        },
        [](BlockQ5_1& b, float f) {
            b.d = finite_fp16(f);
            b.m = finite_fp16(-15.5f * f);
        });
}

// ---------------------------------------------------------------- q8_0

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ8_0>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(b.qs[j]) * d;
    }
}
void quantize_q8_0(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        BlockQ8_0 b;
        q8_quantize_block(src + i * kQK, b);
        store_block(dst, i, b);
    }
}
double ref_dot_q8_0(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockQ8_0>(weights, i);
        const auto a = load_block<BlockQ8_0>(act, i);
        int isum = 0;
        for (int j = 0; j < kQK; ++j) isum += w.qs[j] * a.qs[j];
        sum += static_cast<double>(fp16_to_f32(w.d)) * fp16_to_f32(a.d) * isum;
    }
    return sum;
}
void random_q8_0(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockQ8_0, kQK>(
        dst, n_blocks, seed, scale, dequantize_q8_0,
        [](Rng& rng, BlockQ8_0& b) {
            rng.fill(b.qs, sizeof b.qs);
            for (int8_t& q : b.qs) q = q == -128 ? -127 : q;  // quantizers stay in -127..127
            b.d = kFp16One;
        },
        [](BlockQ8_0& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- q8_1

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockQ8_1>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(b.qs[j]) * d;
    }
}
void quantize_q8_1(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        BlockQ8_1 b;
        const float d = q8_quantize_block(src + i * kQK, b);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) sum += b.qs[j];
        b.s = f32_to_fp16(d * static_cast<float>(sum));
        store_block(dst, i, b);
    }
}

}  // namespace tandem
