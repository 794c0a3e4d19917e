// MoE routing on the device.
#include "cuda/moe_routing.h"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/early_launch.cuh"
#include "cuda/routed_sum.cuh"

namespace tandem::cuda {
namespace {

constexpr int kRouteWarps = 4;  // tokens per block of route_topk

// An order-preserving key of a score for the warp's integer reductions: a larger score has a
// larger key, -0 and +0 the same one; -inf (taken) and NaN key 0, never chosen (as `c > best`
// from -inf never chose them).
__device__ __forceinline__ unsigned score_key(float x) {
    if (!(x > -INFINITY)) return 0u;
    const unsigned b = __float_as_uint(x == 0.0f ? 0.0f : x);
    return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}

// Warp per token: softmax of the router logits (max-subtracted; kSoftmaxSelected: the logits
// themselves) or their sigmoids, then top_k rounds of a warp argmax (the larger score first, the
// lower id among equals), then kSoftmaxSelected's softmax over the chosen. Lane l holds the
// scores of experts l, l + 32, ... in registers (kPerLane of them), so a round is a scan of
// registers and two single-instruction warp reductions of integer keys (score_key). kSelect (a
// selection bias or groups, DeepSeek-V3): the rounds choose on selection scores (the scores plus
// the bias, those of experts outside the best groups -inf) held beside the scores, which stay the
// weights; the group scores are worked out in the warp's share of the launch's shared memory.
template <int kPerLane, bool kSelect>
__global__ void route_topk_kernel(DeviceRows logits, DeviceRows probs, RoutingParams p,
                                  const float* bias, Route* routes) {
    extern __shared__ float route_shared[];
    wait_for_previous_kernel();
    constexpr float kTaken = -INFINITY;  // below every score: never chosen
    const int t = blockIdx.x * kRouteWarps + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (t >= logits.rows) return;  // (the whole warp)
    const float* in = logits.data + t * logits.stride;
    float* x = probs.data + t * probs.stride;
    float v[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        v[i] = e < p.n_expert ? in[e] : kTaken;
    }
    if (p.gating == ExpertGating::kSoftmax) {
        float m = -FLT_MAX;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) m = fmaxf(m, v[i]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        double sum = 0.0;  // in f64, as the CPU's softmax
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            if (lane + 32 * i < p.n_expert) {
                v[i] = expf(v[i] - m);
                sum += v[i];
            }
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const float inv = static_cast<float>(1.0 / sum);
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            if (lane + 32 * i < p.n_expert) v[i] *= inv;
        }
    } else if (p.gating == ExpertGating::kSigmoid) {
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            if (lane + 32 * i < p.n_expert) v[i] = 1.0f / (1.0f + expf(-v[i]));
        }
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        if (e < p.n_expert) x[e] = v[i];
    }

    [[maybe_unused]] float s[kPerLane];  // kSelect: the selection scores
    if constexpr (kSelect) {
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int e = lane + 32 * i;
            s[i] = e < p.n_expert ? (bias != nullptr ? v[i] + bias[e] : v[i]) : kTaken;
        }
        if (p.n_groups > 1) {
            // A group's score: the sum of its two best selection scores (route_experts' scan);
            // the n_groups_used best groups stay (the lower group first among equals).
            const int G = p.n_groups, per_group = p.n_expert / G;
            float* sel = route_shared + (threadIdx.x / 32) * (p.n_expert + 2 * G);
            float* group_score = sel + p.n_expert;
            float* kept = group_score + G;
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) {
                const int e = lane + 32 * i;
                if (e < p.n_expert) sel[e] = s[i];
            }
            __syncwarp();
            for (int g = lane; g < G; g += 32) {
                float best = -INFINITY, second = -INFINITY;
                for (int i = 0; i < per_group; ++i) {
                    const float y = sel[g * per_group + i];
                    if (y > best) {
                        second = best;
                        best = y;
                    } else if (y > second) {
                        second = y;
                    }
                }
                group_score[g] = best + second;
                kept[g] = 0.0f;
            }
            __syncwarp();
            for (int r = 0; r < p.n_groups_used; ++r) {
                float best = -INFINITY;
                int best_g = -1;
                for (int g = lane; g < G; g += 32) {
                    if (kept[g] == 0.0f && (best_g < 0 || group_score[g] > best))
                        best = group_score[g], best_g = g;
                }
                for (int o = 16; o > 0; o >>= 1) {
                    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
                    const int og = __shfl_xor_sync(0xffffffffu, best_g, o);
                    if (og >= 0 && (best_g < 0 || ob > best || (ob == best && og < best_g)))
                        best = ob, best_g = og;
                }
                if (lane == 0 && best_g >= 0) kept[best_g] = 1.0f;
                __syncwarp();
            }
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) {
                const int e = lane + 32 * i;
                if (e < p.n_expert && kept[e / per_group] == 0.0f) s[i] = kTaken;
            }
        }
    }

    // Round k: the largest key of the warp and the lowest expert that has it (each lane offers
    // its first), two warp reductions; the lane holding it gives its weight and marks it taken,
    // and lane k keeps the route (top_k <= 32).
    Route route{-1, 0.0f};
    for (int k = 0; k < p.top_k; ++k) {
        unsigned key = 0u;
        int mine = 0;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            unsigned c;
            if constexpr (kSelect) {
                c = score_key(s[i]);
            } else {
                c = score_key(v[i]);
            }
            if (c > key) key = c, mine = i;  // ascending e: the first of equals
        }
        const unsigned top = __reduce_max_sync(0xffffffffu, key);
        const unsigned lowest =
            __reduce_min_sync(0xffffffffu, top != 0u && key == top ? lane + 32u * mine : ~0u);
        const int best_e = lowest == ~0u ? -1 : static_cast<int>(lowest);
        const int owner = best_e >= 0 ? best_e % 32 : 0;
        float weight = kSelect ? 0.0f : kTaken;  // no expert left: as the comparisons left it
        if (best_e >= 0 && lane == owner) {
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) {
                if (i != mine) continue;
                weight = v[i];
                if constexpr (kSelect) {
                    s[i] = kTaken;
                } else {
                    v[i] = kTaken;
                }
            }
        }
        weight = __shfl_sync(0xffffffffu, weight, owner);
        if (lane == k) route = {best_e, weight};
    }
    // The weights, lane i holding route i: sums and maxima over the routes in route order (each
    // lane adds the same values in the same order, as the CPU's loops), so every bit is theirs.
    float w = route.weight;
    if (p.gating == ExpertGating::kSoftmaxSelected) {
        // The chosen logits: without a selection bias best first, route 0 holding their max.
        float m = __shfl_sync(0xffffffffu, w, 0);
        if constexpr (kSelect) {
            for (int i = 1; i < p.top_k; ++i) m = fmaxf(m, __shfl_sync(0xffffffffu, w, i));
        }
        w = expf(w - m);
        double sum = 0.0;
        for (int i = 0; i < p.top_k; ++i) sum += __shfl_sync(0xffffffffu, w, i);
        w *= static_cast<float>(1.0 / sum);
    }
    float chosen_sum = 0.0f;
    for (int i = 0; i < p.top_k; ++i) chosen_sum += __shfl_sync(0xffffffffu, w, i);
    const float norm = fmaxf(chosen_sum, 6.103515625e-5f);
    if (p.normalize) w /= norm;
    if (p.scale != 1.0f && p.scale != 0.0f) w *= p.scale;
    if (lane < p.top_k) routes[static_cast<int64_t>(t) * p.top_k + lane] = {route.expert, w};
}

// One block: count per expert, prefix sums and tiles (thread 0), then each route's place.
__global__ void group_routes_kernel(const Route* routes, int n_routes, int n_expert,
                                    GroupBuffers g) {
    extern __shared__ int32_t shared[];
    int32_t* count = shared;              // [n_expert]
    int32_t* cursor = shared + n_expert;  // [n_expert]
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) count[e] = 0;
    __syncthreads();
    for (int r = threadIdx.x; r < n_routes; r += blockDim.x) {
        const int e = routes[r].expert;
        if (e >= 0) atomicAdd(&count[e], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int offset = 0, tiles = 0;
        for (int e = 0; e < n_expert; ++e) {
            cursor[e] = offset;
            for (int b = 0; b < count[e]; b += kTileTokens) {
                g.tile_expert[tiles] = e;
                g.tile_begin[tiles] = offset + b;
                g.tile_end[tiles] = offset + count[e];
                ++tiles;
            }
            offset += count[e];
        }
        *g.n_tiles = tiles;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < n_routes; r += blockDim.x) {
        const int e = routes[r].expert;
        if (e >= 0) g.sorted[atomicAdd(&cursor[e], 1)] = r;
    }
}

__global__ void weighted_sum_kernel(RoutedRows y, DeviceRows out) {
    wait_for_previous_kernel();
    const int t = blockIdx.y;
    const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= out.cols) return;
    float acc[1];
    routed_sum(y, t, c, acc);
    out.data[t * out.stride + c] = acc[0];
}

}  // namespace

void route_topk(DeviceRows logits, DeviceRows probs, const RoutingParams& params, Route* routes,
                cudaStream_t stream, const float* selection_bias) {
    if (params.top_k < 1 || params.top_k > kMaxRoutesPerToken ||
        params.n_expert > kMaxRoutedExperts)
        check(cudaErrorInvalidValue, "route_topk: top-k or expert count past the GPU's routing");
    if (logits.rows == 0) return;
    const unsigned blocks = (logits.rows + kRouteWarps - 1) / kRouteWarps;
    const int per_lane = (params.n_expert + 31) / 32;  // <= 32: checked at load
    const bool groups = params.n_groups > 1;
    if (selection_bias == nullptr && !groups) {
        const auto kernel = per_lane <= 4    ? route_topk_kernel<4, false>
                            : per_lane <= 8  ? route_topk_kernel<8, false>
                            : per_lane <= 16 ? route_topk_kernel<16, false>
                                             : route_topk_kernel<32, false>;
        launch_early(kernel, blocks, 32 * kRouteWarps, 0, stream, "route_topk", logits, probs,
                     params, selection_bias, routes);
        return;
    }
    // A warp's selection scores, group scores and kept flags.
    const size_t shared =
        groups ? sizeof(float) * kRouteWarps * (params.n_expert + 2 * params.n_groups) : 0;
    const auto kernel = per_lane <= 4    ? route_topk_kernel<4, true>
                        : per_lane <= 8  ? route_topk_kernel<8, true>
                        : per_lane <= 16 ? route_topk_kernel<16, true>
                                         : route_topk_kernel<32, true>;
    launch_early(kernel, blocks, 32 * kRouteWarps, shared, stream, "route_topk", logits, probs,
                 params, selection_bias, routes);
}

int max_group_tiles(int max_routes, int n_expert) {
    return max_routes / kTileTokens + n_expert;
}

ExpertGroups group_routes(const Route* routes, int n_routes, int n_expert, const GroupBuffers& g,
                          cudaStream_t stream) {
    group_routes_kernel<<<1, 1024, sizeof(int32_t) * 2 * n_expert, stream>>>(routes, n_routes,
                                                                             n_expert, g);
    check_launch("group_routes");
    ExpertGroups out;
    out.sorted = g.sorted;
    out.tile_expert = g.tile_expert;
    out.tile_begin = g.tile_begin;
    out.tile_end = g.tile_end;
    out.n_tiles = g.n_tiles;
    out.max_tiles = max_group_tiles(n_routes, n_expert);
    return out;
}

void moe_weighted_sum(const RoutedRows& y, DeviceRows out, cudaStream_t stream) {
    if (out.rows == 0) return;
    const dim3 grid(static_cast<unsigned>((out.cols + 255) / 256), out.rows);
    launch_early(weighted_sum_kernel, grid, 256, 0, stream, "moe_weighted_sum", y, out);
}

}  // namespace tandem::cuda
