// The CPU executor's experts on the GPU backend's stream.
#include "model/gpu_cpu_experts.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "base/error.h"
#include "base/env_flag.h"
#include "base/log.h"
#include "base/timer.h"
#include "cuda/check.h"

namespace tandem {

GpuCpuExperts::GpuCpuExperts(const Model& model, const std::vector<bool>& on_cpu, int max_tokens,
                             ThreadPool& pool)
    : n_embd_(model.config().n_embd), top_k_(model.config().n_expert_used) {
    std::vector<MoeLayer> layers;
    index_.assign(on_cpu.size(), -1);
    for (size_t il = 0; il < on_cpu.size(); ++il) {
        if (!on_cpu[il]) continue;
        index_[il] = static_cast<int>(layers.size());
        layers.push_back(model.weights().layers[il].experts);  // host views: read in place
    }
    executor_ = std::make_unique<MoeExecutor>(std::move(layers), max_tokens, top_k_, pool);
    const size_t rows = static_cast<size_t>(max_tokens);
    hidden_ = cuda::PinnedBuffer(sizeof(float) * rows * n_embd_, "CPU experts' input");
    routes_ = cuda::PinnedBuffer(sizeof(Route) * rows * top_k_, "CPU experts' routes");
    result_ = cuda::PinnedBuffer(sizeof(float) * rows * n_embd_, "CPU experts' output");
    timed_ = env_flag("TANDEM_GPU_PROFILE");
}

GpuCpuExperts::~GpuCpuExperts() {
    if (!timed_ || timed_calls_ == 0) return;
    const double n = static_cast<double>(timed_calls_);
    log_info("cpu experts: {} host functions, {:.1f} us each in the executor, {:.1f} us between "
             "one's end and the next one's start",
             timed_calls_, 1e6 * executor_seconds_ / n, 1e6 * between_seconds_ / n);
}

void GpuCpuExperts::enqueue(int layer, const float* in, int64_t in_stride, const Route* routes,
                            int n, float* out, int64_t out_stride, cudaStream_t stream) {
    if (!has(layer)) fail("moe: layer {} has no experts on the CPU", layer);
    if (n > executor_->max_tokens())
        fail("moe: {} rows for the CPU experts (at most {})", n, executor_->max_tokens());
    const size_t row_bytes = sizeof(float) * n_embd_;
    cuda::check(cudaMemcpy2DAsync(hidden_.get(), row_bytes, in, sizeof(float) * in_stride,
                                  row_bytes, n, cudaMemcpyDeviceToHost, stream),
                "copying the CPU experts' input");
    cuda::check(cudaMemcpyAsync(routes_.get(), routes, sizeof(Route) * n * top_k_,
                                cudaMemcpyDeviceToHost, stream),
                "copying the CPU experts' routes");
    std::unique_ptr<Call>& call = calls_[{layer, n}];
    if (!call) call = std::make_unique<Call>(Call{this, layer, n});
    cuda::check(cudaLaunchHostFunc(stream, &GpuCpuExperts::run_call, call.get()),
                "queueing the CPU experts");
    cuda::check(cudaMemcpy2DAsync(out, sizeof(float) * out_stride, result_.get(), row_bytes,
                                  row_bytes, n, cudaMemcpyHostToDevice, stream),
                "copying the CPU experts' output");
}

double GpuCpuExperts::seconds_per_expert() {
    std::vector<int> layers;  // executor layers
    for (const int i : index_)
        if (i >= 0) layers.push_back(i);
    if (layers.empty() || top_k_ < 1) return 0.0;
    float* hidden = hidden_.as<float>();
    std::fill(hidden, hidden + n_embd_, 0.01f);
    Route* routes = routes_.as<Route>();
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
        executor_->submit(layer, hidden, 1, routes);
        executor_->wait();
        if (call > 0) seconds.push_back(now_seconds() - start);
    }
    return median(std::move(seconds)) / top_k_;
}

void CUDART_CB GpuCpuExperts::run_call(void* p) {
    const Call* call = static_cast<const Call*>(p);
    call->self->compute(call->layer, call->n);
}

void GpuCpuExperts::compute(int layer, int n) noexcept {
    // On a CUDA runtime thread: no CUDA calls here, and nothing may escape.
    try {
        const double start = timed_ ? now_seconds() : 0.0;
        executor_->submit(index_[layer], hidden_.as<float>(), n, routes_.as<Route>());
        const float* sum = executor_->wait();
        std::memcpy(result_.get(), sum, sizeof(float) * n_embd_ * n);
        if (timed_) {
            const double end = now_seconds();
            // A gap over a second is the host's time between passes, not a step's.
            if (last_end_ > 0.0 && start - last_end_ < 1.0) between_seconds_ += start - last_end_;
            executor_seconds_ += end - start;
            last_end_ = end;
            ++timed_calls_;
        }
    } catch (const std::exception& e) {
        std::memset(result_.get(), 0, sizeof(float) * n_embd_ * n);
        const std::lock_guard<std::mutex> lock(error_mutex_);
        if (error_.empty()) error_ = fmt::format("the CPU experts of layer {}: {}", layer, e.what());
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
