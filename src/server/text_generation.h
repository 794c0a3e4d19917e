// The bridge from the scheduler thread to an HTTP handler thread for one request: tokens become
// text (whole UTF-8 characters only), stop strings are cut out, and the handler picks up what
// has accumulated whenever it is ready to write. Token timings and the end go to the metrics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/stop_matcher.h"
#include "server/metrics.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace tandem::server {

class TextGeneration : public GenerationSink {
  public:
    // `metrics` may be null.
    TextGeneration(const Tokenizer& tokenizer, std::vector<std::string> stops,
                   Metrics* metrics = nullptr);

    // Scheduler thread.
    bool on_token(int32_t token) override;
    void on_logprobs(const TokenLogprobs& logprobs) override;
    void on_finish(const GenerationResult& result) override;

    struct Update {
        std::string text;                          // new text since the last update
        // The log probabilities of the tokens sampled since (asked for: GenerationParams); a
        // token's text may come in a later update (held until its character or a stop string
        // is complete).
        std::vector<TokenLogprobs> logprobs;
        std::optional<GenerationResult> finished;  // set once, with the last text
        std::string stop;                          // with `finished`: the stop string matched
    };
    // Handler thread: waits up to `timeout` for new text or the end.
    Update wait(std::chrono::milliseconds timeout);

  private:
    StreamDecoder decoder_;
    StopMatcher stops_;
    Metrics* metrics_;
    double last_token_at_ = 0.0;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::string text_;  // not yet taken by the handler
    std::vector<TokenLogprobs> logprobs_;  // not yet taken by the handler
    std::optional<GenerationResult> result_;
    bool result_taken_ = false;
};

}  // namespace tandem::server
