// A GenerationSink that keeps a request's tokens and waits for its end: the scheduler tests'
// view of one request.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/scheduler.h"

namespace tandem::testing {

class CollectingSink : public GenerationSink {
  public:
    bool on_token(int32_t token) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tokens_.push_back(token);
        return true;
    }
    void on_finish(const GenerationResult& result) override {
        std::lock_guard<std::mutex> lock(mutex_);
        result_ = result;
        done_ = true;
        cv_.notify_all();
    }
    // The request's result, once it has ended (within two minutes), which must be at its length.
    GenerationResult wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(120), [&] { return done_; }));
        EXPECT_EQ(result_.reason, FinishReason::kLength) << result_.error;
        return result_;
    }
    std::vector<int32_t> tokens() {
        std::lock_guard<std::mutex> lock(mutex_);
        return tokens_;
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<int32_t> tokens_;
    GenerationResult result_;
    bool done_ = false;
};

}  // namespace tandem::testing
