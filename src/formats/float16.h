// Scalar conversions between f32 and the small float encodings of GGUF files: IEEE half (f16),
// bfloat16, E8M0 (MXFP4 block exponents) and UE4M3 (NVFP4 block scales). Bit-exact with ggml.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace tandem {

constexpr uint32_t f32_bits(float f) {
    return std::bit_cast<uint32_t>(f);
}
constexpr float f32_from_bits(uint32_t u) {
    return std::bit_cast<float>(u);
}

// IEEE binary16 -> binary32, exact for every input (subnormals, infinities). A NaN keeps its
// payload and comes back quiet, as from ggml's scalar conversion and F16C's vcvtph2ps.
constexpr float fp16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) {
        if (mant == 0) return f32_from_bits(sign | 0x7f800000u);
        return f32_from_bits(sign | 0x7fc00000u | (mant << 13));
    }
    if (exp == 0) {
        if (mant == 0) return f32_from_bits(sign);
        // subnormal: mant * 2^-24
        float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

// fp16_to_f32 of every half, indexed by its bits (float16_table.cpp, built at compile time):
// the AVX-512 k-quant tiles read their super-block scales from it as a broadcast memory
// operand, where F16C's conversion costs vector operations (simd_kquants.cpp).
extern const std::array<float, 65536> kFp16Values;

// binary32 -> binary16 with round-to-nearest-even (what F16C's vcvtps2ph and ggml's scalar
// path do); overflow goes to infinity. A NaN becomes the quiet NaN 0x7e00 with its sign, as in
// ggml's scalar ggml_compute_fp32_to_fp16 (F16C would keep the top payload bits).
inline uint16_t f32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t abs = x & 0x7fffffff;
    if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);
    if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to >= 65520
    if (abs < 0x38800000) {
        // result is subnormal or zero: round abs * 2^24 to an integer, ties to even
        float v = f32_from_bits(abs) * 16777216.0f;
        uint32_t q = static_cast<uint32_t>(v);
        float frac = v - static_cast<float>(q);
        if (frac > 0.5f || (frac == 0.5f && (q & 1))) ++q;
        return static_cast<uint16_t>(sign | q);
    }
    uint32_t mant_shift = abs + 0xfff + ((abs >> 13) & 1);  // round to nearest even at bit 13
    return static_cast<uint16_t>(sign | ((mant_shift - 0x38000000) >> 13));
}

// bfloat16: the top half of a binary32.
inline float bf16_to_f32(uint16_t h) {
    return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

// binary32 -> bfloat16, round-to-nearest-even; NaNs are kept quiet (as ggml_compute_fp32_to_bf16).
inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);
    return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

// E8M0: 2^(e - 127); e = 0 gives 2^-127 (a subnormal float), e = 255 is NaN in OCP MX but ggml
// decodes it as 2^128 = inf; we follow ggml.
inline float e8m0_to_f32(uint8_t e) {
    uint32_t bits = e == 0 ? 0x00400000u : static_cast<uint32_t>(e) << 23;
    return f32_from_bits(bits);
}
// Half of the E8M0 value (ggml's GGML_E8M0_TO_FP32_HALF, used with the doubled E2M1 table).
inline float e8m0_to_f32_half(uint8_t e) {
    uint32_t bits = e < 2 ? (0x00200000u << e) : static_cast<uint32_t>(e - 1) << 23;
    return f32_from_bits(bits);
}

// UE4M3 (NVFP4 block scales): unsigned, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0
// is subnormal (m * 2^-9); the largest value is 0x7E = 448. As in ggml, 0x7F (NaN in OCP E4M3)
// decodes as 0 and bit 7 is otherwise ignored (so 0xFF decodes as 480).
inline float ue4m3_to_f32(uint8_t x) {
    uint32_t exp = (x >> 3) & 0xf;
    uint32_t mant = x & 0x7;
    if (x == 0x7f) return 0.0f;
    if (exp == 0) return static_cast<float>(mant) * 0.001953125f;  // m * 2^-9
    return f32_from_bits(((exp + 120) << 23) | (mant << 20));      // (1 + m/8) * 2^(e-7)
}
// Half of the UE4M3 value: ggml's ggml_ue4m3_to_fp32, used with the doubled E2M1 table.
inline float ue4m3_to_f32_half(uint8_t x) {
    return ue4m3_to_f32(x) * 0.5f;
}

// The UE4M3 code nearest to f (ties to the even code); negative and NaN inputs give 0, values
// past 448 give 448.
inline uint8_t f32_to_ue4m3(float f) {
    if (!(f > 0.0f)) return 0;
    uint8_t best = 0;
    float best_err = f;
    for (uint8_t code = 1; code < 0x7f; ++code) {
        float err = f - ue4m3_to_f32(code);
        if (err < 0) err = -err;
        if (err < best_err || (err == best_err && (code & 1) == 0)) {
            best = code;
            best_err = err;
        }
    }
    return best;
}

}  // namespace tandem
