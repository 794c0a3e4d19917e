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
    // Group-limited routing (n_groups > 1): the experts are n_groups consecutive groups; only
    // the n_groups_used groups with the largest sums of their two best selection scores compete.
    int n_groups = 0;
    int n_groups_used = 0;
};

// logits: n_expert router outputs (overwritten with the gate's scores); routes: top_k entries.
// selection_bias (n_expert values, or nullptr) is added to the scores for choosing the experts
// only; their weights are the unbiased scores (DeepSeek-V3's exp_probs_b).
void route_experts(const RoutingParams& params, float* logits, Route* routes,
                   const float* selection_bias = nullptr);

}  // namespace tandem
