// Token sampling.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

#include "base/error.h"

namespace tandem {

void validate(const SamplingParams& p) {
    if (!std::isfinite(p.temperature) || p.temperature < 0.0f) fail("temperature {} must be >= 0", p.temperature);
    if (!std::isfinite(p.top_p) || p.top_p <= 0.0f || p.top_p > 1.0f) fail("top_p {} must be in (0, 1]", p.top_p);
    if (!std::isfinite(p.min_p) || p.min_p < 0.0f || p.min_p > 1.0f) fail("min_p {} must be in [0, 1]", p.min_p);
    if (p.top_k < 0) fail("top_k {} must be >= 0", p.top_k);
    if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0.0f) {
        fail("repeat_penalty {} must be > 0", p.repeat_penalty);
    }
    if (p.repeat_last_n < 0) fail("repeat_last_n {} must be >= 0", p.repeat_last_n);
    for (const auto& [id, bias] : p.logit_bias) {
        if (!std::isfinite(bias)) fail("logit_bias {} of token {} must be finite", bias, id);
    }
    for (const auto& [name, value] : {std::pair{"frequency_penalty", p.frequency_penalty},
                                      std::pair{"presence_penalty", p.presence_penalty}}) {
        if (!std::isfinite(value) || value < -2.0f || value > 2.0f)
            fail("{} {} must be in [-2, 2]", name, value);
    }
}

LogitSummary summarize_logits(std::span<const float> logits, int top) {
    LogitSummary s;
    if (logits.empty()) return s;
    s.max = -INFINITY;
    for (float l : logits) s.max = std::max(s.max, l);
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - s.max);
    s.log_sum = std::log(sum);
    // The top few by insertion into a short sorted list (top <= 20: one pass, few moves).
    const size_t keep = std::min(static_cast<size_t>(std::max(top, 0)), logits.size());
    auto better = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    for (size_t i = 0; i < logits.size() && keep > 0; ++i) {
        const std::pair<int32_t, float> c{static_cast<int32_t>(i), logits[i]};
        if (s.top.size() == keep && !better(c, s.top.back())) continue;
        if (s.top.size() == keep) s.top.pop_back();
        s.top.insert(std::upper_bound(s.top.begin(), s.top.end(), c, better), c);
    }
    for (auto& [id, l] : s.top) l = s.logprob(l);
    return s;
}

int32_t argmax(std::span<const float> logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
    }
    return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
    validate(params);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
    const SamplingParams& p = params_;
    candidates_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
    for (const auto& [id, bias] : p.logit_bias) {
        if (id >= 0 && static_cast<size_t>(id) < candidates_.size()) candidates_[id].logit += bias;
    }

    // Penalties on the recent tokens, as llama.cpp's: the repetition penalty divides positive
    // logits and multiplies negative ones; then the count-based and the presence penalties
    // subtract.
    const bool penalize =
        p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
    if (penalize && p.repeat_last_n > 0) {
        std::unordered_map<int32_t, int> counts;
        const size_t from = history.size() > static_cast<size_t>(p.repeat_last_n) ? history.size() - p.repeat_last_n : 0;
        for (size_t i = from; i < history.size(); ++i) ++counts[history[i]];
        for (const auto& [id, count] : counts) {
            if (id < 0 || static_cast<size_t>(id) >= candidates_.size()) continue;
            float& l = candidates_[id].logit;
            l = l > 0.0f ? l / p.repeat_penalty : l * p.repeat_penalty;
            l -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
        }
    }
    if (p.temperature <= 0.0f) {
        int32_t best = 0;
        for (size_t i = 1; i < candidates_.size(); ++i) {
            if (candidates_[i].logit > candidates_[best].logit) best = static_cast<int32_t>(i);
        }
        return best;
    }

    auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    };
    size_t n = candidates_.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
        std::partial_sort(candidates_.begin(), candidates_.begin() + p.top_k, candidates_.end(), by_logit);
        n = static_cast<size_t>(p.top_k);
    } else {
        std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    auto softmax_n = [&](size_t count, float temperature) {
        const float max = candidates_[0].logit;
        double sum = 0.0;
        for (size_t i = 0; i < count; ++i) {
            candidates_[i].p = std::exp((candidates_[i].logit - max) / temperature);
            sum += candidates_[i].p;
        }
        for (size_t i = 0; i < count; ++i) candidates_[i].p = static_cast<float>(candidates_[i].p / sum);
    };
    // top-p: the smallest prefix whose probability reaches top_p.
    softmax_n(n, 1.0f);
    if (p.top_p < 1.0f) {
        double cum = 0.0;
        for (size_t i = 0; i < n; ++i) {
            cum += candidates_[i].p;
            if (cum >= p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    // min-p: drop tokens below min_p times the best probability.
    if (p.min_p > 0.0f) {
        const float threshold = candidates_[0].p * p.min_p;
        size_t keep = 1;
        while (keep < n && candidates_[keep].p >= threshold) ++keep;
        n = keep;
    }
    softmax_n(n, p.temperature);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    double r = uniform(rng_), cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        cum += candidates_[i].p;
        if (r < cum) return candidates_[i].id;
    }
    // Rounding left r above the sum: the last token with a chance, never one masked out to
    // -infinity (probability 0) by a constraint.
    while (n > 1 && candidates_[n - 1].p <= 0.0f) --n;
    return candidates_[n - 1].id;
}

}  // namespace tandem
