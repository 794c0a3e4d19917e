// The kernel functions of the variants: which weight types each implements, their signatures,
// and the baseline's (plain C++) functions that every variant's table starts from. Adding a type
// means one X() line below plus its function in a family file; a new variant lists its types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.h"

// clang-format off
// A DotTileFn's parameters (kernel_table.h).
#define TANDEM_DOT_TILE_PARAMS                                                              \
    int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,            \
        size_t a_stride, int n_cols, float* out, size_t out_stride

// Every weight type: X(function suffix, GgmlType enumerator without the k). The baseline
// variant defines dot_<suffix> for all of them.
#define TANDEM_WEIGHT_TYPES(X)                                                                \
    X(f32, F32) X(f16, F16) X(bf16, BF16) X(q4_0, Q4_0) X(q4_1, Q4_1) X(q5_0, Q5_0)           \
    X(q5_1, Q5_1) X(q8_0, Q8_0) X(q2_K, Q2_K) X(q3_K, Q3_K) X(q4_K, Q4_K) X(q5_K, Q5_K)       \
    X(q6_K, Q6_K) X(iq4_nl, IQ4_NL) X(iq4_xs, IQ4_XS) X(mxfp4, MXFP4) X(nvfp4, NVFP4)         \
    X(iq2_xxs, IQ2_XXS) X(iq2_xs, IQ2_XS) X(iq2_s, IQ2_S) X(iq3_xxs, IQ3_XXS) X(iq3_s, IQ3_S) \
    X(iq1_s, IQ1_S) X(iq1_m, IQ1_M) X(tq1_0, TQ1_0) X(tq2_0, TQ2_0) X(q1_0, Q1_0)            \
    X(q2_0, Q2_0)

// The weight types with SIMD kernels (simd_*.cpp, neon_*.cpp); the others use the baseline's.
// x86 and aarch64 have the same ones (today every type).
#define TANDEM_SIMD_WEIGHT_TYPES(X)                                                           \
    X(f32, F32) X(f16, F16) X(bf16, BF16) X(q4_0, Q4_0) X(q4_1, Q4_1) X(q5_0, Q5_0)           \
    X(q5_1, Q5_1) X(q8_0, Q8_0) X(q2_K, Q2_K) X(q3_K, Q3_K) X(q4_K, Q4_K) X(q5_K, Q5_K)       \
    X(q6_K, Q6_K) X(iq4_nl, IQ4_NL) X(iq4_xs, IQ4_XS) X(mxfp4, MXFP4) X(nvfp4, NVFP4)         \
    X(iq2_xxs, IQ2_XXS) X(iq2_xs, IQ2_XS) X(iq2_s, IQ2_S) X(iq3_xxs, IQ3_XXS) X(iq3_s, IQ3_S) \
    X(iq1_s, IQ1_S) X(iq1_m, IQ1_M) X(tq1_0, TQ1_0) X(tq2_0, TQ2_0) X(q1_0, Q1_0)            \
    X(q2_0, Q2_0)

// Activation formats: X(function suffix, GgmlType enumerator). Every variant defines
// quantize_<suffix>; the baseline's are the format table's reference quantizers.
#define TANDEM_ACTIVATION_TYPES(X) \
    X(f32, F32) X(f16, F16) X(bf16, BF16) X(q8_0, Q8_0) X(q8_1, Q8_1) X(q8_K, Q8_K)
// clang-format on

// DeltaRuleStepFn's parameters (kernel_table.h).
#define TANDEM_DELTA_RULE_PARAMS                                                              \
    float *M, int S, const float *q, const float *k, const float *v, float decay, float beta, \
        float scale, float *out, float *delta

namespace tandem::kernels_baseline {
#define TANDEM_DECLARE_DOT(name, id) void dot_##name(TANDEM_DOT_TILE_PARAMS);
TANDEM_WEIGHT_TYPES(TANDEM_DECLARE_DOT)
#undef TANDEM_DECLARE_DOT
void delta_rule_step(TANDEM_DELTA_RULE_PARAMS);
}  // namespace tandem::kernels_baseline

#if defined(TANDEM_VARIANT_NS) && !defined(TANDEM_VARIANT_BASELINE)
namespace tandem::TANDEM_VARIANT_NS {
#define TANDEM_DECLARE_DOT(name, id) void dot_##name(TANDEM_DOT_TILE_PARAMS);
TANDEM_SIMD_WEIGHT_TYPES(TANDEM_DECLARE_DOT)
#undef TANDEM_DECLARE_DOT
#define TANDEM_DECLARE_QUANTIZE(name, id) \
    void quantize_##name(const float* x, void* dst, int64_t k);
TANDEM_ACTIVATION_TYPES(TANDEM_DECLARE_QUANTIZE)
#undef TANDEM_DECLARE_QUANTIZE
void delta_rule_step(TANDEM_DELTA_RULE_PARAMS);
}  // namespace tandem::TANDEM_VARIANT_NS
#endif
