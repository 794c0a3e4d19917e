// A token's MoE output: its routed experts' outputs summed with their weights, in route order.
// Written once for the two kernels that compute it, so that they give the same bits: the weighted
// sum (moe_routing.cu) and the fused residual norm that takes the sum as its residual where the
// layer's output is read only there (fused_norm.cu: one launch less a decode layer).
#pragma once

#include "cuda/moe_routing.h"
#include "cuda/vector_access.cuh"

namespace tandem::cuda {

// acc = Σ_i w_i · y[t·k + i][c .. c + N - 1] over token t's routes i with expert >= 0, then
// + extra[t][c ..] where given.
template <int N>
__device__ __forceinline__ void routed_sum(const RoutedRows& s, int64_t t, int64_t c,
                                           float (&acc)[N]) {
#pragma unroll
    for (int n = 0; n < N; ++n) acc[n] = 0.0f;
    for (int i = 0; i < s.top_k; ++i) {
        const int64_t j = t * s.top_k + i;
        const Route r = s.routes[j];
        if (r.expert < 0) continue;
        float y[N];
        load_run(s.y + j * s.stride + c, y);
#pragma unroll
        for (int n = 0; n < N; ++n) acc[n] = fmaf(r.weight, y[n], acc[n]);
    }
    if (s.extra != nullptr) {
        float e[N];
        load_run(s.extra + t * s.extra_stride + c, e);
#pragma unroll
        for (int n = 0; n < N; ++n) acc[n] += e[n];
    }
}

}  // namespace tandem::cuda
