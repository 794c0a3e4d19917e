// Perplexity's windows and arithmetic.
#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "base/error.h"

namespace tandem {
namespace {

// log Σ_v exp(row[v]), in double, from the row's maximum.
double log_sum_exp(const float* row, int n) {
    double max = row[0];
    for (int v = 1; v < n; ++v) max = std::max(max, static_cast<double>(row[v]));
    double sum = 0;
    for (int v = 0; v < n; ++v) sum += std::exp(row[v] - max);
    return std::log(sum) + max;
}

// The mean of xs and its standard error (the sample standard deviation over sqrt(n)).
std::pair<double, double> mean_and_error(std::span<const double> xs) {
    const double n = static_cast<double>(xs.size());
    double mean = 0;
    for (double x : xs) mean += x;
    mean /= n;
    double var = 0;
    for (double x : xs) var += (x - mean) * (x - mean);
    var = xs.size() > 1 ? var / (n - 1) : 0.0;
    return {mean, std::sqrt(var / n)};
}

}  // namespace

PerplexityWindows plan_windows(int64_t n_tokens, int n_ctx, int stride) {
    if (n_ctx < 2) fail("perplexity: --ctx {} must be at least 2", n_ctx);
    if (stride < 1) fail("perplexity: --stride {} must be at least 1", stride);
    if (stride > n_ctx) fail("perplexity: --stride {} is longer than --ctx {}", stride, n_ctx);
    PerplexityWindows w;
    w.n_ctx = n_ctx;
    w.stride = stride;
    w.first_target = std::max(n_ctx / 2 + 1, n_ctx - stride);
    w.count = n_tokens < n_ctx ? 0 : static_cast<int>((n_tokens - n_ctx) / stride + 1);
    if (w.count == 0) {
        fail("perplexity: the text has {} tokens, fewer than one window of --ctx {}", n_tokens,
             n_ctx);
    }
    return w;
}

std::vector<double> window_nll(std::span<const float> logits, int n_vocab,
                               std::span<const int32_t> tokens, int first_target) {
    std::vector<double> nll;
    for (size_t t = std::max(1, first_target); t < tokens.size(); ++t) {
        const float* row = logits.data() + (t - 1) * static_cast<size_t>(n_vocab);
        nll.push_back(log_sum_exp(row, n_vocab) - row[tokens[t]]);
    }
    return nll;
}

PerplexityEstimate estimate_perplexity(std::span<const double> nll) {
    PerplexityEstimate e;
    e.n = static_cast<int64_t>(nll.size());
    if (e.n == 0) return e;
    const auto [mean, error] = mean_and_error(nll);
    e.ppl = std::exp(mean);
    e.error = e.ppl * error;  // the delta method
    return e;
}

std::vector<float> window_log_probs(std::span<const float> logits, int n_vocab, int n_tokens,
                                    int first_target) {
    const int first = std::max(1, first_target);
    std::vector<float> out;
    out.reserve(static_cast<size_t>(std::max(0, n_tokens - first)) * n_vocab);
    for (int t = first; t < n_tokens; ++t) {
        const float* row = logits.data() + static_cast<size_t>(t - 1) * n_vocab;
        const double log_sum = log_sum_exp(row, n_vocab);
        for (int v = 0; v < n_vocab; ++v) out.push_back(static_cast<float>(row[v] - log_sum));
    }
    return out;
}

double kl_divergence(std::span<const float> base_log_probs, std::span<const float> log_probs) {
    double kl = 0;
    for (size_t v = 0; v < base_log_probs.size(); ++v) {
        const double b = base_log_probs[v];
        kl += std::exp(b) * (b - static_cast<double>(log_probs[v]));
    }
    return std::max(0.0, kl);  // (rounding can leave a hair below zero)
}

int32_t top_token(std::span<const float> log_probs) {
    return static_cast<int32_t>(std::max_element(log_probs.begin(), log_probs.end()) -
                                log_probs.begin());
}

KlEstimate estimate_kl(std::span<const double> kl, int64_t same_top) {
    KlEstimate e;
    e.n = static_cast<int64_t>(kl.size());
    if (e.n == 0) return e;
    std::tie(e.mean, e.error) = mean_and_error(kl);
    std::vector<double> sorted(kl.begin(), kl.end());
    std::sort(sorted.begin(), sorted.end());
    const auto at = [&](double q) {
        return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5)];
    };
    e.median = at(0.5);
    e.p99 = at(0.99);
    e.max = sorted.back();
    e.same_top = static_cast<double>(same_top) / static_cast<double>(e.n);
    return e;
}

}  // namespace tandem
