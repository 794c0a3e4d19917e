// Byte layouts of the weight and activation blocks the kernels read (ggml-common.h; the format
// table in formats/ documents the value formulas). Plain structs with no functions, so every
// variant can include this without sharing any code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernel_blocks {

// ---- 32-value blocks. Nibble packing "q4": byte j holds value j (low) and j + 16 (high).
struct Q4_0 {  // x = d * (q - 8)
    uint16_t d;
    uint8_t qs[16];
};
struct Q4_1 {  // x = d * q + m
    uint16_t d, m;
    uint8_t qs[16];
};
struct Q5_0 {  // x = d * (q - 16); bit j of the little-endian qh = bit 4 of value j
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct Q5_1 {  // x = d * q + m; qh as in Q5_0
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct Q8_0 {  // x = d * q (weights and activations)
    uint16_t d;
    int8_t qs[32];
};
struct Q8_1 {  // activations of q4_1 / q5_1: x = d * q; s = fp16(d * sum(q))
    uint16_t d, s;
    int8_t qs[32];
};
struct Iq4Nl {  // x = d * kIq4nlValues[q], q4 packing
    uint16_t d;
    uint8_t qs[16];
};
struct Mxfp4 {  // x = E2M1(q) * 2^(e - 127), q4 packing; E2M1 doubled and the scale halved
    uint8_t e;
    uint8_t qs[16];
};
// nvfp4, 64 values in 4 sub-blocks of 16 with UE4M3 scales d[s]; sub-block s uses
// qs[8s..8s+7]: low nibble of qs[8s + j] = value 16s + j, high nibble = value 16s + j + 8.
struct Nvfp4 {
    uint8_t d[4];
    uint8_t qs[32];
};

// ---- 256-value super-blocks ("k-quants"), activations q8_K.
// q2_K: value v = 128n + 32g + l (n < 2, g < 4, l < 32): bits 2g..2g+1 of qs[32n + l];
// sub-block v / 16: scale = scales[] & 15, min = scales[] >> 4; x = d * sc * q - dmin * m.
struct Q2K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};
// q3_K: low 2 bits as q2_K; bit 4n + g of hmask[l] set -> q = low, clear -> q = low - 4;
// 6-bit scales (minus 32) of the 16 sub-blocks packed in scales[12]; x = d * sc * q.
struct Q3K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
// q4_K: value v = 64c + 32h + l: nibble h of qs[32c + l]; 8 sub-blocks of 32 with 6-bit scale
// and min packed in scales[12]; x = d * sc * q - dmin * m.
struct Q4K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
// q5_K: as q4_K, bit 4 of value 64c + 32h + l = bit 2c + h of qh[l].
struct Q5K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
// q6_K: value v = 128n + 32g + l: low 4 bits = nibble g / 2 of ql[64n + 32(g % 2) + l], high 2
// bits = bits 2g..2g+1 of qh[32n + l]; x = d * scales[v / 16] * (q - 32).
struct Q6K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// iq4_xs: 8 sub-blocks of 32, sub-block b uses qs[16b..16b+15] (q4 packing); 6-bit ls =
// nibble b % 2 of scales_l[b / 2] | bits 2b..2b+1 of scales_h << 4; x = d * (ls - 32) * kIq4nl[q].
struct Iq4Xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};
// q8_K: x = d * q; bsums[k] = sum of qs[16k..16k+15].
struct Q8K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};

static_assert(sizeof(Q4_0) == 18 && sizeof(Q4_1) == 20 && sizeof(Q5_0) == 22 &&
              sizeof(Q5_1) == 24 && sizeof(Q8_0) == 34 && sizeof(Q8_1) == 36 &&
              sizeof(Iq4Nl) == 18 && sizeof(Mxfp4) == 17 && sizeof(Nvfp4) == 36);
static_assert(sizeof(Q2K) == 84 && sizeof(Q3K) == 110 && sizeof(Q4K) == 144 && sizeof(Q5K) == 176 &&
              sizeof(Q6K) == 210 && sizeof(Iq4Xs) == 136 && sizeof(Q8K) == 292);

}  // namespace tandem::kernel_blocks
