// Token sampling: logit biases → penalties → greedy, or top-k → top-p → min-p → temperature → a
// seeded random draw (llama.cpp's default chain order). Same seed, same logits: same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace tandem {

struct SamplingParams {
    float temperature = 0.8f;  // <= 0: greedy
    int top_k = 40;            // <= 0: off
    float top_p = 0.95f;       // >= 1: off
    float min_p = 0.05f;       // <= 0: off
    // Added to tokens' logits before anything else (OpenAI's and llama.cpp's logit_bias); ids
    // outside the vocabulary are the caller's to refuse (the sampler skips them).
    std::vector<std::pair<int32_t, float>> logit_bias;
    float repeat_penalty = 1.0f;  // 1: off
    // OpenAI's additive penalties, as llama.cpp applies them after the repetition penalty:
    // a recent token's logit less frequency_penalty times its count, less presence_penalty.
    float frequency_penalty = 0.0f;  // 0: off
    float presence_penalty = 0.0f;   // 0: off
    int repeat_last_n = 64;          // how many recent tokens the penalties look at
    uint64_t seed = 0xFFFFFFFF;   // llama.cpp's LLAMA_DEFAULT_SEED means "random"; we keep it fixed
};

// Throws Error naming the field when a value is out of range.
void validate(const SamplingParams& params);

// What log probabilities need of a row of logits: the softmax's normalizer (kept as the largest
// logit and the log of the sum of exp(logit - largest), so that a log probability keeps its
// precision beside large logits), and the `top` most likely tokens with their log
// probabilities, best first (ties: the lower id).
struct LogitSummary {
    float max = 0.0f;
    double log_sum = 0.0;  // of exp(logit - max)
    std::vector<std::pair<int32_t, float>> top;

    float logprob(float logit) const {
        return static_cast<float>(static_cast<double>(logit - max) - log_sum);
    }
};
LogitSummary summarize_logits(std::span<const float> logits, int top);

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);
    // Picks the next token from n_vocab logits; `history` holds the tokens so far (prompt and
    // generated) for the repetition penalty.
    int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
    void reseed(uint64_t seed) { rng_.seed(seed); }

private:
    struct Candidate {
        int32_t id;
        float logit;
        float p;
    };
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<Candidate> candidates_;
};

// The index of the largest logit (the lowest index among equals).
int32_t argmax(std::span<const float> logits);

}  // namespace tandem
