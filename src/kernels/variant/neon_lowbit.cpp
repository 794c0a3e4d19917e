// NEON dot-product tiles for q1_0 and q2_0 against q8_0 activations (on x86 in
// simd_legacy.cpp). A row is read in units of 128 values facing four q8_0 blocks: one q1_0 block
// or two q2_0 blocks, decoded once into signed weights (q1_0 +-1, q2_0 -1..2) for all columns.
// Per column: sdot, one exact int32 per activation block, and per activation block j one fused
// multiply-add acc[j % 4] += isum_j * (dy_j * d) into four float lanes, summed at the end.
//
// Column invariance: those float steps depend on k only (a q2_0 row of an odd block count ends
// in a half unit whose upper lanes add 0 * 0), never on the number of columns.
#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using namespace simd;

constexpr int kQ8_0Bytes = 34;  // q8_0: fp16 d, int8 qs[32]

// 128 weights decoded for all columns.
struct Unit {
    int8x16_t q[8];  // weights 16i..16i+15
    float32x4_t d;   // the weight scale of activation block j's values in lane j (0: absent)
};

// A tbl index that repeats bytes first, first + 1, ... n times each (a constant once inlined).
TANDEM_ALWAYS_INLINE uint8x16_t repeat_index(int first, int n) {
    uint8x16_t idx = vdupq_n_u8(0);
    TANDEM_UNROLL
    for (int lane = 0; lane < 16; ++lane) idx[lane] = static_cast<uint8_t>(first + lane / n);
    return idx;
}

// q1_0, 18 bytes, 128 values: fp16 d, qs[16]: bit j % 8 of qs[j / 8] set: +d, clear: -d.
struct Q1_0 {
    static constexpr int kUnitBytes = 18;
    static constexpr bool kHalfUnits = false;
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Unit& w) {
        const uint8x16_t qs = vld1q_u8(b + 2);
        const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
        const int8x16_t plus = vdupq_n_s8(1), minus = vdupq_n_s8(-1);
        TANDEM_UNROLL
        for (int i = 0; i < 8; ++i) {  // bytes 2i, 2i+1
            const uint8x16_t set = vtstq_u8(vqtbl1q_u8(qs, repeat_index(2 * i, 8)), bit);
            w.q[i] = vbslq_s8(set, plus, minus);
        }
        w.d = vdupq_n_f32(fp16(b));
    }
};

// q2_0, 18 bytes, 64 values: fp16 d, qs[16]: value j = bits 2 (j % 4).. of qs[j / 4], minus 1.
// A unit is two blocks; kHalf: only the first (the end of a row of an odd block count).
struct Q2_0 {
    static constexpr int kUnitBytes = 36;
    static constexpr bool kHalfUnits = true;
    TANDEM_ALWAYS_INLINE static void block(const uint8_t* b, int8x16_t* q) {
        const uint8x16_t qs = vld1q_u8(b + 2);
        const int8x16_t shifts = {0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6};
        TANDEM_UNROLL
        for (int i = 0; i < 4; ++i) {  // bytes 4i..4i+3
            const uint8x16_t x = vshlq_u8(vqtbl1q_u8(qs, repeat_index(4 * i, 4)), shifts);
            q[i] = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(x, vdupq_n_u8(3)), vdupq_n_u8(1)));
        }
    }
    template <bool kHalf = false>
    TANDEM_ALWAYS_INLINE static void decode(const uint8_t* b, Unit& w) {
        block(b, w.q);
        if constexpr (kHalf) {
            const float d = fp16(b);
            w.d = float32x4_t{d, d, 0, 0};
        } else {
            block(b + 18, w.q + 4);
            const float32x4_t d = fp16x2(b, b + 18);  // lanes 0, 1
            w.d = vzip1q_f32(d, d);
        }
    }
};

// One unit against one column's q8_0 blocks y (kActBlocks of them: 4, or 2 in a half unit).
template <int kActBlocks>
TANDEM_ALWAYS_INLINE float32x4_t column(const Unit& w, const uint8_t* y, float32x4_t acc) {
    const int32x4_t z = vdupq_n_s32(0);
    int32x4_t t[4];
    uint16x4_t dy_bits = vdup_n_u16(0);
    TANDEM_UNROLL
    for (int j = 0; j < 4; ++j) {
        if (j < kActBlocks) {
            const uint8_t* block = y + j * kQ8_0Bytes;
            const int8x16_t a0 = vld1q_s8(reinterpret_cast<const int8_t*>(block + 2));
            const int8x16_t a1 = vld1q_s8(reinterpret_cast<const int8_t*>(block + 18));
            t[j] = vdotq_s32(vdotq_s32(z, w.q[2 * j], a0), w.q[2 * j + 1], a1);
            dy_bits = vset_lane_u16(load_u16(block), dy_bits, j);
        } else {
            t[j] = z;
        }
    }
    const int32x4_t isum = vpaddq_s32(vpaddq_s32(t[0], t[1]), vpaddq_s32(t[2], t[3]));
    const float32x4_t dy = vcvt_f32_f16(vreinterpret_f16_u16(dy_bits));
    return vfmaq_f32(acc, vcvtq_f32_s32(isum), vmulq_f32(dy, w.d));
}

// One row at a time, as the i-quant tiles: each unit decoded once, then dotted with C columns.
template <typename T, int C>
struct LowBitTile {
    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        const int64_t n_units = k / 128;
        const uint8_t* a_end = a + n_units * 4 * kQ8_0Bytes;  // the half unit's activations
        for (int r = 0; r < n_rows; ++r) {
            const uint8_t* row = w + r * w_stride;
            float32x4_t acc[C];
            TANDEM_UNROLL
            for (auto& x : acc) x = vdupq_n_f32(0);
            for (int64_t i = 0; i < n_units; ++i) {
                const uint8_t* b = row + i * T::kUnitBytes;
                if constexpr (C == 1) {
                    prefetch_next_page(b, T::kUnitBytes);
                } else {
                    prefetch_l2(b + w_stride);
                }
                Unit unit;
                T::decode(b, unit);
                TANDEM_UNROLL
                for (int c = 0; c < C; ++c)
                    acc[c] = column<4>(unit, a + c * a_stride + i * 4 * kQ8_0Bytes, acc[c]);
            }
            if constexpr (T::kHalfUnits) {
                if (k % 128 != 0) {
                    Unit unit;
                    T::template decode<true>(row + n_units * T::kUnitBytes, unit);
                    TANDEM_UNROLL
                    for (int c = 0; c < C; ++c)
                        acc[c] = column<2>(unit, a_end + c * a_stride, acc[c]);
                }
            }
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) out[c * out_stride + r] = vaddvq_f32(acc[c]);
        }
    }
};

}  // namespace

void dot_q1_0(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<LowBitTile, Q1_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}
void dot_q2_0(TANDEM_DOT_TILE_PARAMS) {
    for_tiles<LowBitTile, Q2_0>(k, w, w_stride, n_rows, a, a_stride, n_cols, out, out_stride);
}

}  // namespace tandem::TANDEM_VARIANT_NS
