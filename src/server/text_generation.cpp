// One request's text, from the scheduler thread to the HTTP handler.
#include "server/text_generation.h"

#include "base/timer.h"

namespace tandem::server {

TextGeneration::TextGeneration(const Tokenizer& tokenizer, std::vector<std::string> stops,
                               Metrics* metrics)
    : decoder_(tokenizer, /*render_special=*/false), stops_(std::move(stops)), metrics_(metrics) {}

bool TextGeneration::on_token(int32_t token) {
    if (metrics_) {
        const double now = now_seconds();
        if (last_token_at_ > 0.0) metrics_->observe_token_gap(now - last_token_at_);
        last_token_at_ = now;
    }
    // The decoder and the matcher are touched only on the scheduler thread.
    StopMatcher::Result r = stops_.feed(decoder_.feed(token));
    if (!r.text.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        text_ += r.text;
    }
    ready_.notify_one();
    return !r.stopped;
}

void TextGeneration::on_logprobs(const TokenLogprobs& logprobs) {
    std::lock_guard<std::mutex> lock(mutex_);
    logprobs_.push_back(logprobs);
}

void TextGeneration::on_finish(const GenerationResult& result) {
    std::string rest;
    if (!stops_.stopped()) {
        StopMatcher::Result r = stops_.feed(decoder_.flush());
        rest = r.text + stops_.flush();
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        text_ += rest;
        result_ = result;
    }
    if (metrics_) metrics_->observe_finish(result);
    ready_.notify_one();
}

TextGeneration::Update TextGeneration::wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !text_.empty() || (result_ && !result_taken_); });
    Update u;
    u.text.swap(text_);
    u.logprobs.swap(logprobs_);
    if (result_ && !result_taken_) {
        u.finished = result_;
        u.stop = stops_.matched();  // written before result_, under the mutex
        result_taken_ = true;
    }
    return u;
}

}  // namespace tandem::server
