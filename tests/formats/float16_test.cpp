// The small float conversions (float16.h) against plain reference implementations written
// from the formats' definitions: every fp16/bf16/E8M0/UE4M3 code, and a sweep of floats.
#include "formats/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace tandem {
namespace {

// binary16: sign, 5 exponent bits (bias 15), 10 mantissa bits; exponent 0 is subnormal.
double reference_fp16_value(uint16_t h) {
    const int exp = (h >> 10) & 31, mant = h & 1023;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == 0) return sign * std::ldexp(mant, -24);
    return sign * std::ldexp(1024 + mant, exp - 25);
}

// Nearest binary16 to f by search over the finite codes (ties to the even code); past the
// largest finite value by half an ulp (65520) it is infinity.
uint16_t reference_f32_to_fp16(float f) {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (std::isnan(f)) return sign | 0x7e00;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff;  // largest code with value <= a
    while (lo < hi) {
        const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
        if (reference_fp16_value(mid) <= a) {
            lo = mid;
        } else {
            hi = static_cast<uint16_t>(mid - 1);
        }
    }
    if (lo == 0x7bff) return sign | lo;
    const double below = a - reference_fp16_value(lo);
    const double above = reference_fp16_value(static_cast<uint16_t>(lo + 1)) - a;
    const bool up = above < below || (above == below && (lo & 1));
    return sign | static_cast<uint16_t>(lo + (up ? 1 : 0));
}

// Nearest bfloat16 (the top half of a binary32), ties to even; NaNs quiet.
uint16_t reference_f32_to_bf16(float f) {
    const uint32_t bits = f32_bits(f);
    if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
    const auto lo = static_cast<uint16_t>(bits >> 16);
    const double a = f, v_lo = bf16_to_f32(lo);
    const auto hi = static_cast<uint16_t>(lo + 1);
    // Stepping the code up moves away from zero; infinity counts as 2^128 for rounding.
    const double v_hi = (hi & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), a)
                                                : static_cast<double>(bf16_to_f32(hi));
    if (v_lo == a) return lo;
    const double d_lo = std::fabs(a - v_lo), d_hi = std::fabs(v_hi - a);
    return (d_hi < d_lo || (d_hi == d_lo && (lo & 1))) ? hi : lo;
}

TEST(Float16, DecodesEveryHalf) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_f32(static_cast<uint16_t>(h));
        // The table the kernels read, computed by the compiler: the same bits, NaNs included.
        EXPECT_EQ(f32_bits(kFp16Values[h]), f32_bits(f)) << h;
        const int exp = (h >> 10) & 31;
        if (exp == 31 && (h & 1023) != 0) {
            // NaN: payload kept, made quiet, sign kept.
            EXPECT_EQ(f32_bits(f), ((h & 0x8000) << 16) | 0x7fc00000u | ((h & 1023) << 13)) << h;
        } else if (exp == 31) {
            EXPECT_TRUE(std::isinf(f) && std::signbit(f) == ((h & 0x8000) != 0)) << h;
        } else {
            EXPECT_EQ(static_cast<double>(f), reference_fp16_value(static_cast<uint16_t>(h))) << h;
            EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;  // including -0
        }
    }
}

TEST(Float16, EveryHalfRoundTrips) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto half = static_cast<uint16_t>(h);
        const bool nan = ((h >> 10) & 31) == 31 && (h & 1023) != 0;
        const uint16_t expected = nan ? static_cast<uint16_t>((h & 0x8000) | 0x7e00) : half;
        EXPECT_EQ(f32_to_fp16(fp16_to_f32(half)), expected) << h;
    }
}

// A sweep over all float bit patterns (a prime stride) plus every float in the range where
// halves are dense near the subnormal, normal and overflow boundaries.
TEST(Float16, EncodesFloatSweep) {
    size_t checked = 0, bad = 0;
    auto check = [&](uint32_t bits) {
        const float f = f32_from_bits(bits);
        const uint16_t want = reference_f32_to_fp16(f), got = f32_to_fp16(f);
        ++checked;
        if (want != got && bad++ < 10) {
            ADD_FAILURE() << "f32 0x" << std::hex << bits << ": got 0x" << got << ", want 0x"
                          << want;
        }
    };
    for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4099) check(static_cast<uint32_t>(bits));
    for (uint32_t base : {0x33000000u, 0x387fc000u, 0x477fe000u}) {  // 2^-25, 2^-14, 65504
        for (uint32_t k = 0; k < 0x8000; ++k) {
            check(base + k);
            check((base + k) | 0x80000000u);
        }
    }
    EXPECT_EQ(bad, 0u) << "of " << checked;
}

TEST(Bfloat16, DecodesAndRoundTripsEveryCode) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto code = static_cast<uint16_t>(h);
        EXPECT_EQ(f32_bits(bf16_to_f32(code)), h << 16);
        const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
        EXPECT_EQ(f32_to_bf16(bf16_to_f32(code)), nan ? (code | 0x40) : code) << h;
    }
}

TEST(Bfloat16, EncodesFloatSweep) {
    size_t bad = 0;
    for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 997) {
        const float f = f32_from_bits(static_cast<uint32_t>(bits));
        const uint16_t want = reference_f32_to_bf16(f), got = f32_to_bf16(f);
        if (want != got && bad++ < 10) {
            ADD_FAILURE() << "f32 0x" << std::hex << bits << ": got 0x" << got << ", want 0x"
                          << want;
        }
    }
    EXPECT_EQ(bad, 0u);
}

// E8M0 is a bare power of two 2^(e-127); ggml decodes 255 (NaN in OCP MX) as infinity.
TEST(E8m0, DecodesEveryCode) {
    for (int e = 0; e < 255; ++e) {
        const auto code = static_cast<uint8_t>(e);
        EXPECT_EQ(static_cast<double>(e8m0_to_f32(code)), std::ldexp(1.0, e - 127)) << e;
        EXPECT_EQ(static_cast<double>(e8m0_to_f32_half(code)), std::ldexp(1.0, e - 128)) << e;
    }
    EXPECT_TRUE(std::isinf(e8m0_to_f32(255)));
    EXPECT_EQ(static_cast<double>(e8m0_to_f32_half(255)), std::ldexp(1.0, 127));
}

// UE4M3: exponent bias 7, 3 mantissa bits, subnormals at exponent 0, 0x7F reads as 0 (ggml).
TEST(Ue4m3, DecodesEveryCode) {
    for (int x = 0; x < 256; ++x) {
        const int exp = (x >> 3) & 15, mant = x & 7;
        double want = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(8 + mant, exp - 10);
        if (x == 0x7f) want = 0;
        const auto code = static_cast<uint8_t>(x);
        EXPECT_EQ(static_cast<double>(ue4m3_to_f32(code)), want) << x;
        EXPECT_EQ(static_cast<double>(ue4m3_to_f32_half(code)), want / 2) << x;
    }
    EXPECT_EQ(ue4m3_to_f32(0x7e), 448.0f);
}

TEST(Ue4m3, EncodesToTheNearestCode) {
    for (int c = 0; c < 0x7f; ++c) {
        EXPECT_EQ(f32_to_ue4m3(ue4m3_to_f32(static_cast<uint8_t>(c))), c) << c;
    }
    for (int c = 0; c + 1 < 0x7f; ++c) {
        const float lo = ue4m3_to_f32(static_cast<uint8_t>(c));
        const float hi = ue4m3_to_f32(static_cast<uint8_t>(c + 1));
        EXPECT_EQ(f32_to_ue4m3(lo + (hi - lo) * 0.25f), c) << c;
        EXPECT_EQ(f32_to_ue4m3(lo + (hi - lo) * 0.75f), c + 1) << c;
        EXPECT_EQ(f32_to_ue4m3(lo + (hi - lo) * 0.5f), (c % 2 == 0) ? c : c + 1) << c;
    }
    EXPECT_EQ(f32_to_ue4m3(-1.0f), 0);
    EXPECT_EQ(f32_to_ue4m3(NAN), 0);
    EXPECT_EQ(f32_to_ue4m3(1e9f), 0x7e);
}

}  // namespace
}  // namespace tandem
