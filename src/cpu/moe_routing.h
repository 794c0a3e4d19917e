// Expert routing as llama.cpp's build_moe_ffn does it for softmax-gated models: softmax over
// the router logits, the top-k experts by probability (best first), optionally renormalised to
// sum to one, optionally scaled.
#pragma once

#include "cpu/moe_layer.h"

namespace tandem {

struct RoutingParams {
    int n_expert = 0;
    int top_k = 0;
    bool normalize = false;  // divide the chosen weights by their sum (clamped below at 2^-14)
    float scale = 1.0f;      // expert_weights_scale
};

// logits: n_expert router outputs (overwritten with the probabilities); routes: top_k entries.
void route_experts(const RoutingParams& params, float* logits, Route* routes);

}  // namespace tandem
