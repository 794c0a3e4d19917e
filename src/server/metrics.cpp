// Server metrics in the Prometheus text format.
#include "server/metrics.h"

#include <bit>

#include <fmt/format.h>

namespace tandem::server {
namespace {

// The endpoints a label may name; anything else is "other", so that a client probing random
// URLs cannot grow the series without bound.
constexpr const char* kEndpoints[] = {
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/completions",
    "/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/models",
    "/models",
    "/health",
    "/metrics",
    "/tokenize",
    "/detokenize",
    "/apply-template",
    "/props",
};

std::string endpoint_label(const std::string& path) {
    for (const char* e : kEndpoints) {
        if (path == e) return e;
    }
    return "other";
}

void header(std::string& out, const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void sample(std::string& out, const std::string& name, T value) {
    out += fmt::format("{} {}\n", name, value);
}

}  // namespace

const char* const kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {
    for (auto& c : counts_) c.store(0);
}

void Histogram::observe(double value) {
    size_t bucket = 0;
    while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
    counts_[bucket].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    uint64_t old = sum_bits_.load(std::memory_order_relaxed);
    while (!sum_bits_.compare_exchange_weak(
        old, std::bit_cast<uint64_t>(std::bit_cast<double>(old) + value),
        std::memory_order_relaxed)) {
    }
}

void Histogram::render(const std::string& name, std::string& out) const {
    // Read the count first: buckets observed meanwhile only make +Inf larger, and +Inf is
    // written as the count, so the buckets stay cumulative and +Inf equals _count.
    const uint64_t count = count_.load(std::memory_order_relaxed);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i].load(std::memory_order_relaxed);
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i],
                           std::min(cumulative, count));
    }
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count);
    out += fmt::format("{}_sum {}\n", name,
                       std::bit_cast<double>(sum_bits_.load(std::memory_order_relaxed)));
    out += fmt::format("{}_count {}\n", name, count);
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80}),
      token_gap_(
          {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}),
      duration_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640}),
      queue_({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80}) {}

void Metrics::count_response(const std::string& path, int status) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++responses_[{endpoint_label(path), status}];
}

void Metrics::observe_token_gap(double seconds) {
    token_gap_.observe(seconds);
}

void Metrics::observe_finish(const GenerationResult& r) {
    finished_[static_cast<size_t>(r.reason)].fetch_add(1, std::memory_order_relaxed);
    prompt_tokens_.fetch_add(static_cast<uint64_t>(r.prompt_tokens), std::memory_order_relaxed);
    generated_tokens_.fetch_add(static_cast<uint64_t>(r.completion_tokens),
                                std::memory_order_relaxed);
    if (r.first_token_seconds > 0.0) ttft_.observe(r.first_token_seconds);
    duration_.observe(r.total_seconds);
    queue_.observe(r.queue_seconds);
}

std::string Metrics::render(const SchedulerStats* stats) const {
    std::string out;
    header(out, "tandem_http_responses_total", "counter",
           "HTTP responses by endpoint and status code.");
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [key, count] : responses_) {
            out += fmt::format("tandem_http_responses_total{{endpoint=\"{}\",status=\"{}\"}} {}\n",
                               key.first, key.second, count);
        }
    }
    header(out, "tandem_requests_finished_total", "counter",
           "Generation requests finished, by how they ended.");
    for (FinishReason reason : {FinishReason::kStop, FinishReason::kLength,
                                FinishReason::kCancelled, FinishReason::kError}) {
        out +=
            fmt::format("tandem_requests_finished_total{{reason=\"{}\"}} {}\n",
                        finish_reason_name(reason), finished_[static_cast<size_t>(reason)].load());
    }
    header(out, "tandem_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
    sample(out, "tandem_prompt_tokens_total", prompt_tokens_.load());
    header(out, "tandem_generation_tokens_total", "counter",
           "Tokens generated by finished requests.");
    sample(out, "tandem_generation_tokens_total", generated_tokens_.load());
    header(out, "tandem_time_to_first_token_seconds", "histogram",
           "From a request's arrival to its first generated token.");
    ttft_.render("tandem_time_to_first_token_seconds", out);
    header(out, "tandem_time_per_output_token_seconds", "histogram",
           "Between consecutive generated tokens of a request.");
    token_gap_.render("tandem_time_per_output_token_seconds", out);
    header(out, "tandem_request_duration_seconds", "histogram",
           "From a request's arrival to its end.");
    duration_.render("tandem_request_duration_seconds", out);
    header(out, "tandem_request_queue_seconds", "histogram",
           "Time requests waited for a free slot.");
    queue_.render("tandem_request_queue_seconds", out);
    if (stats) {
        header(out, "tandem_requests_queued", "gauge", "Requests waiting for a free slot.");
        sample(out, "tandem_requests_queued", stats->queued);
        header(out, "tandem_slots_busy", "gauge", "Slots decoding a request.");
        sample(out, "tandem_slots_busy", stats->slots_busy);
        header(out, "tandem_slots_total", "gauge", "Slots (requests decoded together at most).");
        sample(out, "tandem_slots_total", stats->slots_total);
        header(out, "tandem_kv_cache_used_tokens", "gauge",
               "KV cache positions held by the requests in the slots.");
        sample(out, "tandem_kv_cache_used_tokens", stats->kv_used);
        header(out, "tandem_kv_cache_capacity_tokens", "gauge", "KV cache positions in all.");
        sample(out, "tandem_kv_cache_capacity_tokens", stats->kv_capacity);
        header(out, "tandem_kv_cache_usage_ratio", "gauge",
               "Share of the KV cache in use, 0 to 1.");
        sample(out, "tandem_kv_cache_usage_ratio",
               stats->kv_capacity > 0
                   ? static_cast<double>(stats->kv_used) / static_cast<double>(stats->kv_capacity)
                   : 0.0);
        header(out, "tandem_prefix_cache_hits_total", "counter",
               "Requests that reused a finished request's KV cache for their prompt's start.");
        sample(out, "tandem_prefix_cache_hits_total", stats->prefix_hits);
        header(out, "tandem_prefix_cache_tokens_total", "counter",
               "Prompt tokens taken from the prefix cache instead of computed.");
        sample(out, "tandem_prefix_cache_tokens_total", stats->prefix_cached_tokens);
        header(out, "tandem_prefix_cache_kept_tokens", "gauge",
               "KV cache positions that free slots keep for prompts starting with them.");
        sample(out, "tandem_prefix_cache_kept_tokens", stats->kv_kept);
        // The prefix cache in host memory, beyond the slots (--cache-mem).
        header(out, "tandem_prefix_cache_bytes", "gauge",
               "Host memory holding finished requests' KV caches beyond the slots.");
        sample(out, "tandem_prefix_cache_bytes", stats->cache_bytes);
        header(out, "tandem_prefix_cache_budget_bytes", "gauge",
               "Host memory the prefix cache may hold (--cache-mem; 0: the slots only).");
        sample(out, "tandem_prefix_cache_budget_bytes", stats->cache_budget);
        header(out, "tandem_prefix_cache_entries", "gauge",
               "Finished requests' KV caches kept in host memory.");
        sample(out, "tandem_prefix_cache_entries", stats->cache_entries);
        header(out, "tandem_prefix_cache_loads_total", "counter",
               "Requests whose prompt's start was copied back from host memory into a slot.");
        sample(out, "tandem_prefix_cache_loads_total", stats->cache_loads);
        header(out, "tandem_prefix_cache_saves_total", "counter",
               "Free slots' KV caches copied to host memory before another request took the slot.");
        sample(out, "tandem_prefix_cache_saves_total", stats->cache_saves);
        header(out, "tandem_prefix_cache_evictions_total", "counter",
               "KV caches evicted from host memory (least recently used) to make room.");
        sample(out, "tandem_prefix_cache_evictions_total", stats->cache_evictions);
    }
    header(out, "tandem_model_loaded", "gauge", "1 once the model serves requests.");
    sample(out, "tandem_model_loaded", stats ? 1 : 0);
    return out;
}

}  // namespace tandem::server
