// The i-quants: lattice formats iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s (no
// quantizer: random blocks only) and the non-linear iq4_nl, iq4_xs. Dequantizers bit-identical
// to ggml, reference dot products, and quantizers for iq4_nl / iq4_xs (layouts: ggml-common.h).
#include "formats/quants_iq.h"

#include <cmath>
#include <initializer_list>

#include "formats/iq_tables.h"
#include "formats/quant_util.h"

namespace tandem {
namespace {

using namespace formats_detail;

constexpr int kQK = 256;

// All lattice formats split 256 values into 8 sub-blocks of 32 and those into groups of 8 (the
// iq3 grids: two points of 4 per group). Signs of a group come from a sign byte (bit j negates
// value j): either stored whole or as a 7-bit index (iq_sign_byte). Value v is in sub-block
// v / 32 and group v / 8.

// iq2_xxs, 66 bytes: x = d * (0.5 + s) / 4 * grid * sign.
//   d       fp16
//   qs[64]  per sub-block b, bytes 8b..8b+7: bytes 0-3 = grid index of groups 0-3; a
//           little-endian uint32 from bytes 4-7: bits 7l..7l+6 = sign index of group l,
//           bits 28-31 = the sub-block scale s
struct BlockIq2xxs {
    uint16_t d;
    uint8_t qs[64];
};
// iq2_xs, 74 bytes: x = d * (0.5 + s) / 4 * grid * sign.
//   d          fp16
//   qs[32]     uint16 per group: bits 0-8 = grid index, bits 9-15 = sign index
//   scales[8]  sub-block b: low nibble = s of groups 0-1, high nibble = s of groups 2-3
struct BlockIq2xs {
    uint16_t d;
    uint16_t qs[32];
    uint8_t scales[8];
};
// iq2_s, 82 bytes: x = d * (0.5 + s) / 4 * grid * sign.
//   d          fp16
//   qs[32]     low 8 bits of the grid index of each group
//   signs[32]  sign byte of each group
//   qh[8]      sub-block b: bits 2l..2l+1 = bits 8-9 of the grid index of its group l
//   scales[8]  as in iq2_xs
struct BlockIq2s {
    uint16_t d;
    uint8_t qs[32];
    uint8_t signs[32];
    uint8_t qh[8];
    uint8_t scales[8];
};
// iq3_xxs, 98 bytes: x = d * (0.5 + s) / 2 * grid * sign, grid points of 4 values.
//   d          fp16
//   qs[64]     grid index of each 4 values
//   aux[32]    per sub-block a little-endian uint32: bits 7l..7l+6 = sign index of group l,
//              bits 28-31 = scale s
struct BlockIq3xxs {
    uint16_t d;
    uint8_t qs[64];
    uint8_t aux[32];
};
// iq3_s, 110 bytes: x = d * (1 + 2 s) * grid * sign, grid points of 4 values.
//   d          fp16
//   qs[64]     low 8 bits of the grid index of each 4 values
//   qh[8]      sub-block b: bit k = bit 8 of the index of its k-th point
//   signs[32]  sign byte of each group
//   scales[4]  sub-block b: nibble b % 2 of scales[b / 2] = s
struct BlockIq3s {
    uint16_t d;
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t signs[32];
    uint8_t scales[4];
};
// iq1_s, 50 bytes: x = d * (2 s + 1) * (grid + delta), grid values -1, 0, 1.
//   d       fp16
//   qs[32]  low 8 bits of the grid index of each group
//   qh[8]   uint16 per sub-block: bits 3l..3l+2 = bits 8-10 of group l's index, bits 12-14 = s,
//           bit 15 set -> delta = -1/8, else +1/8
struct BlockIq1s {
    uint16_t d;
    uint8_t qs[32];
    uint16_t qh[8];
};
// iq1_m, 56 bytes: x = d * (2 s + 1) * (grid + delta), grid values -1, 0, 1.
//   qs[32]      low 8 bits of the grid index of each group
//   qh[16]      group l of sub-block b uses byte 2b + l / 2, nibble l % 2: bits 0-2 = bits 8-10
//               of the index, bit 3 set -> delta = -1/8, else +1/8
//   scales[8]   four little-endian uint16 w[0..3]: sub-block b's s for groups 0-1 = bits
//               6(b%2)..+2 of w[b/2], for groups 2-3 = bits 6(b%2)+3..+5; the fp16 d is spread
//               over the top nibbles: bits 0-3 from w[0], 4-7 from w[1], 8-11 w[2], 12-15 w[3]
struct BlockIq1m {
    uint8_t qs[32];
    uint8_t qh[16];
    uint8_t scales[8];
};
// iq4_nl, 18 bytes, 32 values: x = d * kIq4nlValues[q]; qs packed as in q4_0 (byte j: value j
// low nibble, value j + 16 high nibble).
struct BlockIq4nl {
    uint16_t d;
    uint8_t qs[16];
};
// iq4_xs, 136 bytes, 8 sub-blocks of 32: x = d * (ls - 32) * kIq4nlValues[q].
//   d            fp16
//   scales_h     uint16: bits 2b..2b+1 = bits 4-5 of sub-block b's 6-bit ls
//   scales_l[4]  nibble b % 2 of scales_l[b / 2] = bits 0-3 of ls
//   qs[128]      sub-block b uses qs[16b..16b+15], packed as iq4_nl
struct BlockIq4xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};
// The activations: q8_0 for iq4_nl, q8_K for the rest.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[32];
};
struct BlockQ8K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};
static_assert(sizeof(BlockIq2xxs) == 66 && sizeof(BlockIq2xs) == 74 && sizeof(BlockIq2s) == 82 &&
              sizeof(BlockIq3xxs) == 98 && sizeof(BlockIq3s) == 110 && sizeof(BlockIq1s) == 50 &&
              sizeof(BlockIq1m) == 56 && sizeof(BlockIq4nl) == 18 && sizeof(BlockIq4xs) == 136 &&
              sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8K) == 292);

uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
int sign_of(uint8_t sign_byte, int j) {
    return (sign_byte >> j) & 1 ? -1 : 1;
}

// Every lattice format is decoded to the same form, one 256-value block at a time:
//   value v = d * factor * sub_scale[v / 16] * (q[v] + shift8[v / 8] / 8)
// with integer q (sign * grid value), odd integer sub-block scales 2s+1 and, for iq1, a shift
// of +-1/8 per group, so that dot products stay exact integers until the last step.
struct LatticeBlock {
    float d;            // the block's fp16 scale
    float factor;       // the format's constant: 1/8 (iq2), 1/4 (iq3_xxs), 1 (iq3_s, iq1)
    int sub_scale[16];  // per 16 values: 2s+1 (iq1_m may differ between the halves of 32)
    float db[16];       // per 16 values: d * factor * sub_scale, computed as ggml's dequantizer
    int q[256];         // sign * grid value
    int shift8[32];     // iq1 only: per group of 8, the shift in eighths (+-1); else 0
};

// ggml's float order for the sub-block scale: iq2/iq3_xxs d * (0.5 + s) * (1/4 or 1/2);
// iq3_s and iq1 d * (2s + 1).
void set_half_step_scale(LatticeBlock& lb, int k, int s, float step) {
    lb.sub_scale[k] = 2 * s + 1;
    lb.db[k] = lb.d * (0.5f + static_cast<float>(s)) * step;
}
void set_odd_scale(LatticeBlock& lb, int k, int s) {
    lb.sub_scale[k] = 2 * s + 1;
    lb.db[k] = lb.d * static_cast<float>(2 * s + 1);
}

// ---------------------------------------------------------------- iq2 and iq3 decoders

LatticeBlock decode_iq2xxs(const BlockIq2xxs& b) {
    LatticeBlock out{};
    out.d = fp16_to_f32(b.d);
    out.factor = 0.125f;
    for (int sub = 0; sub < 8; ++sub) {
        const uint8_t* p = b.qs + 8 * sub;
        const uint32_t aux = load_u32(p + 4);
        for (int k = 2 * sub; k < 2 * sub + 2; ++k) set_half_step_scale(out, k, aux >> 28, 0.25f);
        for (int l = 0; l < 4; ++l) {
            const uint8_t signs = iq_sign_byte(aux >> (7 * l));
            for (int j = 0; j < 8; ++j) {
                out.q[32 * sub + 8 * l + j] = sign_of(signs, j) * kIq2xxsGrid.value(p[l], j);
            }
        }
    }
    return out;
}

LatticeBlock decode_iq2xs(const BlockIq2xs& b) {
    LatticeBlock out{};
    out.d = fp16_to_f32(b.d);
    out.factor = 0.125f;
    for (int sub = 0; sub < 8; ++sub) {
        set_half_step_scale(out, 2 * sub, b.scales[sub] & 15, 0.25f);
        set_half_step_scale(out, 2 * sub + 1, b.scales[sub] >> 4, 0.25f);
        for (int l = 0; l < 4; ++l) {
            const uint16_t word = b.qs[4 * sub + l];
            const uint8_t signs = iq_sign_byte(word >> 9);
            for (int j = 0; j < 8; ++j) {
                out.q[32 * sub + 8 * l + j] = sign_of(signs, j) * kIq2xsGrid.value(word & 511, j);
            }
        }
    }
    return out;
}

LatticeBlock decode_iq2s(const BlockIq2s& b) {
    LatticeBlock out{};
    out.d = fp16_to_f32(b.d);
    out.factor = 0.125f;
    for (int sub = 0; sub < 8; ++sub) {
        set_half_step_scale(out, 2 * sub, b.scales[sub] & 15, 0.25f);
        set_half_step_scale(out, 2 * sub + 1, b.scales[sub] >> 4, 0.25f);
        for (int l = 0; l < 4; ++l) {
            const int group = 4 * sub + l;
            const int index = b.qs[group] | ((b.qh[sub] >> (2 * l)) & 3) << 8;
            for (int j = 0; j < 8; ++j) {
                out.q[8 * group + j] = sign_of(b.signs[group], j) * kIq2sGrid.value(index, j);
            }
        }
    }
    return out;
}

LatticeBlock decode_iq3xxs(const BlockIq3xxs& b) {
    LatticeBlock out{};
    out.d = fp16_to_f32(b.d);
    out.factor = 0.25f;
    for (int sub = 0; sub < 8; ++sub) {
        const uint32_t aux = load_u32(b.aux + 4 * sub);
        for (int k = 2 * sub; k < 2 * sub + 2; ++k) set_half_step_scale(out, k, aux >> 28, 0.5f);
        for (int l = 0; l < 4; ++l) {
            const uint8_t signs = iq_sign_byte(aux >> (7 * l));
            for (int j = 0; j < 8; ++j) {
                const int point = b.qs[8 * sub + 2 * l + j / 4];
                out.q[32 * sub + 8 * l + j] = sign_of(signs, j) * kIq3xxsGrid.value(point, j % 4);
            }
        }
    }
    return out;
}

LatticeBlock decode_iq3s(const BlockIq3s& b) {
    LatticeBlock out{};
    out.d = fp16_to_f32(b.d);
    out.factor = 1.0f;
    for (int sub = 0; sub < 8; ++sub) {
        const int s = (b.scales[sub / 2] >> (4 * (sub % 2))) & 15;
        for (int k = 2 * sub; k < 2 * sub + 2; ++k) set_odd_scale(out, k, s);
        for (int k = 0; k < 8; ++k) {  // the 8 grid points of 4 values of this sub-block
            const int point = b.qs[8 * sub + k] | ((b.qh[sub] >> k) & 1) << 8;
            for (int j = 0; j < 4; ++j) {
                const int v = 32 * sub + 4 * k + j;
                out.q[v] = sign_of(b.signs[v / 8], v % 8) * kIq3sGrid.value(point, j);
            }
        }
    }
    return out;
}

// ---------------------------------------------------------------- iq1 decoders

LatticeBlock decode_iq1s(const BlockIq1s& b) {
    LatticeBlock out{};
    out.d = fp16_to_f32(b.d);
    out.factor = 1.0f;
    for (int sub = 0; sub < 8; ++sub) {
        const uint16_t qh = b.qh[sub];
        for (int k = 2 * sub; k < 2 * sub + 2; ++k) set_odd_scale(out, k, (qh >> 12) & 7);
        for (int l = 0; l < 4; ++l) {
            const int group = 4 * sub + l;
            const int index = b.qs[group] | ((qh >> (3 * l)) & 7) << 8;
            out.shift8[group] = (qh & 0x8000) ? -1 : 1;
            for (int j = 0; j < 8; ++j) out.q[8 * group + j] = kIq1sGrid.value(index, j);
        }
    }
    return out;
}

uint16_t iq1m_word(const BlockIq1m& b, int k) {
    return static_cast<uint16_t>(b.scales[2 * k] | b.scales[2 * k + 1] << 8);
}
uint16_t iq1m_scale_bits(const BlockIq1m& b) {
    return static_cast<uint16_t>((iq1m_word(b, 0) >> 12) | ((iq1m_word(b, 1) >> 8) & 0x00f0) |
                                 ((iq1m_word(b, 2) >> 4) & 0x0f00) | (iq1m_word(b, 3) & 0xf000));
}

LatticeBlock decode_iq1m(const BlockIq1m& b) {
    LatticeBlock out{};
    out.d = fp16_to_f32(iq1m_scale_bits(b));
    out.factor = 1.0f;
    for (int sub = 0; sub < 8; ++sub) {
        const uint16_t w = iq1m_word(b, sub / 2);
        set_odd_scale(out, 2 * sub, (w >> (6 * (sub % 2))) & 7);
        set_odd_scale(out, 2 * sub + 1, (w >> (6 * (sub % 2) + 3)) & 7);
        for (int l = 0; l < 4; ++l) {
            const int group = 4 * sub + l;
            const int nib = (b.qh[2 * sub + l / 2] >> (4 * (l % 2))) & 15;
            const int index = b.qs[group] | (nib & 7) << 8;
            out.shift8[group] = (nib & 8) ? -1 : 1;
            for (int j = 0; j < 8; ++j) out.q[8 * group + j] = kIq1sGrid.value(index, j);
        }
    }
    return out;
}

// ---------------------------------------------------------------- shared lattice paths

// Dequantization in ggml's float order: iq2/iq3 db * grid * sign, iq1 db * (grid + delta).
void dequantize_lattice(const LatticeBlock& lb, float* y) {
    for (int v = 0; v < kQK; ++v) {
        const float delta = static_cast<float>(lb.shift8[v / 8]) * 0.125f;
        y[v] = lb.db[v / 16] * (static_cast<float>(lb.q[v]) + delta);
    }
}

// Dot product with a q8_K block: sum over sub-blocks of (2s+1) * sum(q * a), plus for iq1 the
// shift term (2s+1) * shift/8 * sum(a) over each group, exact in integers (in eighths).
double dot_lattice(const LatticeBlock& lb, const BlockQ8K& a) {
    int64_t isum8 = 0;  // 8 x the sum, so iq1's eighths stay integers
    for (int k = 0; k < 16; ++k) {
        int sub = 0;
        for (int l = 0; l < 16; ++l) {
            const int v = 16 * k + l;
            sub += (8 * lb.q[v] + lb.shift8[v / 8]) * a.qs[v];
        }
        isum8 += static_cast<int64_t>(lb.sub_scale[k]) * sub;
    }
    return static_cast<double>(lb.d) * a.d * lb.factor * static_cast<double>(isum8) / 8.0;
}

template <typename Block, LatticeBlock (*kDecode)(const Block&)>
void dequantize_rows(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        dequantize_lattice(kDecode(load_block<Block>(src, i)), dst + i * kQK);
    }
}

template <typename Block, LatticeBlock (*kDecode)(const Block&)>
double dot_rows(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        sum += dot_lattice(kDecode(load_block<Block>(weights, i)), load_block<BlockQ8K>(act, i));
    }
    return sum;
}

// Random lattice blocks: random payload (every bit pattern is a valid grid index, sign or
// sub-block scale), with the block scale calibrated (quant_util.h).
template <typename Block>
void random_lattice(void* dst, int64_t n_blocks, uint64_t seed, float scale,
                    void (*dequantize)(const void*, float*, int64_t),
                    void (*set_scale)(Block&, uint16_t)) {
    random_calibrated<Block, kQK>(
        dst, n_blocks, seed, scale, dequantize,
        [set_scale](Rng& rng, Block& b) {
            rng.fill(&b, sizeof b);
            set_scale(b, kFp16One);
        },
        [set_scale](Block& b, float f) { set_scale(b, finite_fp16(f)); });
}

template <typename Block>
void set_d(Block& b, uint16_t d) {
    b.d = d;
}
void set_iq1m_scale(BlockIq1m& b, uint16_t d) {
    for (int k = 0; k < 4; ++k) {
        b.scales[2 * k + 1] =
            static_cast<uint8_t>((b.scales[2 * k + 1] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
    }
}

// ---------------------------------------------------------------- iq4 helpers

using Iq4Levels = LevelSet<16>;

// Squared error of x[0..n) quantized to the iq4 levels at scale d (not 0).
double iq4_sse(const Iq4Levels& levels, const float* x, int n, float d) {
    const float id = 1.0f / d;
    double sse = 0;
    for (int j = 0; j < n; ++j) {
        const float v = d * levels.level[levels.nearest(x[j] * id)];
        sse += static_cast<double>(x[j] - v) * (x[j] - v);
    }
    return sse;
}

// The best scale for iq4 levels over n values. The levels run from -127 to +113, so the
// extreme value goes either to -127 or to +113; around each, a few magnitudes are tried.
float best_iq4_scale(const Iq4Levels& levels, const float* x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    if (amax == 0) return 0;
    float best = 0;
    double best_sse = -1;
    for (float extreme : {levels.level[0], levels.level[15]}) {
        for (int step = 0; step < 5; ++step) {
            const float d = max / extreme * (0.9f + 0.05f * static_cast<float>(step));
            const double sse = iq4_sse(levels, x, n, d);
            if (best_sse < 0 || sse < best_sse) {
                best_sse = sse;
                best = d;
            }
        }
    }
    return best;
}
int iq4_code(const uint8_t* qs, int j) {
    return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}
void set_iq4_codes(const Iq4Levels& levels, uint8_t* qs, const float* x, float d) {
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) {
        const int q = levels.nearest(x[j] * id);
        if (j < 16) {
            qs[j] |= static_cast<uint8_t>(q);
        } else {
            qs[j - 16] |= static_cast<uint8_t>(q << 4);
        }
    }
}
int iq4xs_ls(const BlockIq4xs& b, int sub) {
    return ((b.scales_l[sub / 2] >> (4 * (sub % 2))) & 15) | ((b.scales_h >> (2 * sub)) & 3) << 4;
}

}  // namespace

// ---------------------------------------------------------------- the lattice formats

void dequantize_iq2_xxs(const void* src, float* dst, int64_t n) {
    dequantize_rows<BlockIq2xxs, decode_iq2xxs>(src, dst, n);
}
double ref_dot_iq2_xxs(int64_t n, const void* weights, const void* act) {
    return dot_rows<BlockIq2xxs, decode_iq2xxs>(n, weights, act);
}
void random_iq2_xxs(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_lattice<BlockIq2xxs>(dst, n_blocks, seed, scale, dequantize_iq2_xxs, set_d);
}

void dequantize_iq2_xs(const void* src, float* dst, int64_t n) {
    dequantize_rows<BlockIq2xs, decode_iq2xs>(src, dst, n);
}
double ref_dot_iq2_xs(int64_t n, const void* weights, const void* act) {
    return dot_rows<BlockIq2xs, decode_iq2xs>(n, weights, act);
}
void random_iq2_xs(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_lattice<BlockIq2xs>(dst, n_blocks, seed, scale, dequantize_iq2_xs, set_d);
}

void dequantize_iq2_s(const void* src, float* dst, int64_t n) {
    dequantize_rows<BlockIq2s, decode_iq2s>(src, dst, n);
}
double ref_dot_iq2_s(int64_t n, const void* weights, const void* act) {
    return dot_rows<BlockIq2s, decode_iq2s>(n, weights, act);
}
void random_iq2_s(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_lattice<BlockIq2s>(dst, n_blocks, seed, scale, dequantize_iq2_s, set_d);
}

void dequantize_iq3_xxs(const void* src, float* dst, int64_t n) {
    dequantize_rows<BlockIq3xxs, decode_iq3xxs>(src, dst, n);
}
double ref_dot_iq3_xxs(int64_t n, const void* weights, const void* act) {
    return dot_rows<BlockIq3xxs, decode_iq3xxs>(n, weights, act);
}
void random_iq3_xxs(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_lattice<BlockIq3xxs>(dst, n_blocks, seed, scale, dequantize_iq3_xxs, set_d);
}

void dequantize_iq3_s(const void* src, float* dst, int64_t n) {
    dequantize_rows<BlockIq3s, decode_iq3s>(src, dst, n);
}
double ref_dot_iq3_s(int64_t n, const void* weights, const void* act) {
    return dot_rows<BlockIq3s, decode_iq3s>(n, weights, act);
}
void random_iq3_s(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_lattice<BlockIq3s>(dst, n_blocks, seed, scale, dequantize_iq3_s, set_d);
}

void dequantize_iq1_s(const void* src, float* dst, int64_t n) {
    dequantize_rows<BlockIq1s, decode_iq1s>(src, dst, n);
}
double ref_dot_iq1_s(int64_t n, const void* weights, const void* act) {
    return dot_rows<BlockIq1s, decode_iq1s>(n, weights, act);
}
void random_iq1_s(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_lattice<BlockIq1s>(dst, n_blocks, seed, scale, dequantize_iq1_s, set_d);
}

void dequantize_iq1_m(const void* src, float* dst, int64_t n) {
    dequantize_rows<BlockIq1m, decode_iq1m>(src, dst, n);
}
double ref_dot_iq1_m(int64_t n, const void* weights, const void* act) {
    return dot_rows<BlockIq1m, decode_iq1m>(n, weights, act);
}
void random_iq1_m(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_lattice<BlockIq1m>(dst, n_blocks, seed, scale, dequantize_iq1_m, set_iq1m_scale);
}

// ---------------------------------------------------------------- iq4_nl

void dequantize_iq4_nl(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / 32; ++i) {
        const auto b = load_block<BlockIq4nl>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int j = 0; j < 32; ++j) {
            dst[i * 32 + j] = d * static_cast<float>(kIq4nlValues[iq4_code(b.qs, j)]);
        }
    }
}
void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
    const Iq4Levels levels(kIq4nlValues);
    for (int64_t i = 0; i < n / 32; ++i) {
        BlockIq4nl b{};
        b.d = f32_to_fp16(best_iq4_scale(levels, src + i * 32, 32));
        set_iq4_codes(levels, b.qs, src + i * 32, fp16_to_f32(b.d));
        store_block(dst, i, b);
    }
}
double ref_dot_iq4_nl(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / 32; ++i) {
        const auto w = load_block<BlockIq4nl>(weights, i);
        const auto a = load_block<BlockQ8_0>(act, i);
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += kIq4nlValues[iq4_code(w.qs, j)] * a.qs[j];
        sum += static_cast<double>(fp16_to_f32(w.d)) * fp16_to_f32(a.d) * isum;
    }
    return sum;
}
void random_iq4_nl(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockIq4nl, 32>(
        dst, n_blocks, seed, scale, dequantize_iq4_nl,
        [](Rng& rng, BlockIq4nl& b) {
            rng.fill(b.qs, sizeof b.qs);
            b.d = kFp16One;
        },
        [](BlockIq4nl& b, float f) { b.d = finite_fp16(f); });
}

// ---------------------------------------------------------------- iq4_xs

void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto b = load_block<BlockIq4xs>(src, i);
        const float d = fp16_to_f32(b.d);
        for (int sub = 0; sub < 8; ++sub) {
            const float dl = d * static_cast<float>(iq4xs_ls(b, sub) - 32);
            for (int j = 0; j < 32; ++j) {
                const int q = iq4_code(b.qs + 16 * sub, j);
                dst[i * kQK + 32 * sub + j] = dl * static_cast<float>(kIq4nlValues[q]);
            }
        }
    }
}
// Each sub-block gets its best iq4 scale; the one of largest magnitude sets d so that it is
// ls - 32 = -32, and the others round to the 6-bit grid of d.
void quantize_iq4_xs(const float* src, void* dst, int64_t n) {
    const Iq4Levels levels(kIq4nlValues);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        float s[8], s_extreme = 0;
        for (int sub = 0; sub < 8; ++sub) {
            s[sub] = best_iq4_scale(levels, x + 32 * sub, 32);
            if (std::fabs(s[sub]) > std::fabs(s_extreme)) s_extreme = s[sub];
        }
        BlockIq4xs b{};
        b.d = f32_to_fp16(s_extreme / -32.0f);
        const float d = fp16_to_f32(b.d);
        for (int sub = 0; sub < 8; ++sub) {
            const int ls = (d != 0 ? clamp_int(round_even(s[sub] / d), -32, 31) : 0) + 32;
            b.scales_l[sub / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (sub % 2)));
            b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * sub));
            set_iq4_codes(levels, b.qs + 16 * sub, x + 32 * sub, d * static_cast<float>(ls - 32));
        }
        store_block(dst, i, b);
    }
}
double ref_dot_iq4_xs(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const auto w = load_block<BlockIq4xs>(weights, i);
        const auto a = load_block<BlockQ8K>(act, i);
        int64_t isum = 0;
        for (int sub = 0; sub < 8; ++sub) {
            int part = 0;
            for (int j = 0; j < 32; ++j) {
                part += kIq4nlValues[iq4_code(w.qs + 16 * sub, j)] * a.qs[32 * sub + j];
            }
            isum += static_cast<int64_t>(iq4xs_ls(w, sub) - 32) * part;
        }
        sum += static_cast<double>(fp16_to_f32(w.d)) * a.d * static_cast<double>(isum);
    }
    return sum;
}
void random_iq4_xs(void* dst, int64_t n_blocks, uint64_t seed, float scale) {
    random_calibrated<BlockIq4xs, kQK>(
        dst, n_blocks, seed, scale, dequantize_iq4_xs,
        [](Rng& rng, BlockIq4xs& b) {
            rng.fill(&b, sizeof b);
            b.d = kFp16One;
        },
        [](BlockIq4xs& b, float f) { b.d = finite_fp16(f); });
}

}  // namespace tandem
