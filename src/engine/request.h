// A generation request as the scheduler sees it: prompt tokens, sampling and limits in; tokens
// and one final result out, through a sink the scheduler calls on its own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "engine/token_constraint.h"

namespace tandem {

enum class FinishReason {
    kStop,       // an end-of-generation token, or the sink asked to stop (a stop string)
    kLength,     // max_tokens reached, or the slot's context is full
    kCancelled,  // the client went away, or the scheduler shut down
    kError,      // the forward pass failed; GenerationResult::error says why
};

// "stop", "length", "cancelled", "error".
const char* finish_reason_name(FinishReason reason);

// The most alternatives a request may ask with each token's log probability (OpenAI's
// top_logprobs: 20).
constexpr int kMaxTopLogprobs = 20;

// A sampled token's log probability under the model (the log-softmax of its logits, before
// biases, penalties, temperature and any grammar), and the most likely tokens, best first.
struct TokenLogprobs {
    int32_t token = 0;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;
};

struct GenerationParams {
    std::vector<int32_t> prompt;
    SamplingParams sampling;
    int max_tokens = 0;       // 0: until an end-of-generation token or the end of the context
    bool ignore_eos = false;  // end-of-generation tokens do not end it (benchmarks, tests)
    // Restricts the sampled tokens (structured output, forced tool calls); null: none.
    std::shared_ptr<TokenConstraint> constraint;
    // < 0: none; else each sampled token's TokenLogprobs with this many alternatives
    // (0..kMaxTopLogprobs), to the sink before the token.
    int logprobs = -1;
};

struct GenerationResult {
    FinishReason reason = FinishReason::kStop;
    int prompt_tokens = 0;
    int completion_tokens = 0;  // sampled tokens, the end-of-generation token included
    int cached_tokens = 0;      // of prompt_tokens, reused from a finished request's KV cache
    std::string error;
    double queue_seconds = 0.0;        // submit → a slot was free
    double first_token_seconds = 0.0;  // submit → first sampled token (0: none)
    double total_seconds = 0.0;        // submit → finish
};

// Receives a request's output. Both calls happen on the scheduler thread, between forward
// passes, so they must be quick (no network I/O): hand the data to another thread.
class GenerationSink {
  public:
    virtual ~GenerationSink() = default;
    // A sampled token that is not an end-of-generation token. Returning false ends the request
    // here with kStop (the token counts as generated): how stop strings end a request.
    virtual bool on_token(int32_t token) = 0;
    // With GenerationParams::logprobs: the token's log probabilities, just before on_token.
    virtual void on_logprobs(const TokenLogprobs& logprobs) { (void)logprobs; }
    // Called exactly once, last, also for requests cancelled before they started.
    virtual void on_finish(const GenerationResult& result) = 0;
};

// One submitted request. The client keeps a reference to cancel it; the scheduler sees the flag
// before its next step and frees the slot.
class Request {
  public:
    Request(GenerationParams params, std::shared_ptr<GenerationSink> sink);

    void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
    bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

    uint64_t id() const { return id_; }
    const GenerationParams& params() const { return params_; }
    GenerationSink& sink() { return *sink_; }
    double submitted_at() const { return submitted_at_; }
    void mark_submitted(double now) { submitted_at_ = now; }

  private:
    uint64_t id_;
    GenerationParams params_;
    std::shared_ptr<GenerationSink> sink_;
    std::atomic<bool> cancelled_{false};
    double submitted_at_ = 0.0;
};

}  // namespace tandem
