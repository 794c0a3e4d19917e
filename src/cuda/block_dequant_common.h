// What every per-format decoder of block_dequant.h shares: the host/device qualifiers, aligned
// loads, bit casts, the small float decoders (f16, bf16, E8M0, UE4M3) and the lookup tables.
#pragma once

#include <cstdint>

#include "formats/ggml_type.h"

#ifndef __CUDA_ARCH__
#include <cstring>
#endif
#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

#ifdef __CUDACC__
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif

// The 8-value loops unrolled on the device (host compilers unroll them at -O2 unasked).
#ifdef __CUDA_ARCH__
#define TANDEM_UNROLL _Pragma("unroll")
#else
#define TANDEM_UNROLL
#endif

namespace tandem::gpu {

// Per weight format (block_dequant_*.h): kValues values in kBytes bytes (a float format's
// "block" is 8 elements), and chunk8(block, c, out, tables), which writes values [8c, 8c + 8)
// of the block, bit-identical to the format's dequantize_row in src/formats/.
template <GgmlType T>
struct BlockFormat;

// The lookup tables of the lattice formats, as bytes: point p of a grid is bytes [8p, 8p + 8)
// (iq3: [4p, 4p + 4)), byte j holding coordinate j (iq_tables.h, IqPoints). Host code takes
// them from host_dequant_tables(); device code copies each part (dequant_table_parts()) to
// device memory and points a DequantTables there. Every grid starts 8-aligned (4 for iq3).
struct DequantTables {
    const uint8_t* iq2xxs_grid;  // 256 points; |value| in {8, 25, 43}
    const uint8_t* iq2xs_grid;   // 512 points; as iq2xxs
    const uint8_t* iq2s_grid;    // 1024 points; as iq2xxs
    const uint8_t* iq3xxs_grid;  // 256 points of 4; |value| in {4, 12, ..., 62}
    const uint8_t* iq3s_grid;    // 512 points of 4; |value| in {1, 3, ..., 15}
    const uint8_t* iq1s_grid;    // 2048 points; 8 * (value + 1), value in {-1, 0, 1}
};

namespace block_detail {

// The alignment every block of a kBytes format is guaranteed: rows start at multiples of the
// row size from a 256-aligned upload, so block i starts at base + i * kBytes.
constexpr int block_alignment(int bytes) {
    const int low_bit = bytes & -bytes;
    return low_bit < 256 ? low_bit : 256;
}

#if defined(TANDEM_BLOCK_DEQUANT_CHECK_ALIGNMENT) && !defined(__CUDA_ARCH__)
// Tests count host loads that would fault on the GPU (a load of N bytes at an address that is
// not N-aligned).
inline int misaligned_loads = 0;
inline void check_alignment(const void* p, uintptr_t n) {
    if (reinterpret_cast<uintptr_t>(p) % n != 0) ++misaligned_loads;
}
#else
TANDEM_HD void check_alignment(const void*, uintptr_t) {}
#endif

// Loads of little-endian words. The device loads need natural alignment (a misaligned one
// faults); the host reads through memcpy.
TANDEM_HD uint32_t load_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint16_t*>(p);
#else
    check_alignment(p, 2);
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
#endif
}
TANDEM_HD uint32_t load_u32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint32_t*>(p);
#else
    check_alignment(p, 4);
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
#endif
}

// 8 bytes held in two words; byte i of the memory is byte i % 4 of word i / 4.
struct Bytes8 {
    uint32_t lo, hi;

    TANDEM_HD uint32_t byte(int i) const { return ((i < 4 ? lo : hi) >> (8 * (i & 3))) & 0xff; }
    // Every byte shifted right by `shift` and masked with `mask` (bits shifted in from the
    // next byte are masked off), e.g. the nibbles or 2-bit fields at one position.
    TANDEM_HD Bytes8 field(int shift, uint32_t mask) const {
        const uint32_t m = mask * 0x01010101u;
        return {(lo >> shift) & m, (hi >> shift) & m};
    }
};

// 8 bytes from p, which is kAlign-aligned: one 8-byte load, two 4-byte or four 2-byte ones, or
// bytes.
template <int kAlign>
TANDEM_HD Bytes8 load8(const uint8_t* p) {
    if constexpr (kAlign % 8 == 0) {
#ifdef __CUDA_ARCH__
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        return {v.x, v.y};
#else
        check_alignment(p, 8);
        Bytes8 b;
        std::memcpy(&b.lo, p, 4);
        std::memcpy(&b.hi, p + 4, 4);
        return b;
#endif
    } else if constexpr (kAlign % 4 == 0) {
        return {load_u32(p), load_u32(p + 4)};
    } else if constexpr (kAlign % 2 == 0) {
        return {load_u16(p) | load_u16(p + 2) << 16, load_u16(p + 4) | load_u16(p + 6) << 16};
    } else {
        return {p[0] | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24,
                p[4] | uint32_t{p[5]} << 8 | uint32_t{p[6]} << 16 | uint32_t{p[7]} << 24};
    }
}
// 16 bytes from a kAlign-aligned p: one 16-byte load where it may be.
struct Bytes16 {
    Bytes8 a, b;
};
template <int kAlign>
TANDEM_HD Bytes16 load16(const uint8_t* p) {
    if constexpr (kAlign % 16 == 0) {
#ifdef __CUDA_ARCH__
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        return {{v.x, v.y}, {v.z, v.w}};
#else
        check_alignment(p, 16);
        Bytes16 b;
        std::memcpy(&b.a.lo, p, 4);
        std::memcpy(&b.a.hi, p + 4, 4);
        std::memcpy(&b.b.lo, p + 8, 4);
        std::memcpy(&b.b.hi, p + 12, 4);
        return b;
#endif
    } else {
        return {load8<kAlign>(p), load8<kAlign>(p + 8)};
    }
}
// 4 bytes from a kAlign-aligned p.
template <int kAlign>
TANDEM_HD uint32_t load4(const uint8_t* p) {
    if constexpr (kAlign % 4 == 0) {
        return load_u32(p);
    } else {
        static_assert(kAlign % 2 == 0, "byte-aligned 4-byte loads are not needed");
        return load_u16(p) | load_u16(p + 2) << 16;
    }
}

TANDEM_HD float float_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}
TANDEM_HD double double_from_bits(uint32_t lo, uint32_t hi) {
#ifdef __CUDA_ARCH__
    return __hiloint2double(static_cast<int>(hi), static_cast<int>(lo));
#else
    const uint64_t u = uint64_t{hi} << 32 | lo;
    double d;
    std::memcpy(&d, &u, 8);
    return d;
#endif
}
TANDEM_HD int popcount(uint32_t x) {
#ifdef __CUDA_ARCH__
    return __popc(x);
#else
    return __builtin_popcount(x);
#endif
}

// Products and sums rounded on their own, never fused into an FMA (nvcc fuses a * b + c by
// default; formats/ is built with -ffp-contract=off, and ggml rounds each step too).
TANDEM_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
TANDEM_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
TANDEM_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

// An integer of magnitude below 2^22 as a float, exactly what static_cast<float> gives, in an
// integer add and a float subtract: 1.5 · 2^23 + i, built from its bits, holds i in its
// mantissa's low bits. On the GPUs since Volta a conversion instruction issues at an eighth of
// the rate of a float multiply-add (16 a clock per SM against 128), and the integer kernels
// convert a sum per group and output: their group sums stay below 32 · 128 · 128 = 2^19.
TANDEM_HD float small_int_to_float(int i) {
    constexpr float kMagic = 12582912.0f;  // 1.5 · 2^23, bits 0x4B400000
    return sub_rn(float_from_bits(0x4B400000u + static_cast<uint32_t>(i)), kMagic);
}

// IEEE half -> float, exact; a NaN keeps its payload and comes back quiet (float16.h,
// fp16_to_f32). Integer work only, so flush-to-zero modes cannot touch half subnormals.
TANDEM_HD float half_to_float(uint32_t h) {
#ifdef __CUDA_ARCH__
    // The hardware conversion: exact for every half; a NaN comes back as the canonical NaN
    // (block_dequant.h's header says so), which no finite weight depends on.
    return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#endif
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    const uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) {
        return float_from_bits(sign | 0x7f800000u | (mant != 0 ? 0x00400000u | mant << 13 : 0));
    }
    if (exp == 0) {  // zero or subnormal: mant * 2^-24, a normal float
        const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
        return sign != 0 ? -v : v;
    }
    return float_from_bits(sign | (exp + 112) << 23 | mant << 13);
}
TANDEM_HD float bf16_to_float(uint32_t h) {
    return float_from_bits(h << 16);
}
// Half the E8M0 value 2^(e - 127) (float16.h, e8m0_to_f32_half; e < 2 gives a subnormal).
TANDEM_HD float e8m0_half_to_float(uint32_t e) {
    return float_from_bits(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}
// Half the UE4M3 value (float16.h, ue4m3_to_f32_half): 0x7f decodes as 0, bit 7 is ignored.
TANDEM_HD float ue4m3_half_to_float(uint32_t x) {
    const uint32_t exp = (x >> 3) & 0xf;
    const uint32_t mant = x & 0x7;
    float v;
    if (x == 0x7f) {
        v = 0.0f;
    } else if (exp == 0) {
        v = static_cast<float>(mant) * 0.001953125f;  // m * 2^-9
    } else {
        v = float_from_bits((exp + 120) << 23 | mant << 20);
    }
    return v * 0.5f;
}

// The iq2/iq3 sign byte of a 7-bit index: bit 7 makes the count of set bits even
// (iq_tables.h, iq_sign_byte).
TANDEM_HD uint32_t iq_signs(uint32_t index7) {
    const uint32_t s = index7 & 127;
    return s | (popcount(s) & 1u) << 7;
}

// Byte n of the result = byte s<4n+2:4n> of the eight bytes of x (bytes 0..3) and y (4..7): the
// device's prmt (__byte_perm), written out for the host.
TANDEM_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    const uint64_t bytes = static_cast<uint64_t>(y) << 32 | x;
    uint32_t out = 0;
    for (int n = 0; n < 4; ++n)
        out |= static_cast<uint32_t>((bytes >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return out;
#endif
}

// A 16-entry table of int8 held in four words (entry i = byte i % 4 of word i / 4), read
// without memory: device code has no access to host constant arrays, and a local array indexed
// at run time would live in local memory.
struct Table16 {
    uint32_t w0, w1, w2, w3;

    TANDEM_HD int operator[](uint32_t i) const {
        return static_cast<int8_t>(byte_perm(i & 8 ? w2 : w0, i & 8 ? w3 : w1, i & 7) & 0xff);
    }
    // The entries of four codes at once: byte n of `codes` (0..15) gives byte n of the result.
    // Two byte permutes look up each code's entry among entries 0..7 and among 8..15, the codes'
    // low three bits packed into the permutes' four selector nibbles; bit 3 picks one of the two
    // per byte. About ten instructions for four values, where a lookup a value took six.
    TANDEM_HD uint32_t lookup4(uint32_t codes) const {
        const uint32_t low = codes & 0x07070707u;
        const uint32_t nibbles = low | low >> 4;  // bytes 0 and 2: codes 0,1 and 2,3 as nibbles
        const uint32_t select = (nibbles & 0xffu) | ((nibbles >> 8) & 0xff00u);
        const uint32_t upper = ((codes >> 3) & 0x01010101u) * 0xffu;  // 0xff where code >= 8
        return (byte_perm(w2, w3, select) & upper) | (byte_perm(w0, w1, select) & ~upper);
    }
};
TANDEM_HD constexpr uint32_t pack4(int a, int b, int c, int d) {
    return static_cast<uint32_t>(a & 0xff) | static_cast<uint32_t>(b & 0xff) << 8 |
           static_cast<uint32_t>(c & 0xff) << 16 | static_cast<uint32_t>(d & 0xff) << 24;
}
// kIq4nlValues (iq_tables.h). The tables are made where they are used: device code cannot read
// a namespace-scope constexpr object.
TANDEM_HD constexpr Table16 iq4nl_levels() {
    return {pack4(-127, -104, -83, -65), pack4(-49, -35, -22, -10), pack4(1, 13, 25, 38),
            pack4(53, 69, 89, 113)};
}
TANDEM_HD int iq4nl_level(uint32_t q) {
    return iq4nl_levels()[q];
}
// kE2m1DoubledValues (iq_tables.h): E2M1 codes times two, bit 3 the sign.
TANDEM_HD constexpr Table16 e2m1_doubled_levels() {
    return {pack4(0, 1, 2, 3), pack4(4, 6, 8, 12), pack4(0, -1, -2, -3), pack4(-4, -6, -8, -12)};
}
TANDEM_HD int e2m1_doubled(uint32_t q) {
    return e2m1_doubled_levels()[q];
}

}  // namespace block_detail
}  // namespace tandem::gpu
