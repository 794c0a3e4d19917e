// Expert routing as llama.cpp's build_moe_ffn does it: the gating function over the router
// logits, the top-k experts by score (best first), optionally renormalised to sum to one,
// optionally scaled.
#pragma once

#include "cpu/moe_layer.h"

namespace tandem {

// How router logits become expert weights (llama.cpp's llama_expert_gating_func_type).
enum class ExpertGating {
    kSoftmax,          // softmax over all experts, top-k of the probabilities
    kSoftmaxSelected,  // top-k of the raw logits, then softmax over the k chosen (gpt-oss)
    kSigmoid,          // sigmoid per expert, top-k
};

struct RoutingParams {
    int n_expert = 0;
    int top_k = 0;
    ExpertGating gating = ExpertGating::kSoftmax;
    bool normalize = false;  // divide the chosen weights by their sum (clamped below at 2^-14)
    float scale = 1.0f;      // expert_weights_scale
};

// logits: n_expert router outputs (overwritten with the gate's scores); routes: top_k entries.
void route_experts(const RoutingParams& params, float* logits, Route* routes);

}  // namespace tandem
