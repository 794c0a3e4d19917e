// A token's MoE output: its routed experts' outputs summed with their weights, in route order.
// Written once for the two kernels that compute it, so that they give the same bits: the weighted
// sum (moe_routing.cu) and the fused residual norm that takes the sum as its residual where the
// layer's output is read only there (fused_norm.cu: one launch less a decode layer).
#pragma once

#include "cuda/moe_routing.h"
#include "cuda/vector_access.cuh"

namespace tandem::cuda {

// acc = Σ_i w_i · y[t·k + i][c .. c + N - 1] over token t's routes i with expert >= 0, then
// + extra[t][c ..] where given. kAtOnce routes' loads go out together, then their rows', where a
// loop of one route at a time waited for two loads a route; the products add in route order all
// the same. The rows in flight take kAtOnce · N registers.
template <int kAtOnce = 8, int N>
__device__ __forceinline__ void routed_sum(const RoutedRows& s, int64_t t, int64_t c,
                                           float (&acc)[N]) {
#pragma unroll
    for (int n = 0; n < N; ++n) acc[n] = 0.0f;
    for (int i0 = 0; i0 < s.top_k; i0 += kAtOnce) {
        const int64_t j0 = t * s.top_k + i0;
        Route r[kAtOnce];
#pragma unroll
        for (int i = 0; i < kAtOnce; ++i)
            r[i] = i0 + i < s.top_k ? s.routes[j0 + i] : Route{-1, 0.0f};
        float y[kAtOnce][N];
#pragma unroll
        for (int i = 0; i < kAtOnce; ++i) {
            if (r[i].expert >= 0) load_run(s.y + (j0 + i) * s.stride + c, y[i]);
        }
#pragma unroll
        for (int i = 0; i < kAtOnce; ++i) {
            if (r[i].expert < 0) continue;
#pragma unroll
            for (int n = 0; n < N; ++n) acc[n] = fmaf(r[i].weight, y[i][n], acc[n]);
        }
    }
    if (s.extra != nullptr) {
        float e[N];
        load_run(s.extra + t * s.extra_stride + c, e);
#pragma unroll
        for (int n = 0; n < N; ++n) acc[n] += e[n];
    }
}

}  // namespace tandem::cuda
