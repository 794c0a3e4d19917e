// The device side of an MoE layer's routing, as cpu/moe_routing.h computes it: softmax or sigmoid
// over the router logits and the top-k experts per token (or gpt-oss's top-k of the logits and
// softmax over the chosen), chosen on the scores plus a selection bias and among the best groups
// where the model asks (DeepSeek-V3); the routes grouped by expert for the tiled products; and
// the weighted sum of the experts' outputs per token, in route order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cpu/moe_layer.h"
#include "cpu/moe_routing.h"
#include "cuda/elementwise.h"
#include "cuda/matmul.h"

namespace tandem::cuda {

// The most experts a layer may have on the GPU: route_topk keeps a token's probabilities in its
// warp's registers, 32 a lane at most. The backend refuses larger models when it loads them.
constexpr int kMaxRoutedExperts = 32 * 32;
// The most experts a token may use: route_topk keeps route i in lane i of the token's warp.
constexpr int kMaxRoutesPerToken = 32;

// routes[t · top_k + i] = the i-th best expert of token t with its weight, as route_experts()
// gives them: every gating, the normalisation and scale, groups (params.n_groups > 1: only the
// params.n_groups_used groups whose two best selection scores sum highest compete; at least
// top_k experts must be in them), and selection_bias (a device array of n_expert values, or
// nullptr) added to the scores for the choice only, the weights staying the unbiased scores.
// probs (scratch of logits' shape, may be logits itself) receives the unbiased scores (the
// probabilities, sigmoids; kSoftmaxSelected: the logits). n_expert <= kMaxRoutedExperts,
// 1 <= top_k <= kMaxRoutesPerToken.
void route_topk(DeviceRows logits, DeviceRows probs, const RoutingParams& params, Route* routes,
                cudaStream_t stream, const float* selection_bias = nullptr);

// Device arrays for grouping up to max_routes routes of n_expert experts.
struct GroupBuffers {
    int32_t* sorted = nullptr;       // [max_routes]
    int32_t* tile_expert = nullptr;  // [max_tiles]
    int32_t* tile_begin = nullptr;
    int32_t* tile_end = nullptr;
    int32_t* n_tiles = nullptr;  // [1]
    int max_routes = 0;
    int max_tiles = 0;  // max_routes / kTileTokens + n_expert
};
int max_group_tiles(int max_routes, int n_expert);

// Sorts the routes (expert >= 0) by expert into g.sorted and cuts every expert's routes into
// tiles of at most kTileTokens. One block; the order within an expert is not fixed, which no
// product depends on (each output row is computed on its own).
ExpertGroups group_routes(const Route* routes, int n_routes, int n_expert, const GroupBuffers& g,
                          cudaStream_t stream);

// The experts' outputs of a batch's routes: row t·top_k + i (stride floats apart) is route i of
// token t. With `extra`, row t of it (extra_stride floats apart) is added to token t's sum after
// its routes: hybrid's CPU executor's sum of the misses.
struct RoutedRows {
    const float* y = nullptr;
    int64_t stride = 0;
    const Route* routes = nullptr;
    int top_k = 0;
    const float* extra = nullptr;
    int64_t extra_stride = 0;
};

// out[t] = Σ_i routes[t·k+i].weight · y[t·k+i], i in route order, over routes with expert >= 0,
// then + extra[t].
void moe_weighted_sum(const RoutedRows& y, DeviceRows out, cudaStream_t stream);

}  // namespace tandem::cuda
