// SIMD activation quantizers: f32 rows to q8_0, q8_1, q8_K, f16, bf16 and f32, bit-identical
// to the format table's references (which match ggml): the same float operations in the same
// order per value, rounding to nearest even (vcvtps2dq / vcvtps2ph under the default MXCSR).
// They run once per activation row, so 256-bit code serves every x86 variant.
#include <cstring>

#include "kernels/variant/kernel_decls.h"
#include "kernels/variant/q8_rows.h"
#include "kernels/variant/simd.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

using simd::hsum_i32;

inline __m256 abs_ps(__m256 x) {
    return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}
// Max over lanes; a NaN lane never wins (vmaxps returns its second operand then), as fmax.
inline float hmax(__m256 m) {
    __m128 x = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    x = _mm_max_ps(_mm_movehl_ps(x, x), x);
    x = _mm_max_ss(_mm_movehdup_ps(x), x);
    return _mm_cvtss_f32(x);
}
inline uint16_t to_fp16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffff) > 0x7f800000)
        return static_cast<uint16_t>((bits >> 16 & 0x8000) | 0x7e00);
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
// Four vectors of 8 int32 (values -128..127) to 32 int8 in order.
inline __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One 32-value block as ggml's AVX quantize_row_q8_0 / q8_1: d = amax / 127, q = round(x * 127 /
// amax). Writes the fp16 d and the qs; returns d, and the sum of q through *sum.
float q8_block(const float* x, uint8_t* d_out, int8_t* qs, int* sum) {
    __m256 v[4], amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        amax = _mm256_max_ps(abs_ps(v[i]), amax);
    }
    const float max = hmax(amax);
    const float d = max / 127.0f;
    const float id = max != 0 ? 127.0f / max : 0.0f;
    const uint16_t dh = to_fp16(d);
    std::memcpy(d_out, &dh, 2);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i8(q[0], q[1], q[2], q[3]));
    if (sum != nullptr) {
        *sum =
            hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
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

// q8_K as ggml's quantize_row_q8_K: the first value of largest magnitude maps to -127 exactly
// (iscale = -127 / max), q = min(127, round(iscale * x)), d = 1 / iscale, bsums per 16 values;
// an all-zero block is all zeros.
void quantize_q8_K(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < k / 256; ++i) {
        const float* xb = x + i * 256;
        uint8_t* b = out + i * 292;
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < 32; ++j)
            amax = _mm256_max_ps(abs_ps(_mm256_loadu_ps(xb + 8 * j)), amax);
        const float a = hmax(amax);
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
        const __m256 vs = _mm256_set1_ps(iscale);
        int16_t bsums[16];
        for (int g = 0; g < 8; ++g) {  // 32 values at a time
            __m256i q[4];
            for (int j = 0; j < 4; ++j) {
                const __m256 p = _mm256_mul_ps(vs, _mm256_loadu_ps(xb + 32 * g + 8 * j));
                q[j] = _mm256_min_epi32(_mm256_cvtps_epi32(p), _mm256_set1_epi32(127));
            }
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + 4 + 32 * g),
                                pack_i8(q[0], q[1], q[2], q[3]));
            bsums[2 * g] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
            bsums[2 * g + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
        }
        const float d = 1.0f / iscale;
        std::memcpy(b, &d, 4);
        std::memcpy(b + 260, bsums, sizeof(bsums));
    }
}

void quantize_f32(const float* x, void* dst, int64_t k) {
    std::memcpy(dst, x, static_cast<size_t>(k) * 4);
}

// vcvtps2ph rounds to nearest even like the reference; only NaNs differ (the reference makes
// them 0x7e00 with the sign), so a block holding one goes through the scalar path.
void quantize_f16(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) == 0) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i),
                             _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
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
// (vcvtneps2bf16 would flush subnormals, so integer arithmetic it is.)
void quantize_bf16(const float* x, void* dst, int64_t k) {
    auto* out = static_cast<uint8_t*>(dst);
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        __m256i r[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8 * h));
            const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
            const __m256i rounded = _mm256_srli_epi32(
                _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
            const __m256i nan = _mm256_cmpgt_epi32(
                _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
            const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
            r[h] = _mm256_blendv_epi8(rounded, quiet, nan);
        }
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), packed);
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
