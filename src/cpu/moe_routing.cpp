// Expert routing of MoE models.
#include "cpu/moe_routing.h"

#include <algorithm>
#include <cmath>

#include "cpu/elementwise.h"

namespace tandem {
namespace {
constexpr int kMaxTopK = 4096;
}  // namespace

void route_experts(const RoutingParams& params, float* logits, Route* routes) {
    if (params.gating == ExpertGating::kSoftmax) {
        softmax(logits, params.n_expert);
    } else if (params.gating == ExpertGating::kSigmoid) {
        for (int e = 0; e < params.n_expert; ++e) logits[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    }
    // Top-k by probability, best first; among equal probabilities the lower id first.
    for (int j = 0; j < params.top_k; ++j) routes[j] = {-1, -1.0f};
    for (int e = 0; e < params.n_expert; ++e) {
        const float p = logits[e];
        int pos = params.top_k;
        while (pos > 0 && (routes[pos - 1].expert < 0 || routes[pos - 1].weight < p)) --pos;
        if (pos == params.top_k) continue;
        for (int j = params.top_k - 1; j > pos; --j) routes[j] = routes[j - 1];
        routes[pos] = {e, p};
    }
    if (params.gating == ExpertGating::kSoftmaxSelected) {
        float w[kMaxTopK];
        for (int j = 0; j < params.top_k; ++j) w[j] = routes[j].weight;
        softmax(w, params.top_k);
        for (int j = 0; j < params.top_k; ++j) routes[j].weight = w[j];
    }
    if (params.normalize) {
        float sum = 0.0f;
        for (int j = 0; j < params.top_k; ++j) sum += routes[j].weight;
        sum = std::max(sum, 6.103515625e-5f);
        for (int j = 0; j < params.top_k; ++j) routes[j].weight /= sum;
    }
    if (params.scale != 1.0f && params.scale != 0.0f) {
        for (int j = 0; j < params.top_k; ++j) routes[j].weight *= params.scale;
    }
}

}  // namespace tandem
