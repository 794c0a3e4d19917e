// The gated delta rule's step (kernel_table.h, DeltaRuleStepFn) over a given f32 dot tile:
// compiled by each variant with its flags (variant/delta_rule.cpp: its vector width, its fused
// multiply-add) and by the reference table. `static`: each includer keeps its own copy, never
// one that another's flags built. The element-wise passes are written in the compiler's vector
// types: at the -O2 the project builds with, GCC leaves loops of a run-time length scalar (the
// passes over a head's state were a fifth of a qwen3.5 prompt on a Zen 4). Each element gets the
// same operations whatever the vector width, so a variant's results do not depend on it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.h"

namespace tandem {

static inline void delta_rule_loops(DotTileFn dot, float* __restrict M, int S,
                                    const float* __restrict q, const float* __restrict k,
                                    const float* __restrict v, float decay, float beta, float scale,
                                    float* __restrict out, float* __restrict delta) {
#if defined(__AVX512F__)
    constexpr int kLanes = 16;
#elif defined(__AVX__)
    constexpr int kLanes = 8;
#else
    constexpr int kLanes = 4;  // SSE2, NEON
#endif
    typedef float Vec __attribute__((vector_size(sizeof(float) * kLanes)));
    const auto load = [](const float* p) {
        Vec x;
        __builtin_memcpy(&x, p, sizeof x);
        return x;
    };
    const auto store = [](float* p, Vec x) { __builtin_memcpy(p, &x, sizeof x); };

    const int64_t n = int64_t{S} * S;
    int64_t e = 0;
    for (; e + kLanes <= n; e += kLanes) store(M + e, load(M + e) * decay);
    for (; e < n; ++e) M[e] *= decay;

    const size_t row_bytes = sizeof(float) * static_cast<size_t>(S);
    const auto rows_times = [&](const float* x, float* y) {
        dot(S, reinterpret_cast<const uint8_t*>(M), row_bytes, S,
            reinterpret_cast<const uint8_t*>(x), row_bytes, 1, y, 1);
    };
    rows_times(k, delta);  // delta[j] = state[:, j] · k
    for (int j = 0; j < S; ++j) delta[j] = (v[j] - delta[j]) * beta;
    for (int j = 0; j < S; ++j) {
        float* __restrict row = M + int64_t{j} * S;
        const float d = delta[j];
        int i = 0;
        for (; i + kLanes <= S; i += kLanes) store(row + i, load(row + i) + load(k + i) * d);
        for (; i < S; ++i) row[i] += k[i] * d;
    }
    rows_times(q, out);
    for (int j = 0; j < S; ++j) out[j] *= scale;
}

}  // namespace tandem
