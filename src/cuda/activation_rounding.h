// Activations rounded the way the CPU's dot products see them. The CPU (as ggml) converts a
// matrix product's input once to the weight format's activation type — q8_0, q8_1 or q8_K
// blocks for quantized weights, f16 or bf16 for those float weights — and multiplies the blocks
// exactly. The GPU kernels take f32 activations, so rounding them through the same type first
// (quantize, then dequantize: the values the CPU's integer dot products stand for) gives the
// CPU's results up to float rounding, where the f32 activations alone differed by the
// quantization itself (up to 2^-8 of a block's largest value). The block functions here are
// the formats' quantizers (formats/quants_legacy.cpp, quants_k.cpp, float16.h), written for host
// and device alike and checked bit for bit against them on the host.
#pragma once

#include <cstdint>

#include "cuda/block_dequant_common.h"

namespace tandem::gpu {

namespace rounding_detail {

using namespace block_detail;

// Round to nearest, ties to even (|x| < 2^22), as the formats' round_even.
TANDEM_HD int round_even(float x) {
#ifdef __CUDA_ARCH__
    return __float2int_rn(x);
#else
    const float v = x + 12582912.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return static_cast<int>(bits & 0x007fffff) - 0x00400000;
#endif
}

TANDEM_HD uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

// binary32 -> binary16, round to nearest even (float16.h, f32_to_fp16).
TANDEM_HD uint32_t float_to_half(float f) {
    const uint32_t x = float_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000;
    const uint32_t abs = x & 0x7fffffff;
    if (abs > 0x7f800000) return sign | 0x7e00;
    if (abs >= 0x477ff000) return sign | 0x7c00;
    if (abs < 0x38800000) {
        const float v = mul_rn(float_from_bits(abs), 16777216.0f);
        uint32_t q = static_cast<uint32_t>(v);
        const float frac = sub_rn(v, static_cast<float>(q));
        if (frac > 0.5f || (frac == 0.5f && (q & 1))) ++q;
        return sign | q;
    }
    const uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);
    return sign | ((rounded - 0x38000000) >> 13);
}

// binary32 -> bfloat16, round to nearest even, NaNs kept quiet (float16.h, f32_to_bf16).
TANDEM_HD uint32_t float_to_bf16(float f) {
    const uint32_t u = float_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return ((u >> 16) | 64) & 0xffff;
    return ((u + (0x7fff + ((u >> 16) & 1))) >> 16) & 0xffff;
}

TANDEM_HD float abs_f(float x) {
    return x < 0 ? -x : x;
}

}  // namespace rounding_detail

// The activation types a weight format's dot product may take (its FormatTraits::dot_type).
enum class ActivationRounding { kNone, kQ8_0, kQ8_1, kQ8K, kF16, kBF16 };

TANDEM_HD constexpr ActivationRounding rounding_for(GgmlType dot_type) {
    switch (dot_type) {
        case GgmlType::kQ8_0:
            return ActivationRounding::kQ8_0;
        case GgmlType::kQ8_1:
            return ActivationRounding::kQ8_1;
        case GgmlType::kQ8_K:
            return ActivationRounding::kQ8K;
        case GgmlType::kF16:
            return ActivationRounding::kF16;
        case GgmlType::kBF16:
            return ActivationRounding::kBF16;
        default:
            return ActivationRounding::kNone;
    }
}

// Values per block of each rounding (1 for the float types).
TANDEM_HD constexpr int rounding_block(ActivationRounding r) {
    return r == ActivationRounding::kQ8K                                        ? 256
           : (r == ActivationRounding::kQ8_0 || r == ActivationRounding::kQ8_1) ? 32
                                                                                : 1;
}

// One block of 32 values through q8_0 / q8_1 (the same values: d = amax / 127 stored as fp16,
// q = round(x · 127 / amax)): out = fp16(d) · q.
TANDEM_HD void round_block_q8_32(const float* x, float* out) {
    using namespace rounding_detail;
    using namespace block_detail;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = abs_f(x[j]) > amax ? abs_f(x[j]) : amax;
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const float dh = half_to_float(float_to_half(d));
    for (int j = 0; j < 32; ++j)
        out[j] = mul_rn(dh, static_cast<float>(round_even(mul_rn(x[j], id))));
}

// One block of 256 values through q8_K: the first value of largest magnitude maps to -127
// (scale -127 / max), q = min(127, round(scale · x)), d = 1 / scale: out = d · q.
TANDEM_HD void round_block_q8_k(const float* x, float* out) {
    using namespace rounding_detail;
    using namespace block_detail;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
        if (abs_f(x[j]) > amax) {
            amax = abs_f(x[j]);
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        for (int j = 0; j < 256; ++j) out[j] = 0.0f;
        return;
    }
    const float iscale = -127.0f / max;
    const float d = 1.0f / iscale;
    for (int j = 0; j < 256; ++j) {
        int q = round_even(mul_rn(iscale, x[j]));
        q = q < 127 ? q : 127;
        out[j] = mul_rn(d, static_cast<float>(q));
    }
}

// One value (block 1) through f16 or bf16.
TANDEM_HD float round_value(ActivationRounding r, float x) {
    using namespace rounding_detail;
    using namespace block_detail;
    if (r == ActivationRounding::kF16) return half_to_float(float_to_half(x));
    if (r == ActivationRounding::kBF16) return bf16_to_float(float_to_bf16(x));
    return x;
}

// Rounds one block of rounding_block(r) values.
TANDEM_HD void round_block(ActivationRounding r, const float* x, float* out) {
    switch (r) {
        case ActivationRounding::kQ8_0:
        case ActivationRounding::kQ8_1:
            round_block_q8_32(x, out);
            break;
        case ActivationRounding::kQ8K:
            round_block_q8_k(x, out);
            break;
        default:
            out[0] = round_value(r, x[0]);
            break;
    }
}

}  // namespace tandem::gpu
