// Perplexity's windows and arithmetic.
#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tandem {

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
        double max = row[0];
        for (int v = 1; v < n_vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
        double sum = 0;
        for (int v = 0; v < n_vocab; ++v) sum += std::exp(row[v] - max);
        nll.push_back(std::log(sum) + max - row[tokens[t]]);
    }
    return nll;
}

PerplexityEstimate estimate_perplexity(std::span<const double> nll) {
    PerplexityEstimate e;
    e.n = static_cast<int64_t>(nll.size());
    if (e.n == 0) return e;
    double mean = 0;
    for (double x : nll) mean += x;
    mean /= static_cast<double>(e.n);
    double var = 0;
    for (double x : nll) var += (x - mean) * (x - mean);
    var = e.n > 1 ? var / static_cast<double>(e.n - 1) : 0.0;
    e.ppl = std::exp(mean);
    e.error = e.ppl * std::sqrt(var / static_cast<double>(e.n));
    return e;
}

}  // namespace tandem
