// Expert routing of MoE models.
#include "cpu/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/elementwise.h"

namespace tandem {
namespace {
constexpr int kMaxTopK = 4096;
constexpr int kMaxExperts = 4096;

float chosen_score(const float* select, const Route& r) { return select[r.expert]; }
}  // namespace

void route_experts(const RoutingParams& params, float* logits, Route* routes, const float* selection_bias) {
    const int n = params.n_expert;
    if (params.gating == ExpertGating::kSoftmax) {
        softmax(logits, n);
    } else if (params.gating == ExpertGating::kSigmoid) {
        for (int e = 0; e < n; ++e) logits[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    }
    // The scores that choose: biased (exp_probs_b) and group-masked copies when needed.
    float select_buffer[kMaxExperts];
    const float* select = logits;
    if (selection_bias != nullptr || params.n_groups > 1) {
        for (int e = 0; e < n; ++e) select_buffer[e] = selection_bias ? logits[e] + selection_bias[e] : logits[e];
        select = select_buffer;
    }
    if (params.n_groups > 1) {
        // A group's score: the sum of its two best scores; the best n_groups_used groups stay.
        const int per_group = n / params.n_groups;
        float group_score[kMaxExperts];
        for (int g = 0; g < params.n_groups; ++g) {
            const float* v = select_buffer + g * per_group;
            float best = -std::numeric_limits<float>::infinity(), second = -std::numeric_limits<float>::infinity();
            for (int i = 0; i < per_group; ++i) {
                if (v[i] > best) {
                    second = best;
                    best = v[i];
                } else if (v[i] > second) {
                    second = v[i];
                }
            }
            group_score[g] = best + second;
        }
        bool keep[kMaxExperts] = {};
        for (int j = 0; j < params.n_groups_used; ++j) {
            int pick = -1;
            for (int g = 0; g < params.n_groups; ++g) {
                if (!keep[g] && (pick < 0 || group_score[g] > group_score[pick])) pick = g;
            }
            keep[pick] = true;
        }
        for (int g = 0; g < params.n_groups; ++g) {
            if (keep[g]) continue;
            for (int i = 0; i < per_group; ++i) select_buffer[g * per_group + i] = -std::numeric_limits<float>::infinity();
        }
    }
    // Top-k by score, best first; among equal scores the lower id first.
    for (int j = 0; j < params.top_k; ++j) routes[j] = {-1, -1.0f};
    for (int e = 0; e < n; ++e) {
        const float p = select[e];
        int pos = params.top_k;
        while (pos > 0 && (routes[pos - 1].expert < 0 || chosen_score(select, routes[pos - 1]) < p)) --pos;
        if (pos == params.top_k) continue;
        for (int j = params.top_k - 1; j > pos; --j) routes[j] = routes[j - 1];
        routes[pos] = {e, p};
    }
    // The weights: the unbiased scores of the chosen experts.
    for (int j = 0; j < params.top_k; ++j) {
        if (routes[j].expert >= 0) routes[j].weight = logits[routes[j].expert];
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
