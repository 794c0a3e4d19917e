// The q8_0 and q8_1 row loops around an ISA's block quantizer (simd_quantize.cpp and
// neon_quantize.cpp): Block(x, d_out, qs, sum*) quantizes 32 values and returns d, ToFp16 rounds a
// float to IEEE half bits.
#pragma once

#include <cstdint>
#include <cstring>

namespace tandem::TANDEM_VARIANT_NS {

template <float (*Block)(const float*, uint8_t*, int8_t*, int*)>
void q8_0_row(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < k / 32; ++i) {
        uint8_t* b = out + i * 34;
        Block(x + i * 32, b, reinterpret_cast<int8_t*>(b + 2), nullptr);
    }
}

// q8_1 adds s = fp16(d * sum(q)) (ggml's vec_dot of q4_1 / q5_1 uses it for the min term).
template <float (*Block)(const float*, uint8_t*, int8_t*, int*), uint16_t (*ToFp16)(float)>
void q8_1_row(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < k / 32; ++i) {
        uint8_t* b = out + i * 36;
        int sum = 0;
        const float d = Block(x + i * 32, b, reinterpret_cast<int8_t*>(b + 4), &sum);
        const uint16_t s = ToFp16(d * static_cast<float>(sum));
        std::memcpy(b + 2, &s, 2);
    }
}

}  // namespace tandem::TANDEM_VARIANT_NS
