// NEON activation quantizers (the aarch64 counterpart of simd_quantize.cpp): f32 rows to q8_0,
// q8_1, q8_K, f16, bf16 and f32, bit-identical to the format table's references: the same float
// operations in the same order per value, rounding to nearest even (fcvtns, and fcvtn under the
// default FPCR), maxima with fmaxnm (a NaN never wins, as the reference's comparison).
#include <cstring>

#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/q8_rows.h"
#include "kernels/variant/simd.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

// binary32 -> binary16 bits, nearest even; a NaN becomes 0x7e00 with its sign, as the reference
// (fcvtn would keep payload bits).
inline uint16_t to_fp16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffff) > 0x7f800000)
        return static_cast<uint16_t>((bits >> 16 & 0x8000) | 0x7e00);
    return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0);
}
// Largest |x| of n (a multiple of 4) values; 0 when all are 0 or NaN.
inline float max_abs(const float* x, int n) {
    float32x4_t m = vdupq_n_f32(0);
    for (int i = 0; i < n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
    return vmaxnmvq_f32(m);
}
// Four vectors of int32 (values -128..127) to 16 int8 in order.
inline int8x16_t narrow(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
    const int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
    return vcombine_s8(vmovn_s16(ab), vmovn_s16(cd));
}

// One 32-value block: d = amax / 127, q = round(x * (127 / amax)). Writes the fp16 d and the
// qs; returns d, and the sum of q through *sum.
float q8_block(const float* x, uint8_t* d_out, int8_t* qs, int* sum) {
    const float max = max_abs(x, 32);
    const float d = max / 127.0f;
    const float id = max != 0 ? 127.0f / max : 0.0f;
    const uint16_t dh = to_fp16(d);
    std::memcpy(d_out, &dh, 2);
    const float32x4_t vid = vdupq_n_f32(id);
    int32x4_t q[8];
    for (int i = 0; i < 8; ++i) q[i] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + 4 * i), vid));
    vst1q_s8(qs, narrow(q[0], q[1], q[2], q[3]));
    vst1q_s8(qs + 16, narrow(q[4], q[5], q[6], q[7]));
    if (sum != nullptr) {
        const int32x4_t s = vaddq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])),
                                      vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])));
        *sum = vaddvq_s32(s);
    }
    return d;
}

}  // namespace

void quantize_q8_0(const float* x, void* dst, int64_t k) {
    q8_0_row<q8_block>(x, dst, k);
}

void quantize_q8_1(const float* x, void* dst, int64_t k) {
    q8_1_row<q8_block, to_fp16>(x, dst, k);
}

// q8_K: the first value of largest magnitude maps to -127 exactly (iscale = -127 / max),
// q = min(127, round(iscale * x)), d = 1 / iscale, bsums per 16 values; an all-zero block is
// all zeros.
void quantize_q8_K(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < k / 256; ++i) {
        const float* xb = x + i * 256;
        uint8_t* b = out + i * 292;
        const float a = max_abs(xb, 256);
        if (a == 0) {  // (also when every value is NaN: the reference never picks a max then)
            std::memset(b, 0, 292);
            continue;
        }
        float max = 0;
        for (int j = 0; j < 256; ++j) {
            if (xb[j] == a || xb[j] == -a) {
                max = xb[j];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const float32x4_t vs = vdupq_n_f32(iscale);
        const int32x4_t top = vdupq_n_s32(127);
        int16_t bsums[16];
        for (int g = 0; g < 16; ++g) {  // 16 values at a time
            int32x4_t q[4];
            for (int j = 0; j < 4; ++j) {
                const float32x4_t p = vmulq_f32(vs, vld1q_f32(xb + 16 * g + 4 * j));
                q[j] = vminq_s32(vcvtnq_s32_f32(p), top);
            }
            vst1q_s8(reinterpret_cast<int8_t*>(b + 4 + 16 * g), narrow(q[0], q[1], q[2], q[3]));
            bsums[g] = static_cast<int16_t>(
                vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3]))));
        }
        const float d = 1.0f / iscale;
        std::memcpy(b, &d, 4);
        std::memcpy(b + 260, bsums, sizeof(bsums));
    }
}

void quantize_f32(const float* x, void* dst, int64_t k) {
    std::memcpy(dst, x, static_cast<size_t>(k) * 4);
}

// fcvtn rounds to nearest even like the reference; only NaNs differ, so a group of 8 holding
// one goes through the scalar path.
void quantize_f16(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
        const uint32x4_t ordered = vandq_u32(vceqq_f32(v0, v0), vceqq_f32(v1, v1));
        if (vminvq_u32(ordered) != 0) {
            const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(v0), v1);
            vst1q_u8(out + 2 * i, vreinterpretq_u8_f16(h));
        } else {
            for (int j = 0; j < 8; ++j) {
                const uint16_t h = to_fp16(x[i + j]);
                std::memcpy(out + 2 * (i + j), &h, 2);
            }
        }
    }
    for (; i < k; ++i) {
        const uint16_t h = to_fp16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
    }
}

// Round to nearest even on the top 16 bits; NaNs stay NaN (quiet bit set), as the reference.
// (bfcvt would flush subnormals, so integer arithmetic it is.)
void quantize_bf16(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        uint16x4_t r[2];
        for (int h = 0; h < 2; ++h) {
            uint32x4_t u;
            std::memcpy(&u, x + i + 4 * h, 16);
            const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
            const uint32x4_t rounded =
                vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), lsb), 16);
            const uint32x4_t nan =
                vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
            const uint32x4_t quiet = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(64));
            r[h] = vmovn_u32(vbslq_u32(nan, quiet, rounded));
        }
        vst1q_u8(out + 2 * i, vreinterpretq_u8_u16(vcombine_u16(r[0], r[1])));
    }
    for (; i < k; ++i) {
        uint32_t u;
        std::memcpy(&u, x + i, 4);
        const uint16_t h = (u & 0x7fffffff) > 0x7f800000
                               ? static_cast<uint16_t>((u >> 16) | 64)
                               : static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
        std::memcpy(out + 2 * i, &h, 2);
    }
}

}  // namespace tandem::TANDEM_VARIANT_NS
