// Perplexity over a token sequence, as llama.cpp's llama-perplexity computes it: the sequence is
// cut into windows of n_ctx tokens, each evaluated from an empty cache; a window's logits at
// position i predict its token i + 1, and only the later positions of each window are scored, so
// every scored token has at least half a window of context. The figure is exp(mean negative log
// likelihood) over the scored tokens, with its standard error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

// Where the windows go: window k covers tokens [start, start + n_ctx) with start = k·stride and
// scores the predictions of its tokens first_target..n_ctx-1 (positions within the window).
struct PerplexityWindows {
    int n_ctx = 0;
    int stride = 0;        // default n_ctx: windows side by side
    // max(n_ctx / 2 + 1, n_ctx - stride): llama-perplexity's targets for stride n_ctx, and no
    // token scored twice for shorter strides.
    int first_target = 0;
    int count = 0;         // windows that fit the sequence
};

// Throws Error (one line) when n_ctx < 2, stride < 1 or the sequence holds no full window.
PerplexityWindows plan_windows(int64_t n_tokens, int n_ctx, int stride);

// The negative log likelihoods (natural log, in double) of window tokens first_target..n-1, each
// predicted by the logits row before it: logits is [n × n_vocab] row-major, tokens has n ids.
std::vector<double> window_nll(std::span<const float> logits, int n_vocab,
                               std::span<const int32_t> tokens, int first_target);

struct PerplexityEstimate {
    double ppl = 0;    // exp(mean nll)
    double error = 0;  // its standard error: ppl · sd(nll) / sqrt(n) (the delta method)
    int64_t n = 0;
};
PerplexityEstimate estimate_perplexity(std::span<const double> nll);

// The KL divergence mode (llama-perplexity's --kl-divergence): how far a model's predictions are
// from a base model's (the same model unquantized, say) over the same windows.

// log_softmax of the rows that predict window tokens first_target..n_tokens-1 (rows
// first_target-1 .. n_tokens-2 of logits): (n_tokens - first_target) rows × n_vocab.
std::vector<float> window_log_probs(std::span<const float> logits, int n_vocab, int n_tokens,
                                    int first_target);

// KL(base ‖ model) = Σ_v p_base(v) · (log p_base(v) − log p_model(v)) of one row, from the two
// rows of log-probabilities, summed in double.
double kl_divergence(std::span<const float> base_log_probs, std::span<const float> log_probs);

// The token of a row's largest log-probability (the lowest id among equals).
int32_t top_token(std::span<const float> log_probs);

struct KlEstimate {
    double mean = 0, error = 0;  // mean KL and its standard error
    double median = 0, p99 = 0, max = 0;
    double same_top = 0;  // share of rows whose top token is the base's
    int64_t n = 0;
};
// kl: one divergence per scored row; same_top: how many of those rows agree on the top token.
KlEstimate estimate_kl(std::span<const double> kl, int64_t same_top);

}  // namespace tandem
