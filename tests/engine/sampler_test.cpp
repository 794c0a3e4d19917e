// The sampler: greedy choice, the penalties over the recent tokens as llama.cpp applies them
// (repetition, then frequency and presence), the filters, seeds, and the ranges it refuses.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "base/error.h"

namespace tandem {
namespace {

SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
}

TEST(Sampler, GreedyTakesTheLargestLogit) {
    Sampler s(greedy());
    const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f};
    EXPECT_EQ(s.sample(logits, {}), 1);
}

// Token 1 leads by 0.5; seen twice in the window, a frequency penalty of 0.3 (0.6 off) hands the
// choice to token 3, 0.2 (0.4 off) does not; a presence penalty counts once however often.
TEST(Sampler, FrequencyAndPresencePenaltiesSubtractFromRecentTokens) {
    const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f};
    const std::vector<int32_t> history = {1, 0, 1};
    auto choice = [&](float frequency, float presence) {
        SamplingParams p = greedy();
        p.frequency_penalty = frequency;
        p.presence_penalty = presence;
        return Sampler(p).sample(logits, history);
    };
    EXPECT_EQ(choice(0.3f, 0.0f), 3);
    EXPECT_EQ(choice(0.2f, 0.0f), 1);
    EXPECT_EQ(choice(0.0f, 0.6f), 3);
    EXPECT_EQ(choice(0.0f, 0.4f), 1);
    // Negative values favour the recent tokens: token 0 (once) overtakes token 1's lead of 1.5
    // only with presence and frequency together.
    const std::vector<int32_t> once = {0};
    SamplingParams p = greedy();
    p.frequency_penalty = -1.0f;
    p.presence_penalty = -0.6f;
    EXPECT_EQ(Sampler(p).sample(logits, once), 0);
    p.presence_penalty = -0.4f;
    EXPECT_EQ(Sampler(p).sample(logits, once), 1);
}

// The repetition penalty comes first: 2.0 / 2 less 0.2 is 0.8, under token 3's 0.85; the other
// order, (2.0 - 0.2) / 2, would leave token 1 at 0.9. Only the last repeat_last_n tokens count.
TEST(Sampler, PenaltiesLookAtTheWindowInLlamaCppsOrder) {
    const std::vector<float> close = {0.5f, 2.0f, -1.0f, 0.85f};
    SamplingParams p = greedy();
    p.presence_penalty = 0.2f;
    p.repeat_penalty = 2.0f;
    EXPECT_EQ(Sampler(p).sample(close, std::vector<int32_t>{1}), 3);
    p.presence_penalty = 0.0f;
    EXPECT_EQ(Sampler(p).sample(close, std::vector<int32_t>{1}), 1);
    // Token 1 outside a window of 2: no penalty.
    const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f};
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.2f;
    p.frequency_penalty = 2.0f;
    p.repeat_last_n = 2;
    EXPECT_EQ(Sampler(p).sample(logits, std::vector<int32_t>{1, 0, 2}), 1);
    EXPECT_EQ(Sampler(p).sample(logits, std::vector<int32_t>{0, 2, 1}), 3);
}

// Biases add to the logits first (before the penalties); ids past the vocabulary are skipped.
TEST(Sampler, LogitBiasesAddBeforeThePenalties) {
    const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f};
    SamplingParams p = greedy();
    p.logit_bias = {{2, 3.25f}, {99, 50.0f}};
    EXPECT_EQ(Sampler(p).sample(logits, {}), 2);
    p.logit_bias = {{1, -0.75f}};
    EXPECT_EQ(Sampler(p).sample(logits, {}), 3);
    // Token 1 biased by 0.8, then halved by the repetition penalty: 1.4, under token 3's 1.5
    // (halved first, then biased, it would be 1.8).
    p.logit_bias = {{1, 0.8f}};
    p.repeat_penalty = 2.0f;
    EXPECT_EQ(Sampler(p).sample(logits, std::vector<int32_t>{1}), 3);
}

TEST(Sampler, TopKOfOneIsGreedyAndASeedRepeatsItsDraws) {
    std::vector<float> logits(50);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.1f * static_cast<float>(i % 7);
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 1;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    EXPECT_EQ(Sampler(p).sample(logits, {}), 6);  // the first of the largest
    p.top_k = 0;
    p.seed = 42;
    Sampler a(p), b(p);
    std::map<int32_t, int> drawn;
    for (int i = 0; i < 200; ++i) {
        const int32_t x = a.sample(logits, {});
        EXPECT_EQ(x, b.sample(logits, {}));
        ++drawn[x];
    }
    EXPECT_GT(drawn.size(), 10u);  // it samples, not picks
}

// Log probabilities: the log-softmax's normalizer, and the best few, ties to the lower id.
TEST(SummarizeLogits, GivesTheNormalizerAndTheBestTokens) {
    const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l));
    const LogitSummary s = summarize_logits(logits, 3);
    EXPECT_NEAR(s.max + s.log_sum, std::log(sum), 1e-6);
    EXPECT_NEAR(s.logprob(-2.0f), -2.0 - std::log(sum), 1e-6);
    ASSERT_EQ(s.top.size(), 3u);
    EXPECT_EQ(s.top[0].first, 1);
    EXPECT_EQ(s.top[1].first, 3);
    EXPECT_EQ(s.top[2].first, 0);
    EXPECT_NEAR(s.top[0].second, 3.0 - std::log(sum), 1e-6);
    EXPECT_NEAR(s.top[2].second, 1.0 - std::log(sum), 1e-6);
    EXPECT_TRUE(summarize_logits(logits, 0).top.empty());
    EXPECT_EQ(summarize_logits(logits, 9).top.size(), logits.size());
    // Large logits do not overflow.
    const LogitSummary big = summarize_logits(std::vector<float>{1000.0f, 1000.0f}, 1);
    EXPECT_NEAR(big.top[0].second, -std::log(2.0), 1e-6);
}

TEST(Sampler, RefusesValuesOutOfRange) {
    for (auto set : {+[](SamplingParams& p) { p.frequency_penalty = 2.5f; },
                     +[](SamplingParams& p) { p.presence_penalty = -2.01f; },
                     +[](SamplingParams& p) { p.top_p = 0.0f; },
                     +[](SamplingParams& p) { p.repeat_penalty = 0.0f; },
                     +[](SamplingParams& p) { p.temperature = -1.0f; },
                     +[](SamplingParams& p) { p.logit_bias = {{1, NAN}}; }}) {
        SamplingParams p;
        set(p);
        EXPECT_THROW(validate(p), Error);
    }
    SamplingParams p;
    p.frequency_penalty = -2.0f;
    p.presence_penalty = 2.0f;
    EXPECT_NO_THROW(validate(p));
}

}  // namespace
}  // namespace tandem
