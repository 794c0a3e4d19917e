// The CPU executor's experts on the GPU backend's stream.
#include "model/gpu_cpu_experts.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>

#include "base/env_flag.h"
#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "cuda/check.h"

namespace tandem {
namespace {

// How long the server spins after a request before it naps between polls, and the naps: a decode
// step's layers come tens of µs apart and the host's work between steps takes well under the
// spin; after a second without requests (a server between conversations) the naps lengthen, so
// that an idle process costs next to nothing, and its next step waits a millisecond at most.
constexpr double kSpinSeconds = 0.005;
constexpr double kIdleSeconds = 1.0;
constexpr auto kNap = std::chrono::microseconds(50);
constexpr auto kIdleNap = std::chrono::milliseconds(1);

}  // namespace

GpuCpuExperts::GpuCpuExperts(const Model& model, const std::vector<bool>& on_cpu, int max_tokens,
                             ThreadPool& pool)
    : n_embd_(model.config().n_embd),
      top_k_(model.config().n_expert_used),
      mailbox_(max_tokens, model.config().n_embd,
               sizeof(Route) * static_cast<size_t>(max_tokens) * model.config().n_expert_used,
               model.config().n_embd) {
    std::vector<MoeLayer> layers;
    index_.assign(on_cpu.size(), -1);
    for (size_t il = 0; il < on_cpu.size(); ++il) {
        if (!on_cpu[il]) continue;
        index_[il] = static_cast<int>(layers.size());
        layers.push_back(model.weights().layers[il].experts);  // host views: read in place
    }
    executor_ = std::make_unique<MoeExecutor>(std::move(layers), max_tokens, top_k_, pool);
    timed_ = env_flag("TANDEM_GPU_PROFILE");
    server_ = std::thread([this] { serve(); });
}

GpuCpuExperts::~GpuCpuExperts() {
    stop_ = true;
    server_.join();
    if (!timed_ || timed_calls_ == 0) return;
    const double n = static_cast<double>(timed_calls_);
    log_info(
        "cpu experts: {} requests, {:.1f} us each in the executor, {:.1f} us between "
        "one's end and the next one's start",
        timed_calls_, 1e6 * executor_seconds_ / n, 1e6 * between_seconds_ / n);
}

void GpuCpuExperts::enqueue(int layer, const float* in, int64_t in_stride, const Route* routes,
                            int n, float* out, int64_t out_stride, cudaStream_t stream) {
    if (!has(layer)) fail("moe: layer {} has no experts on the CPU", layer);
    if (n > executor_->max_tokens())
        fail("moe: {} rows for the CPU experts (at most {})", n, executor_->max_tokens());
    // Routes of expert -1 (hybrid's hits) are not the CPU's: a layer without others is not sent.
    static_assert(offsetof(Route, expert) == 0 && sizeof(Route) % 4 == 0);
    mailbox_.post(cuda::DeviceRows{const_cast<float*>(in), n, n_embd_, in_stride}, routes,
                  sizeof(Route) * static_cast<size_t>(n) * top_k_, sizeof(Route) / 4, layer,
                  stream);
    mailbox_.await(cuda::DeviceRows{out, n, n_embd_, out_stride}, stream);
}

double GpuCpuExperts::seconds_per_expert() {
    std::vector<int> layers;  // executor layers
    for (const int i : index_)
        if (i >= 0) layers.push_back(i);
    if (layers.empty() || top_k_ < 1) return 0.0;
    const std::vector<float> hidden(n_embd_, 0.01f);
    std::vector<Route> routes(top_k_);
    constexpr int kCalls = 7;  // the first warms the pool and the code, not the experts
    std::vector<double> seconds;
    for (int call = 0; call <= kCalls; ++call) {
        const int layer = layers[call % layers.size()];
        const int n_expert = executor_->layer(layer).n_expert;
        if (n_expert < top_k_) return 0.0;
        const int first = static_cast<int>((call / layers.size()) * top_k_ % n_expert);
        for (int j = 0; j < top_k_; ++j)
            routes[j] = Route{(first + j) % n_expert, 1.0f / static_cast<float>(top_k_)};
        const double start = now_seconds();
        executor_->submit(layer, hidden.data(), 1, routes.data());
        executor_->wait();
        if (call > 0) seconds.push_back(now_seconds() - start);
    }
    return median(std::move(seconds)) / top_k_;
}

void GpuCpuExperts::serve() {
    // Napping until the first request: seconds_per_expert() measures the executor without this
    // thread spinning beside its workers.
    double last_request = -kSpinSeconds;
    while (!stop_.load(std::memory_order_relaxed)) {
        cuda::HostMailbox::Request r;
        if (mailbox_.pending(&r)) {
            compute(r.tag, r.rows);
            mailbox_.answer(r.number);
            last_request = now_seconds();
        } else if (now_seconds() - last_request < kSpinSeconds) {
            spin_step(0);  // a pause, no yield: the core is this thread's while requests come
        } else {
            std::this_thread::sleep_for(now_seconds() - last_request < kIdleSeconds ? kNap
                                                                                    : kIdleNap);
        }
    }
}

void GpuCpuExperts::compute(int layer, int n) noexcept {
    // Whatever happens, the answer is written: the stream waits for it.
    float* answer = mailbox_.answer_rows();
    try {
        if (!has(layer) || n < 1 || n > executor_->max_tokens())
            fail("a request for layer {} with {} rows", layer, n);
        const double start = timed_ ? now_seconds() : 0.0;
        executor_->submit(index_[layer], mailbox_.request_rows(), n,
                          static_cast<const Route*>(mailbox_.request_extra()));
        const float* sum = executor_->wait();
        std::memcpy(answer, sum, sizeof(float) * n_embd_ * n);
        if (timed_) {
            const double end = now_seconds();
            // A gap over a second is the host's time between passes, not a step's.
            if (last_end_ > 0.0 && start - last_end_ < 1.0) between_seconds_ += start - last_end_;
            executor_seconds_ += end - start;
            last_end_ = end;
            ++timed_calls_;
        }
    } catch (const std::exception& e) {
        std::memset(answer, 0, sizeof(float) * n_embd_ * std::clamp(n, 0, executor_->max_tokens()));
        const std::lock_guard<std::mutex> lock(error_mutex_);
        if (error_.empty())
            error_ = fmt::format("the CPU experts of layer {}: {}", layer, e.what());
        failed_ = true;
    }
}

void GpuCpuExperts::check() {
    if (!failed_) return;
    std::string what;
    {
        const std::lock_guard<std::mutex> lock(error_mutex_);
        what.swap(error_);
        failed_ = false;
    }
    fail("{}", what);
}

}  // namespace tandem
