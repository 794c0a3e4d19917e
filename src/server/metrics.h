// The server's counters and histograms, rendered at GET /metrics in the Prometheus text format
// (version 0.0.4): HTTP responses by endpoint and status, finished requests by reason, prompt
// and generated tokens, time to first token, time per output token, request and queue time,
// and, read from the scheduler when asked, queue length, busy slots and KV cache use.
// Observations are lock-free (atomics), so the scheduler thread can record every token.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"

namespace tandem::server {

class Histogram {
  public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double value);
    // The lines of `name`'s buckets, sum and count (cumulative buckets, then +Inf).
    void render(const std::string& name, std::string& out) const;

  private:
    std::vector<double> bounds_;
    std::vector<std::atomic<uint64_t>> counts_;  // per bucket, the last one +Inf
    std::atomic<uint64_t> count_{0};
    std::atomic<uint64_t> sum_bits_{0};  // a double, added to by compare-and-swap
};

class Metrics {
  public:
    Metrics();

    // Any thread: one HTTP response (the path is reduced to the known endpoints, or "other").
    void count_response(const std::string& path, int status);
    // Scheduler thread: a generated token `seconds` after the one before it in its request.
    void observe_token_gap(double seconds);
    // Scheduler thread: a request ended.
    void observe_finish(const GenerationResult& result);

    // The exposition; `stats` null while the model loads.
    std::string render(const SchedulerStats* stats) const;

  private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> responses_;  // (endpoint, status) -> count
    std::array<std::atomic<uint64_t>, 4> finished_{};            // by FinishReason
    std::atomic<uint64_t> prompt_tokens_{0}, generated_tokens_{0};
    Histogram ttft_, token_gap_, duration_, queue_;
};

// The Content-Type of the exposition.
extern const char* const kPrometheusContentType;

}  // namespace tandem::server
