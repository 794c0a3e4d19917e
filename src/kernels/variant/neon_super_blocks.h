// What the NEON super-block tiles (neon_kquants.cpp, neon_iquants.cpp) share: the scaled integer
// sum of one decoded super-block against one column, and the row loop that decodes each
// super-block once and hands it to every column. aarch64 only.
#pragma once

#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS {

constexpr int kQ8KBytes = 292;  // q8_K: float d, int8 qs[256], int16 bsums[16]

// Sums of sub-blocks 4g..4g+3 (of kSub values each) of the decoded weights w.q (16 registers of
// 16 bytes) against the activation bytes q.
template <int kSub, typename Decoded>
TANDEM_ALWAYS_INLINE int32x4_t group_sums(const Decoded& w, const int8_t* q, int g) {
    const int32x4_t z = vdupq_n_s32(0);
    int32x4_t t[4];
    TANDEM_UNROLL
    for (int i = 0; i < 4; ++i) {
        if constexpr (kSub == 16) {
            const int k = 4 * g + i;
            t[i] = vdotq_s32(z, w.q[k], vld1q_s8(q + 16 * k));
        } else {
            const int k = 8 * g + 2 * i;
            t[i] = vdotq_s32(vdotq_s32(z, w.q[k], vld1q_s8(q + 16 * k)), w.q[k + 1],
                             vld1q_s8(q + 16 * k + 16));
        }
    }
    return vpaddq_s32(vpaddq_s32(t[0], t[1]), vpaddq_s32(t[2], t[3]));
}

// The exact sum of sub-block sums times their int32 scales w.sc (four per register).
template <int kSub, typename Decoded>
TANDEM_ALWAYS_INLINE int32_t scaled_sum(const Decoded& w, const int8_t* q) {
    constexpr int kGroups = 256 / (4 * kSub);
    int32x4_t acc = vmulq_s32(group_sums<kSub>(w, q, 0), w.sc[0]);
    TANDEM_UNROLL
    for (int g = 1; g < kGroups; ++g) acc = vmlaq_s32(acc, group_sums<kSub>(w, q, g), w.sc[g]);
    return vaddvq_s32(acc);
}

// One row at a time (matvec and small matmul alike): each super-block decoded once
// (T::decode(block, Decoded&)), then column(decoded, q8_K block, acc) for each of the C columns.
template <typename T, typename Decoded, int C, typename Column>
TANDEM_ALWAYS_INLINE void super_block_rows(int64_t k, const uint8_t* w, size_t w_stride,
                                           int n_rows, const uint8_t* a, size_t a_stride,
                                           float* out, size_t out_stride, Column&& column) {
    for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = w + r * w_stride;
        float acc[C];
        TANDEM_UNROLL
        for (auto& x : acc) x = 0;
        for (int64_t i = 0; i < k / 256; ++i) {
            const uint8_t* b = row + i * T::kBytes;
            if constexpr (C == 1) {
                prefetch_next_page(b, T::kBytes);
            } else {
                for (int line = 0; line < T::kBytes; line += 64) prefetch_l2(b + w_stride + line);
            }
            Decoded dec;
            T::decode(b, dec);
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) column(dec, a + c * a_stride + i * kQ8KBytes, acc[c]);
        }
        TANDEM_UNROLL
        for (int c = 0; c < C; ++c) out[c * out_stride + r] = acc[c];
    }
}

}  // namespace tandem::TANDEM_VARIANT_NS
