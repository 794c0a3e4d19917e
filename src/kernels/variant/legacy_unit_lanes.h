// Dot tiles of the 32-value block formats in "unit lanes" (x86). A unit is the run of values
// one weight scale covers (a 32-value block; nvfp4: 16 values; q1_0, one scale per 128 values:
// its 32-value activation blocks; q2_0, one per 64), and a group kUnits units: 16 with AVX-512,
// 8 with AVX2.
// Per row, column and group the units' exact integer sums are made in unit lanes (int32 lane
// p holds unit unit_lane(p)'s sum), converted and scaled in one fused multiply-add; the step
// tiles (simd_legacy.cpp) take one per step of 2 or 4 units, and a multiply and a conversion.
// Two ways to the same sums:
//  - the small matmul transposes each row's group into unit lanes once (24 shuffles; nvfp4
//    8) so that a column's vpdpbusd chain sums each unit in its lane;
//  - the matvec, with one column to share that over, reduces the column's partial sums
//    (AVX-512: the row's steps dealt into a 128-bit lane per unit first, 8 shuffles; nvfp4
//    none; then 6 shuffles; AVX2: a tree of pair additions, 12 shuffles and 2 lane permutes;
//    nvfp4 6 shuffles);
//  - except q1_0 and q2_0, whose bits decode straight into unit lanes (1 to 4 shuffles a
//    group), for the matvec too.
// Both give one float order for every C. The columns are prepared alike once per chunk.
#pragma once

#include "kernels/variant/legacy_formats.h"
#include "kernels/variant/tile.h"

#if !defined(__aarch64__)
namespace tandem::TANDEM_VARIANT_NS::legacy {

// The one-scale formats (q1_0, q2_0) decode a group straight into unit lanes, for the matvec
// too (no transposition, no reduction): each unit's code bits go to its lane (q2_0's 64 bits
// as two halves, A and B), and planes of them, a shift and a mask each, are the dwords that
// to_unit_lanes puts the activations' in (decode_unit_lanes, one per ISA). q1_0's activations
// are in bit order (dword t of a unit = values 8 m + t), so plane t = bits 8 m + t; q2_0's in
// crumb order (dword 2 k + h = values 16 h + 4 m + k), so plane k of half h = crumbs k.
template <typename T>
constexpr bool kDecodesUnitLanes = one_scale<T>();
// The 16 code bytes of block b of a one-scale group (after its fp16 d; zero past the n units).
template <typename T>
TANDEM_ALWAYS_INLINE __m128i code_bytes(const uint8_t* p, int b, int n) {
    return b * units_per_block<T>() < n
               ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + b * T::kBlockBytes + 2))
               : _mm_setzero_si128();
}

#if defined(TANDEM_SIMD_ZMM)
constexpr int kUnits = 16;
using UnitSums = V;     // int32 lanes, one unit each
using UnitFloats = VF;  // float lanes, one unit each

// Lane 4 L + q (128-bit lane L, position q) holds unit 4 q + L; unit j is in lane unit_lane(j)
// (the map is its own inverse).
constexpr int unit_lane(int j) {
    return 4 * (j % 4) + j / 4;
}
constexpr int lane_unit(int lane) {
    return unit_lane(lane);
}
// A group's decoded steps into "quad order": vector v's 128-bit lane L holds values of unit
// 4 m + L only, m = v / (vectors per 4 units). Steps of 4 units (one 128-bit lane each) are in
// quad order already; steps of 2 units (8 int32 lanes each) are dealt pairwise.
template <int G>
TANDEM_ALWAYS_INLINE void deal_steps(V (&u)[G]) {
    static_assert(G == 4 || G == 8);
    if constexpr (G == 8) {
        TANDEM_UNROLL
        for (int m = 0; m < 4; ++m) deal_lanes(u[2 * m], u[2 * m + 1]);
    }
}
// Quad order into unit lanes (each vector then holds 4 values of every unit).
template <int G>
TANDEM_ALWAYS_INLINE void to_unit_lanes(V (&u)[G]) {
    if constexpr (G == 8) {
        transpose4_in_lanes(u[0], u[2], u[4], u[6]);
        transpose4_in_lanes(u[1], u[3], u[5], u[7]);
    } else {
        transpose4_in_lanes(u[0], u[1], u[2], u[3]);
    }
}
// Integer sums e_q with 128-bit lane L holding 4 partial sums of unit 4 q + L, reduced to unit
// lanes.
TANDEM_ALWAYS_INLINE V quads_to_unit_sums(V e0, V e1, V e2, V e3) {
    const __m512i f0 = _mm512_add_epi32(_mm512_unpacklo_epi64(e0.x, e1.x),
                                        _mm512_unpackhi_epi64(e0.x, e1.x));
    const __m512i f1 = _mm512_add_epi32(_mm512_unpacklo_epi64(e2.x, e3.x),
                                        _mm512_unpackhi_epi64(e2.x, e3.x));
    const __m512 g0 = _mm512_castsi512_ps(f0), g1 = _mm512_castsi512_ps(f1);
    return {_mm512_add_epi32(
        _mm512_castps_si512(_mm512_shuffle_ps(g0, g1, _MM_SHUFFLE(2, 0, 2, 0))),
        _mm512_castps_si512(_mm512_shuffle_ps(g0, g1, _MM_SHUFFLE(3, 1, 3, 1))))};
}
// 16 UE4M3 bytes, one per int32 lane, as halved scales (ue4m3_half4 on 16 lanes).
inline VF ue4m3_half16(__m512i x) {
    const __m512i bits = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x7f)), 20);
    const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p119f));
    return {_mm512_maskz_mov_ps(_mm512_cmpneq_epi32_mask(x, _mm512_set1_epi32(0x7f)), v)};
}

// The 16 bits at byte j * B + kOff of a group, for each unit j in its lane (0 past the n
// units; a byte at an odd offset is the low byte). Read as 128-byte windows of whole vectors
// and permuted: a gather of 16 lanes (or scalar loads put together) costs Zen 5 8-10 times as
// much. A window starts at its first unit (the last one ends at the group's end) and must hold
// its units' words whole.
template <int B, int kOff>
struct UnitWords {
    static constexpr int kPerWindow = (126 - (kOff & 1)) / B + 1;
    static constexpr int kWindows = (16 + kPerWindow - 1) / kPerWindow;
    static_assert(16 * B >= 128);
    struct Window {
        int start;                    // byte offset in the group
        uint32_t lanes;               // the lanes of its units
        alignas(64) int16_t idx[32];  // each lane's word of the window (lanes 16..31 unused)
    };
    struct Table {
        bool fits = true;  // every unit's word inside its window
        Window windows[kWindows];
        alignas(64) int16_t shift[32];  // 8 where the byte is its word's high byte
    };
    static constexpr Table kTable = [] {
        Table t{};
        for (int w = 0; w < kWindows; ++w) {
            const int first = (w * kPerWindow * B + kOff) & ~1;
            t.windows[w].start = first < 16 * B - 128 ? first : 16 * B - 128;
        }
        for (int lane = 0; lane < 16; ++lane) {
            const int j = unit_lane(lane);
            Window& x = t.windows[j / kPerWindow];
            const int rel = j * B + kOff - x.start;
            if (rel < 0 || (rel & ~1) + 2 > 128) t.fits = false;
            x.lanes |= 1u << lane;
            x.idx[lane] = static_cast<int16_t>(rel / 2);
            t.shift[lane] = static_cast<int16_t>(8 * (rel & 1));
        }
        return t;
    }();
    static_assert(kTable.fits);
    static __m512i window_load(const uint8_t* p, int64_t valid) {
        if (valid >= 64) return _mm512_loadu_si512(p);
        const __mmask64 m = valid <= 0 ? 0 : (~0ull >> (64 - valid));
        return _mm512_maskz_loadu_epi8(m, p);
    }
    TANDEM_ALWAYS_INLINE static __m256i get(const uint8_t* p, int n) {
        __m512i r = _mm512_setzero_si512();
        // bytes of the group up to the last unit's word
        const int64_t end = n == 16 ? 16 * B : (n - 1) * B + kOff + 2;
        TANDEM_UNROLL
        for (int w = 0; w < kWindows; ++w) {
            const Window& x = kTable.windows[w];
            const uint8_t* q = p + x.start;
            __m512i lo, hi;
            if (n == 16) {
                lo = _mm512_loadu_si512(q);
                hi = _mm512_loadu_si512(q + 64);
            } else {
                lo = window_load(q, end - x.start);
                hi = window_load(q + 64, end - x.start - 64);
            }
            const __m512i words =
                _mm512_permutex2var_epi16(lo, _mm512_load_si512(x.idx), hi);
            r = _mm512_mask_mov_epi16(r, x.lanes, words);
        }
        if constexpr ((B & 1) != 0 || (kOff & 1) != 0)
            r = _mm512_srlv_epi16(r, _mm512_load_si512(kTable.shift));
        if (n < 16) {
            uint32_t valid = 0;
            for (int lane = 0; lane < 16; ++lane)
                if (unit_lane(lane) < n) valid |= 1u << lane;
            r = _mm512_maskz_mov_epi16(valid, r);
        }
        return _mm512_castsi512_si256(r);
    }
};

// The unit-lane operations the tile needs, as both ISAs provide them.
template <typename T>
TANDEM_ALWAYS_INLINE UnitSums unit_dot(UnitSums x, V u, V q) {
    return weight_dot<T>(x, u, q);
}
// The matvec's integer sums of a group's G steps (in quad order) against the column's, in unit
// lanes.
template <typename T, int G>
TANDEM_ALWAYS_INLINE UnitSums matvec_unit_sums(const V (&u)[G], const V (&q)[G]) {
    constexpr int kQuadVectors = G / 4;  // vectors per 4 units in quad order
    V e[4];
    TANDEM_UNROLL
    for (int m = 0; m < 4; ++m) {
        e[m] = zero();
        TANDEM_UNROLL
        for (int v = 0; v < kQuadVectors; ++v) {
            const int i = m * kQuadVectors + v;
            e[m] = weight_dot<T>(e[m], u[i], q[i]);
        }
    }
    return quads_to_unit_sums(e[0], e[1], e[2], e[3]);
}
inline UnitSums add_units(UnitSums a, UnitSums b) {
    return add32(a, b);
}
inline UnitSums negate_units(UnitSums a) {
    return sub32(zero(), a);
}
inline UnitFloats load_units(const float* p) {
    return load16f(p);
}
// acc + x * s, lane by lane (x converted from int32 first).
inline FAcc add_units_product(FAcc acc, UnitSums x, UnitFloats s) {
    return add_product(acc, cvt(x), s);
}
inline FAcc add_units_product(FAcc acc, UnitFloats x, UnitFloats s) {
    return add_product(acc, x, s);
}
inline UnitFloats mul_units(UnitFloats a, UnitFloats b) {
    return mul(a, b);
}

// Each unit's weight scale in its lane (0 past the n units).
template <typename T>
TANDEM_ALWAYS_INLINE UnitFloats unit_scales(const uint8_t* p, int n) {
    if constexpr (scales_per_step<T>() == 4) {
        // nvfp4: a block's 4 UE4M3 bytes are one dword (units 4 b .. 4 b + 3 in order)
        const auto block = [&](int b) {
            return b * 4 < n ? static_cast<int>(load_u32(p + b * T::kBlockBytes)) : 0;
        };
        const __m128i e = _mm_setr_epi32(block(0), block(1), block(2), block(3));
        return ue4m3_half16(_mm512_permutexvar_epi32(
            _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
            _mm512_cvtepu8_epi32(e)));
    } else if constexpr (T::kFp16Scale) {
        return {_mm512_cvtph_ps(UnitWords<T::kBlockBytes, 0>::get(p, n))};
    } else {  // mxfp4: an E8M0 byte, halved (kE8m0)
        const __m512i e = _mm512_and_si512(
            _mm512_cvtepu16_epi32(UnitWords<T::kBlockBytes, 0>::get(p, n)),
            _mm512_set1_epi32(0xff));
        const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
        return {_mm512_castsi512_ps(_mm512_mask_blend_epi32(
            _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2)), normal, subnormal))};
    }
}
// q4_1 / q5_1: each unit's fp16 min in its lane.
template <typename T>
TANDEM_ALWAYS_INLINE UnitFloats unit_mins(const uint8_t* p, int n) {
    return {_mm512_cvtph_ps(UnitWords<T::kBlockBytes, 2>::get(p, n))};
}
// Blocks of kPerBlock units: lane l gets the float of fp16 word b of words, b the block of
// its unit.
template <int kPerBlock>
TANDEM_ALWAYS_INLINE UnitFloats spread_blocks(__m128i words) {
    constexpr auto b = [](int lane) { return lane_unit(lane) / kPerBlock; };
    return {_mm512_permutexvar_ps(
        _mm512_setr_epi32(b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7), b(8), b(9), b(10),
                          b(11), b(12), b(13), b(14), b(15)),
        _mm512_castps256_ps512(_mm256_cvtph_ps(words)))};
}
// With AVX-512, u[v] holds the activations' dword v / 2 + 4 (v % 2) of each unit: q1_0's
// u[2 t] = plane(t), u[2 t + 1] = plane(t + 4); q2_0's u = A0, A2, B0, B2, A1, A3, B1, B3.
// Blocks 4 i .. 4 i + 3 of the group side by side.
template <typename T>
TANDEM_ALWAYS_INLINE __m512i code_bytes4(const uint8_t* p, int i, int n) {
    const int b = 4 * i;
    const __m256i lo = _mm256_setr_m128i(code_bytes<T>(p, b, n), code_bytes<T>(p, b + 1, n));
    const __m256i hi = _mm256_setr_m128i(code_bytes<T>(p, b + 2, n), code_bytes<T>(p, b + 3, n));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
template <typename T, int G>
TANDEM_ALWAYS_INLINE void decode_unit_lanes(const uint8_t* p, int n, V (&u)[G]) {
    static_assert(G == 8 && T::kBlockBytes == 18);
    // dword scale * unit_lane(p) + add of the source in lane p
    const auto lanes = [](int scale, int add) {
        const auto i = [&](int p) { return scale * unit_lane(p) + add; };
        return _mm512_setr_epi32(i(0), i(1), i(2), i(3), i(4), i(5), i(6), i(7), i(8), i(9), i(10),
                                 i(11), i(12), i(13), i(14), i(15));
    };
    if constexpr (steps_per_block<T>() == 2) {  // q1_0: 4 units (dwords) a block
        const __m512i x = _mm512_permutexvar_epi32(lanes(1, 0), code_bytes4<T>(p, 0, n));
        // plane t: bit 8 m + t at bit 8 m + 1 (u = 2 bit); x doubled first, but for t = 7
        const __m512i x2 = _mm512_add_epi32(x, x), two = _mm512_set1_epi8(2);
        const auto plane = [&](int t) {
            return V{
                _mm512_and_si512(t < 7 ? _mm512_srli_epi32(x2, t) : _mm512_srli_epi32(x, 6), two)};
        };
        TANDEM_UNROLL
        for (int t = 0; t < 4; ++t) {
            u[2 * t] = plane(t);
            u[2 * t + 1] = plane(t + 4);
        }
    } else {  // q2_0: 2 units (qwords) a block, units 0..7 in x0, 8..15 in x1
        const __m512i x0 = code_bytes4<T>(p, 0, n), x1 = code_bytes4<T>(p, 1, n);
        const __m512i a = _mm512_permutex2var_epi32(x0, lanes(2, 0), x1);
        const __m512i b = _mm512_permutex2var_epi32(x0, lanes(2, 1), x1);
        const __m512i three = _mm512_set1_epi8(3);
        const auto plane = [&](__m512i half, int k) {
            return V{_mm512_and_si512(_mm512_srli_epi32(half, 2 * k), three)};
        };
        u[0] = plane(a, 0);
        u[1] = plane(a, 2);
        u[2] = plane(b, 0);
        u[3] = plane(b, 2);
        u[4] = plane(a, 1);
        u[5] = plane(a, 3);
        u[6] = plane(b, 1);
        u[7] = plane(b, 3);
    }
}

#else  // AVX2: a ymm holds 32 values, a group is 8 units (4 steps; nvfp4 2)
constexpr int kUnits = 8;
using UnitSums = __m256i;
using UnitFloats = __m256;

// Lane q holds unit 2 q, lane 4 + q unit 2 q + 1: where a 4 x 4 transposition in 128-bit lanes
// puts nvfp4's units (two to a ymm, one per 128-bit lane); the 32-value blocks follow.
constexpr int unit_lane(int j) {
    return 4 * (j % 2) + j / 2;
}
constexpr int lane_unit(int lane) {  // (the inverse)
    return 2 * (lane % 4) + lane / 4;
}
template <int G>
TANDEM_ALWAYS_INLINE void deal_steps(V (&)[G]) {}  // (each 128-bit lane holds one unit)
// Per 128-bit lane, the 4 x 4 int32 matrix whose rows are a, b, c, d transposed.
TANDEM_ALWAYS_INLINE void transpose4_in_lanes(__m256& a, __m256& b, __m256& c, __m256& d) {
    const __m256 t0 = _mm256_unpacklo_ps(a, b), t1 = _mm256_unpackhi_ps(a, b);
    const __m256 t2 = _mm256_unpacklo_ps(c, d), t3 = _mm256_unpackhi_ps(c, d);
    a = _mm256_shuffle_ps(t0, t2, 0x44);
    b = _mm256_shuffle_ps(t0, t2, 0xEE);
    c = _mm256_shuffle_ps(t1, t3, 0x44);
    d = _mm256_shuffle_ps(t1, t3, 0xEE);
}
// The group's ymm (r = u[0].lo, u[0].hi, u[1].lo, ...) into unit lanes.
template <int G>
TANDEM_ALWAYS_INLINE void to_unit_lanes(V (&u)[G]) {
    __m256 r[2 * G];
    TANDEM_UNROLL
    for (int i = 0; i < G; ++i) {
        r[2 * i] = _mm256_castsi256_ps(u[i].lo);
        r[2 * i + 1] = _mm256_castsi256_ps(u[i].hi);
    }
    if constexpr (G == 2) {  // nvfp4: r[i] = units 2 i, 2 i + 1
        transpose4_in_lanes(r[0], r[1], r[2], r[3]);
        u[0] = {_mm256_castps_si256(r[0]), _mm256_castps_si256(r[1])};
        u[1] = {_mm256_castps_si256(r[2]), _mm256_castps_si256(r[3])};
    } else {  // a block per ymm: the even blocks' lanes, then the odd ones' side by side
        static_assert(G == 4);
        transpose4_in_lanes(r[0], r[2], r[4], r[6]);
        transpose4_in_lanes(r[1], r[3], r[5], r[7]);
        TANDEM_UNROLL
        for (int i = 0; i < 4; ++i) {
            const __m256 even = r[2 * i], odd = r[2 * i + 1];
            u[i].lo = _mm256_castps_si256(_mm256_permute2f128_ps(even, odd, 0x20));
            u[i].hi = _mm256_castps_si256(_mm256_permute2f128_ps(even, odd, 0x31));
        }
    }
}
// x + the products of a step's two blocks, as one chain (weight_dot's two operand forms).
template <typename T>
TANDEM_ALWAYS_INLINE UnitSums unit_dot(UnitSums x, V u, V q) {
    if constexpr (kUseBias<T>) {
        return dot4(dot4(x, u.lo, q.lo), u.hi, q.hi);
    } else {
        V abs_w, signed_q;
        sign_split(u, q, abs_w, signed_q);
        return dot4(dot4(x, abs_w.lo, signed_q.lo), abs_w.hi, signed_q.hi);
    }
}
// The small matmul's signed weights (q8_0, iq4_nl; UnitLaneTile::kSplitSigns): a row's group
// of |w| (8 ymm) stays in registers for all the columns, and each column's vpsignb reads the
// signs from the group's weights in memory (sign_from). With both in registers, 16 of them,
// GCC spilled and reloaded them column by column.
inline V abs_weights(V w) {  // (-128 gives 128, unsigned)
    return {_mm256_sign_epi8(w.lo, w.lo), _mm256_sign_epi8(w.hi, w.hi)};
}
TANDEM_ALWAYS_INLINE UnitSums unit_dot_split(UnitSums x, V abs_w, V q, const V& w) {
    return dot4(dot4(x, abs_w.lo, sign_from(q.lo, w.lo)), abs_w.hi, sign_from(q.hi, w.hi));
}
// Pairs of neighbouring lanes of a and b summed: [a01 a23 b01 b23 | a45 a67 b45 b67].
TANDEM_ALWAYS_INLINE __m256i add_pairs(__m256i a, __m256i b) {
    const __m256 x = _mm256_castsi256_ps(a), y = _mm256_castsi256_ps(b);
    return _mm256_add_epi32(_mm256_castps_si256(_mm256_shuffle_ps(x, y, 0x88)),
                            _mm256_castps_si256(_mm256_shuffle_ps(x, y, 0xDD)));
}
// The matvec's integer sums of the group's steps against the column's, in unit lanes.
template <typename T, int G>
TANDEM_ALWAYS_INLINE UnitSums matvec_unit_sums(const V (&u)[G], const V (&q)[G]) {
    __m256i e[2 * G];
    TANDEM_UNROLL
    for (int i = 0; i < G; ++i) {
        const V y = weight_dot<T>(zero(), u[i], q[i]);
        e[2 * i] = y.lo;
        e[2 * i + 1] = y.hi;
    }
    if constexpr (G == 2) {  // nvfp4: e[i] = units 2 i, 2 i + 1
        return add_pairs(add_pairs(e[0], e[1]), add_pairs(e[2], e[3]));
    } else {  // e[i] = block i: the even blocks' sums in lanes 0..3, the odd ones' in 4..7
        const __m256i even = add_pairs(add_pairs(e[0], e[2]), add_pairs(e[4], e[6]));
        const __m256i odd = add_pairs(add_pairs(e[1], e[3]), add_pairs(e[5], e[7]));
        return _mm256_add_epi32(_mm256_permute2x128_si256(even, odd, 0x20),
                                _mm256_permute2x128_si256(even, odd, 0x31));
    }
}
inline UnitSums add_units(UnitSums a, UnitSums b) {
    return _mm256_add_epi32(a, b);
}
inline UnitSums negate_units(UnitSums a) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), a);
}
inline UnitFloats load_units(const float* p) {
    return _mm256_loadu_ps(p);
}
inline FAcc add_units_product(FAcc acc, UnitSums x, UnitFloats s) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), s, acc);
}
inline FAcc add_units_product(FAcc acc, UnitFloats x, UnitFloats s) {
    return _mm256_fmadd_ps(x, s, acc);
}
inline UnitFloats mul_units(UnitFloats a, UnitFloats b) {
    return _mm256_mul_ps(a, b);
}
// The 16 bits at byte kOff of each of the n blocks (0 past them), block j's in lane
// unit_lane(j): put together in general-purpose registers (a chain of vpinsrw would queue on
// the one shuffle port Intel cores have).
template <int B, int kOff>
TANDEM_ALWAYS_INLINE __m128i block_words(const uint8_t* p, int n) {
    const auto w = [&](int j) -> uint64_t { return j < n ? load_u16(p + j * B + kOff) : 0; };
    const uint64_t lo = w(0) | w(2) << 16 | w(4) << 32 | w(6) << 48;
    const uint64_t hi = w(1) | w(3) << 16 | w(5) << 32 | w(7) << 48;
    return _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
}
template <typename T>
TANDEM_ALWAYS_INLINE UnitFloats unit_scales(const uint8_t* p, int n) {
    if constexpr (scales_per_step<T>() == 4) {
        // nvfp4: the two blocks' UE4M3 bytes (units 0..3, 4..7) in unit lanes, as halved
        // scales (ue4m3_half4 on 8 lanes)
        const uint64_t b0 = load_u32(p), b1 = n > 4 ? load_u32(p + T::kBlockBytes) : 0;
        const __m128i x = _mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(b0 | b1 << 32)),
                                           _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, -1, -1, -1, -1,
                                                         -1, -1, -1, -1));
        const __m256i e = _mm256_cvtepu8_epi32(x);
        const __m256i bits = _mm256_slli_epi32(_mm256_and_si256(e, _mm256_set1_epi32(0x7f)), 20);
        const __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(0x1p119f));
        return _mm256_andnot_ps(
            _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x7f))), v);
    } else if constexpr (T::kFp16Scale) {
        return _mm256_cvtph_ps(block_words<T::kBlockBytes, 0>(p, n));
    } else {  // mxfp4: an E8M0 byte, halved (kE8m0; its 8-lane form was 5-10% slower here)
        const auto e = [&](int j) { return j < n ? kE8m0.half[p[j * T::kBlockBytes]] : 0.0f; };
        return _mm256_setr_ps(e(0), e(2), e(4), e(6), e(1), e(3), e(5), e(7));
    }
}
template <typename T>
TANDEM_ALWAYS_INLINE UnitFloats unit_mins(const uint8_t* p, int n) {
    return _mm256_cvtph_ps(block_words<T::kBlockBytes, 2>(p, n));
}
template <int kPerBlock>
TANDEM_ALWAYS_INLINE UnitFloats spread_blocks(__m128i words) {
    constexpr auto b = [](int lane) { return lane_unit(lane) / kPerBlock; };
    return _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(_mm_cvtph_ps(words)),
        _mm256_setr_epi32(b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7)));
}
// With AVX2, the activations' dword t of each unit is in u[t].lo for t < 4, u[t - 4].hi after:
// q1_0's u[t] = {plane(t), plane(t + 4)}; q2_0's u = {A0, A2}, {B0, B2}, {A1, A3}, {B1, B3}.
template <typename T, int G>
TANDEM_ALWAYS_INLINE void decode_unit_lanes(const uint8_t* p, int n, V (&u)[G]) {
    static_assert(G == 4 && T::kBlockBytes == 18);
    const auto blocks = [&](int b) {  // blocks b and b + 1 side by side
        return _mm256_setr_m128i(code_bytes<T>(p, b, n), code_bytes<T>(p, b + 1, n));
    };
    if constexpr (steps_per_block<T>() == 2) {  // q1_0: 4 units (dwords) a block
        const __m256i x =
            _mm256_permutevar8x32_epi32(blocks(0), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
        // plane t: bit 8 m + t of x at bit 8 m + 1 (u = 2 bit); x doubled first, but for t = 7
        // (bit 31 would leave the lane)
        const __m256i x2 = _mm256_add_epi32(x, x), two = _mm256_set1_epi8(2);
        const auto plane = [&](int t) {
            return _mm256_and_si256(t < 7 ? _mm256_srli_epi32(x2, t) : _mm256_srli_epi32(x, 6),
                                    two);
        };
        TANDEM_UNROLL
        for (int t = 0; t < 4; ++t) u[t] = {plane(t), plane(t + 4)};
    } else {  // q2_0: 2 units (qwords) a block
        // per 128-bit lane, the units' low dwords then their high dwords: [0L 2L 0H 2H | 1L 3L
        // 1H 3H] of units 0..3 and of 4..7, then their low and high quadwords side by side
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const __m256i x0 = _mm256_permutevar8x32_epi32(blocks(0), order);
        const __m256i x1 = _mm256_permutevar8x32_epi32(blocks(2), order);
        const __m256i a = _mm256_unpacklo_epi64(x0, x1), b = _mm256_unpackhi_epi64(x0, x1);
        const __m256i three = _mm256_set1_epi8(3);
        const auto plane = [&](__m256i half, int k) {
            return _mm256_and_si256(_mm256_srli_epi32(half, 2 * k), three);
        };
        u[0] = {plane(a, 0), plane(a, 2)};
        u[1] = {plane(b, 0), plane(b, 2)};
        u[2] = {plane(a, 1), plane(a, 3)};
        u[3] = {plane(b, 1), plane(b, 3)};
    }
}
#endif

// The one-scale formats (q1_0, q2_0): each unit's block's fp16 d in the unit's lane (0 past
// the n units, which are whole blocks): the group's words put together in general-purpose
// registers, converted and spread to the lanes in one permute.
template <typename T>
TANDEM_ALWAYS_INLINE UnitFloats block_scales(const uint8_t* p, int n) {
    constexpr int kPerBlock = units_per_block<T>();
    constexpr int kBlocks = kUnits / kPerBlock;
    static_assert(kBlocks <= 8);
    const auto d = [&](int b) -> uint64_t {
        return b < kBlocks && b * kPerBlock < n ? load_u16(p + b * T::kBlockBytes) : 0;
    };
    const uint64_t lo = d(0) | d(1) << 16 | d(2) << 32 | d(3) << 48;
    const uint64_t hi = d(4) | d(5) << 16 | d(6) << 32 | d(7) << 48;
    return spread_blocks<kPerBlock>(
        _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)));
}

template <typename T, int C>
struct UnitLaneTile {
    static constexpr int kScalesPerStep = scales_per_step<T>();
    static constexpr int kG = kUnits / kScalesPerStep;  // steps per group
    static constexpr int kUnitValues = 64 / kScalesPerStep;
    // (else the matvec's reduction)
    static constexpr bool kTransposed = C > 1 || kDecodesUnitLanes<T>;
    // Without VNNI, the transposed products of kSum16Steps steps summed in int16 lanes
    // (vpmaddubsw, vpaddw) and widened once (dot_unit16), as many as cannot overflow: a step
    // adds (2 with AVX2) pair sums of at most 2 * kMaxU * 128 to a lane. The whole group for
    // q4_0, q4_1, nvfp4, q1_0, q2_0; 2 steps with AVX2 (4 with AVX-512) for q5_0, q5_1, mxfp4
    // (C = 4 / 8 on Zen 5: AVX2 0.82-0.89x the time, AVX-512 0.88-0.95x).
    static constexpr int kPairSumsPerStep = kZmm ? 1 : 2;
    static constexpr int kSum16Steps = [] {
        int n = kG;
        while (n > 0 && n * kPairSumsPerStep * 2 * T::kMaxU * 128 > 32767) n /= 2;
        return n;
    }();
    static constexpr bool kSum16 = kTransposed && !kVnni && kUseBias<T> &&
                                   kSum16Steps * kPairSumsPerStep >= 2;
    static_assert(!kSum16 || kG % kSum16Steps == 0);
    // The signed weights' small matmul with 16 registers: |w| in registers, the signs from
    // memory (unit_dot_split; AVX-512's 32 registers hold both).
    static constexpr bool kSplitSigns = !kZmm && !kUseBias<T> && C > 1;
    // Rows per tile: with AVX-512 2 for C = 2, 3 (1: 25-35% slower on Zen 5), else 1 (2 at
    // C = 4: 6-13% slower; a row's group takes 8 registers); with AVX2 (16 registers) 1.
    static constexpr int R = kZmm && (C == 2 || C == 3) ? 2 : 1;
    static constexpr bool kQ8_1 = T::kMin;
    static constexpr int kActBytes = kQ8_1 ? 36 : 34, kActQs = kQ8_1 ? 4 : 2;
    // q1_0: a block of two steps (4 units, one scale); the others: steps of whole blocks
    static constexpr int kStepsPerBlock = steps_per_block<T>();
    static constexpr int64_t kStepBytes = T::kBlocksPerStep * T::kBlockBytes;
    static constexpr int64_t kGroupBytes = kG * kStepBytes / kStepsPerBlock;
    // A column's group: its values in unit lanes (tiles) or quad order (matvec), the start of
    // each unit's integer sum (-bias times the unit's activation sum), each unit's activation
    // scale; all per unit in its lane.
    static constexpr bool kBias = T::kBias != 0 && kUseBias<T>;
    struct ColGroup {
        V q[kG];
        UnitFloats d;
    };
    // Column data that stays in L1: chunks of kUnitLaneChunkBytes (tile.h).
    static constexpr int64_t kColBytes = sizeof(ColGroup) + (kBias ? 64 : 0) + (kQ8_1 ? 64 : 0);
    static constexpr int64_t kChunk = kUnitLaneChunkBytes / (C * kColBytes);  // groups
    struct Chunk {
        ColGroup cols[kChunk][C];
        UnitSums bias[kBias ? kChunk : 1][C];
        // q8_1's s of each unit's block, in its lane
        alignas(64) float s[kQ8_1 ? kChunk : 1][C][kUnits];
    };
    static constexpr int kRowBlock = 128;  // rows per block when k takes several chunks
    using Carry = ChunkCarry<AccRow<C>>;

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        const int64_t n_act = k / 32, n_units = k / kUnitValues;
        const int64_t n_groups = (n_units + kUnits - 1) / kUnits;
        alignas(64) Chunk cols;
        alignas(64) AccRow<C> carried[kRowBlock];
        run_chunks<kRowBlock>(
            n_rows, n_groups, even_chunk(n_groups, kChunk), carried,
            [&](int64_t g0, int64_t ng) { prepare(a, a_stride, n_act, g0, ng, cols); },
            [&](int rb, int count, int64_t g0, int64_t ng, const Carry& carry) {
                rows(w, w_stride, rb, count, n_units, g0, ng, cols, out, out_stride, carry);
            });
    }

    static void prepare(const uint8_t* a, size_t a_stride, int64_t n_act, int64_t g0, int64_t ng,
                        Chunk& cols) {
        for (int64_t g = 0; g < ng; ++g) {
            const int64_t b0 = (g0 + g) * 2 * kG;  // first activation block of the group
            for (int c = 0; c < C; ++c) {
                const uint8_t* ac = a + c * a_stride;
                ColGroup& col = cols.cols[g][c];
                V q[kG];
                TANDEM_UNROLL
                for (int s = 0; s < kG; ++s) {
                    const int64_t b = b0 + 2 * s;
                    const uint8_t* a0 = ac + b * kActBytes + kActQs;
                    q[s] = act_q<T>(b + 1 < n_act ? load32x2(a0, a0 + kActBytes)
                                                  : (b < n_act ? load32_lo(a0) : zero()));
                }
                deal_steps(q);
                if constexpr (!kTransposed) {
                    TANDEM_UNROLL
                    for (int s = 0; s < kG; ++s) col.q[s] = q[s];
                }
                to_unit_lanes(q);
                UnitSums sums{};
                TANDEM_UNROLL
                for (int s = 0; s < kG; ++s) {
                    if constexpr (kTransposed) col.q[s] = q[s];
                    if constexpr (kBias) sums = unit_dot<T>(sums, set1_8(T::kBias), q[s]);
                }
                if constexpr (kBias) cols.bias[g][c] = negate_units(sums);
                alignas(64) float d[kUnits];
                for (int j = 0; j < kUnits; ++j) {
                    const int64_t b = b0 + j * kUnitValues / 32;
                    const uint8_t* block = ac + b * kActBytes;
                    d[unit_lane(j)] = b < n_act ? fp16(block) : 0.0f;
                    if constexpr (kQ8_1)
                        cols.s[g][c][unit_lane(j)] = b < n_act ? fp16(block + 2) : 0.0f;
                }
                col.d = load_units(d);
            }
        }
    }

    static void rows(const uint8_t* w, size_t w_stride, int r_begin, int count, int64_t n_units,
                     int64_t g0, int64_t ng, const Chunk& cols, float* out, size_t out_stride,
                     const Carry& carry) {
        const size_t ahead = prefetch_ahead(R, w_stride);
        for_row_groups<R>(w + r_begin * w_stride + g0 * kGroupBytes, w_stride, count,
                          [&](const uint8_t* const* rows, int n_valid, int r0) {
                              Carry c = carry;
                              if (c.acc != nullptr) c.acc += r0;
                              tile(rows, n_valid, ahead, n_units - g0 * kUnits, ng, cols,
                                   out + r_begin + r0, out_stride, c);
                          });
    }

    // n_units: the units from the chunk's start to the row's end.
    static void tile(const uint8_t* const* rows, int n_valid, size_t ahead, int64_t n_units,
                     int64_t ng, const Chunk& cols, float* out, size_t out_stride,
                     const Carry& carry) {
        FAcc acc[R][C];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) {
                acc[r][c] = carry.in && r < n_valid ? carry.acc[r][c] : facc_zero();
            }
        }
        for (int64_t g = 0; g < ng; ++g)
            group(rows, ahead, carry.whole_k(), g,
                  static_cast<int>(min_i64(kUnits, n_units - kUnits * g)), cols, acc);
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                if (r >= n_valid) continue;
                if (carry.out) {
                    carry.acc[r][c] = acc[r][c];
                } else {
                    out[c * out_stride + r] = hsum(acc[r][c]);
                }
            }
        }
    }

    // Group g of the chunk, its first n units in the rows (kUnits but at the row's end).
    // whole_k: the chunk is all of k, so a single row streams front to back and is prefetched
    // along itself; else (and with several rows) the same bytes `ahead` rows on are. Along the
    // row, with k in chunks, most lines prefetched were the chunks' still to come, not the next
    // rows': at K = 7168 (two chunks at C = 8) on Sapphire Rapids, from DRAM, rows ahead took
    // 0.95x the time for q4_0 and q8_0 at 16 threads (q1_0, q2_0 level); at one thread
    // 0.64-0.75x for q2_0, q4_0, q8_0, in a noisier run (C = 4, its code the same, 0.75-0.80x).
    TANDEM_ALWAYS_INLINE static void group(const uint8_t* const* rows, size_t ahead,
                                           bool whole_k, int64_t g, int n, const Chunk& cols,
                                           FAcc (&acc)[R][C]) {
        V u[R][kG];
        alignas(64) V w[kSplitSigns ? R : 1][kG];  // (kSplitSigns: the weights, u their |w|)
        UnitFloats dw[R], mins[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            const uint8_t* p = rows[r] + g * kGroupBytes;
            if (R == 1 && whole_k) {
                prefetch_stream(p, kGroupBytes);
            } else {
                for (int64_t o = 0; o < kGroupBytes; o += 64) prefetch_l2(p + ahead + o);
            }
            if constexpr (kDecodesUnitLanes<T>) {
                decode_unit_lanes<T>(p, n, u[r]);
            } else {
                decode(p, n, u[r]);
                deal_steps(u[r]);
                if constexpr (kTransposed) to_unit_lanes(u[r]);
            }
            if constexpr (kSplitSigns) {
                TANDEM_UNROLL
                for (int t = 0; t < kG; ++t) {
                    w[r][t] = u[r][t];
                    u[r][t] = abs_weights(u[r][t]);
                }
            }
            if constexpr (one_scale<T>()) {
                dw[r] = block_scales<T>(p, n);
            } else {
                dw[r] = unit_scales<T>(p, n);
            }
            if constexpr (T::kMin) mins[r] = unit_mins<T>(p, n);
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) {
            const ColGroup& col = cols.cols[g][c];
            TANDEM_UNROLL
            for (int r = 0; r < R; ++r) {
                const UnitSums x = unit_sums(u[r], w[kSplitSigns ? r : 0], col.q,
                                             kBias ? cols.bias[g][c] : UnitSums{});
                acc[r][c] = add_units_product(acc[r][c], x, mul_units(dw[r], col.d));
                if constexpr (T::kMin)
                    acc[r][c] = add_units_product(acc[r][c], mins[r], load_units(cols.s[g][c]));
            }
        }
    }
    // The integer sums in unit lanes, from the bias starts: transposed rows and columns sum
    // each unit in its lane; in quad order the partial sums are reduced. (w: the weights when
    // kSplitSigns, u being their magnitudes.)
    TANDEM_ALWAYS_INLINE static UnitSums unit_sums(const V (&u)[kG], const V (&w)[kG],
                                                   const V (&q)[kG], UnitSums bias) {
        if constexpr (kSum16) {
            UnitSums x = bias;
            TANDEM_UNROLL
            for (int t0 = 0; t0 < kG; t0 += kSum16Steps) {
                Acc x16 = acc_zero();
                TANDEM_UNROLL
                for (int t = t0; t < t0 + kSum16Steps; ++t) x16 = dot_unit16(x16, u[t], q[t]);
                x = add_units(UnitSums{widen16(x16)}, x);
            }
            return x;
        } else if constexpr (kTransposed) {
            // Two chains, the even and the odd steps: a column's sums are one dependent chain
            // of multiply-adds (vpdpbusd: 5 cycles each) and the columns come one after another.
            UnitSums x[2] = {bias, UnitSums{}};
            TANDEM_UNROLL
            for (int t = 0; t < kG; ++t) {
                if constexpr (kSplitSigns) {
                    x[t % 2] = unit_dot_split(x[t % 2], u[t], q[t], w[t]);
                } else {
                    x[t % 2] = unit_dot<T>(x[t % 2], u[t], q[t]);
                }
            }
            return add_units(x[0], x[1]);
        } else {
            const UnitSums x = matvec_unit_sums<T>(u, q);
            return kBias ? add_units(x, bias) : x;
        }
    }

    // The group's steps decoded; steps past the n units zero (never read).
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* p, int n, V (&u)[kG]) {
        if (n == kUnits) {
            TANDEM_UNROLL
            for (int s = 0; s < kG; ++s) {
                u[s] = decode_step(p, s, true);
                keep_load_order(u[s]);  // (the row streams in address order)
            }
            return;
        }
        TANDEM_UNROLL  // (u stays in registers only with constant indices)
        for (int s = 0; s < kG; ++s) {
            const int left = n - s * kScalesPerStep;  // (a whole step or, of 2 units, one)
            u[s] = left <= 0 ? zero() : decode_step(p, s, left > 1);
        }
    }
    // Step s of the group at p; whole: both of its units (else only the first).
    TANDEM_ALWAYS_INLINE static V decode_step(const uint8_t* p, int s, bool whole) {
        // (the one-scale formats, q1_0's two steps a block among them, decode by groups:
        // decode_unit_lanes)
        static_assert(kStepsPerBlock == 1);
        const uint8_t* p0 = p + s * kStepBytes;
        return T::decode(p0, whole ? p0 + T::kBlockBytes : p0);
    }
};

}  // namespace tandem::TANDEM_VARIANT_NS::legacy
#endif
