// The 32-value block formats (and nvfp4, q1_0, q2_0) as the SIMD dot tiles see them: per
// format, how a step of 64 values decodes into unsigned bytes u (weight = u - bias) and where
// its scales are; and how a column's integer sums take out the bias. Shared by NEON's step
// tiles (simd_legacy.cpp) and x86's unit-lane tiles (legacy_unit_lanes.h).
#pragma once

#include "formats/iq_tables.h"
#include "kernels/variant/simd.h"

namespace tandem::TANDEM_VARIANT_NS::legacy {

using namespace simd;

// Weight traits. decode(p0, p1) gives the 64 u values of blocks p0 and p1 (p1 == p0 in the
// last step of an odd block count: its activation half is zero). kFp16Scale: each block
// starts with its fp16 scale d (mxfp4: an E8M0 byte; nvfp4: four UE4M3 bytes). kMin
// (q4_1/q5_1): each block's fp16 min m at byte 2 (weight = d u + m).
//   kBias: weight value = u - kBias;  kMaxU: largest u (vpmaddubsw pairs saturate past 128).
// The formats whose u would reach 255 (q8_0, iq4_nl) decode to unsigned bytes, bias 128, only
// where they meet the activations in vpdpbusd / usdot; without VNNI they decode to the signed
// weights (bias 0) for the sign trick.
inline constexpr int kBias255 = kVnni ? 128 : 0;
struct Q4_0 {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 2, kBias = 8, kMaxU = 15;
    static constexpr bool kMin = false, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) { return nibbles16x2(p0 + 2, p1 + 2); }
};
struct Q4_1 {
    static constexpr int kBlockBytes = 20, kBlocksPerStep = 2, kBias = 0, kMaxU = 15;
    static constexpr bool kMin = true, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) { return nibbles16x2(p0 + 4, p1 + 4); }
};
// q5: bit 4 of value j is bit j of the 32-bit qh.
inline V high_bits(const uint8_t* qh0, const uint8_t* qh1) {
    return and_(bits_to_bytes(load_u32(qh0), load_u32(qh1)), set1_8(0x10));
}
struct Q5_0 {
    static constexpr int kBlockBytes = 22, kBlocksPerStep = 2, kBias = 16, kMaxU = 31;
    static constexpr bool kMin = false, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return or_(nibbles16x2(p0 + 6, p1 + 6), high_bits(p0 + 2, p1 + 2));
    }
};
struct Q5_1 {
    static constexpr int kBlockBytes = 24, kBlocksPerStep = 2, kBias = 0, kMaxU = 31;
    static constexpr bool kMin = true, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return or_(nibbles16x2(p0 + 8, p1 + 8), high_bits(p0 + 4, p1 + 4));
    }
};
struct Q8_0 {
    static constexpr int kBlockBytes = 34, kBlocksPerStep = 2, kBias = kBias255, kMaxU = 255;
    static constexpr bool kMin = false, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        const V x = load32x2(p0 + 2, p1 + 2);
        return kBias == 0 ? x : xor_(x, set1_8(0x80));
    }
};
#if !defined(__aarch64__)  // (NEON: simd_neon.h)
// Non-linear levels through vpshufb, shifted to unsigned by the bias.
inline __m128i shifted_table(const int8_t* values, int bias) {
    return _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)),
                        _mm_set1_epi8(static_cast<char>(bias)));
}
#endif
struct Iq4Nl {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 2, kBias = kBias255, kMaxU = 255;
    static constexpr bool kMin = false, kFp16Scale = true;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return lookup16(nibbles16x2(p0 + 2, p1 + 2), shifted_table(kIq4nlValues, kBias));
    }
};
// E2M1 doubled (-12..12), so the E8M0 scale is halved: 2^(e - 128), e = 0 and 1 subnormal.
struct E8m0Table {
    float half[256];
};
consteval E8m0Table make_e8m0_table() {
    E8m0Table t{};
    for (int e = 0; e < 256; ++e) {
        const uint32_t bits = e < 2 ? (0x00200000u << e) : static_cast<uint32_t>(e - 1) << 23;
        t.half[e] = __builtin_bit_cast(float, bits);
    }
    return t;
}
inline constexpr E8m0Table kE8m0 = make_e8m0_table();
struct Mxfp4 {
    static constexpr int kBlockBytes = 17, kBlocksPerStep = 2, kBias = 12, kMaxU = 24;
    static constexpr bool kMin = false, kFp16Scale = false;
    static V decode(const uint8_t* p0, const uint8_t* p1) {
        return lookup16(nibbles16x2(p0 + 1, p1 + 1), shifted_table(kE2m1DoubledValues, kBias));
    }
};
struct Nvfp4 {
    static constexpr int kBlockBytes = 36, kBlocksPerStep = 1, kScalesPerStep = 4, kBias = 12,
                         kMaxU = 24;
    static constexpr bool kMin = false, kFp16Scale = false;
    static V decode(const uint8_t* p0, const uint8_t*) {
        return lookup16(nibbles8x4(p0 + 4), shifted_table(kE2m1DoubledValues, kBias));
    }
};

#if !defined(__aarch64__)
// The low-bit formats (x86; NEON: neon_lowbit.cpp). Only the unit-lane tiles take them, each
// block's fp16 d at its start scaling several units (kOneScale; legacy_unit_lanes.h's
// block_scales). Their values decode in an order of their own (decode_unit_lanes there), the
// activations put in the same order within each unit once per column (act_q).
// q1_0, 18 bytes, 128 values: d, then bit j of qs[16] = value j: weight = bit ? 1 : -1, here
// u = 2 bit, bias 1. Two steps per block; a group's blocks decode at once, straight into unit
// lanes (legacy_unit_lanes.h's decode_unit_lanes), as q2_0's do.
struct Q1_0 {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 1, kStepsPerBlock = 2, kBias = 1,
                         kMaxU = 2;
    static constexpr bool kMin = false, kFp16Scale = false, kOneScale = true;
    static V act_q(V q) { return to_bit_order(q); }
};
// q2_0, 18 bytes, 64 values: d, then value j = bits 2(j % 4).. of qs[j / 4], weight = q - 1.
struct Q2_0 {
    static constexpr int kBlockBytes = 18, kBlocksPerStep = 1, kBias = 1, kMaxU = 3;
    static constexpr bool kMin = false, kFp16Scale = false, kOneScale = true;
    static V act_q(V q) { return to_crumb_order(q); }
};
#endif

// Optional traits: steps per weight block (default 1), one scale per block of several units,
// the activation values of a step in the weights' value order (default: as they come).
template <typename T>
constexpr int steps_per_block() {
    if constexpr (requires { T::kStepsPerBlock; }) {
        return T::kStepsPerBlock;
    } else {
        return 1;
    }
}
// Formats whose blocks hold several units under one fp16 scale at the block's start.
template <typename T>
constexpr bool one_scale() {
    if constexpr (requires { T::kOneScale; }) {
        return T::kOneScale;
    } else {
        return false;
    }
}
template <typename T>
constexpr int scales_per_step() {
    if constexpr (requires { T::kScalesPerStep; }) {
        return T::kScalesPerStep;
    } else {
        return 2;
    }
}
// Units per weight block: the one-scale formats' 32-value units (q1_0 4, q2_0 2).
template <typename T>
constexpr int units_per_block() {
    return steps_per_block<T>() * scales_per_step<T>() / T::kBlocksPerStep;
}
template <typename T>
V act_q(V q) {
    if constexpr (requires { T::act_q(q); }) {
        return T::act_q(q);
    } else {
        return q;
    }
}

// The bias is removed by starting each column's integer sum at -bias * sum(activation); that
// needs u * a pairs that cannot saturate vpmaddubsw (or VNNI). Otherwise (q8_0, iq4_nl without
// VNNI) the signed weights use the sign trick.
template <typename T>
constexpr bool kUseBias = kVnni || T::kMaxU <= 128;

template <typename T>
V column_bias(V a) {
    if constexpr (T::kBias == 0 || !kUseBias<T>) {
        return zero();
    } else {
        return sub32(zero(), dot4(zero(), set1_8(T::kBias), a));
    }
}
// acc + the integer products of weights u with activations a (acc starts at the column's bias
// start where kUseBias, at zero otherwise).
template <typename T>
V weight_dot(V acc, V u, V a) {
    if constexpr (kUseBias<T>) {
        return dot4(acc, u, a);
    } else {
        static_assert(T::kBias == 0);  // (kBias255: the weights are signed)
        V abs_w, signed_a;
        sign_split(u, a, abs_w, signed_a);
        return dot4(acc, abs_w, signed_a);
    }
}

// One row's float accumulators of C columns, as the tiles carry them between chunks of k
// (ChunkCarry: a struct, since vector types lose their attributes as template arguments).
template <int C>
struct AccRow {
    FAcc col[C];
    FAcc& operator[](int c) { return col[c]; }
};

}  // namespace tandem::TANDEM_VARIANT_NS::legacy
