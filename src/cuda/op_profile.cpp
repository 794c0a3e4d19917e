// Per-operation GPU times.
#include "cuda/op_profile.h"

#include "base/env_flag.h"
#include "base/log.h"
#include "cuda/check.h"

namespace tandem::cuda {

OpProfile::OpProfile() {
    enabled_ = env_flag("TANDEM_GPU_PROFILE");
    if (enabled_) log_info("gpu profile: on (no CUDA graphs; every operation timed)");
}

OpProfile::~OpProfile() {
    if (!enabled_) return;
    double total = 0.0;
    for (const auto& [key, t] : totals_) total += t.first;
    for (const auto& [phase, n] : passes_) log_info("gpu profile: {} passes of {}", n, phase);
    log_info("gpu profile: {:<28} {:>10} {:>8} {:>10} {:>6}", "phase/operation", "ms", "calls",
             "us/call", "share");
    for (const auto& [key, t] : totals_) {
        log_info("gpu profile: {:<28} {:>10.2f} {:>8} {:>10.1f} {:>5.1f}%", key, t.first, t.second,
                 1e3 * t.first / static_cast<double>(t.second), 100.0 * t.first / total);
    }
    for (Pending& p : pending_) {
        cudaEventDestroy(p.start);
        cudaEventDestroy(p.stop);
    }
    for (cudaEvent_t e : spare_) cudaEventDestroy(e);
}

void OpProfile::collect() {
    if (!enabled_) return;
    passes_[phase_]++;
    for (Pending& p : pending_) {
        check(cudaEventSynchronize(p.stop), "profiling");
        float ms = 0.0f;
        check(cudaEventElapsedTime(&ms, p.start, p.stop), "profiling");
        auto& t = totals_[p.key];
        t.first += ms;
        t.second += 1;
        spare_.push_back(p.start);
        spare_.push_back(p.stop);
    }
    pending_.clear();
}

OpProfile::Scope::Scope(OpProfile& p, std::string_view name, cudaStream_t stream)
    : p_(p), stream_(stream) {
    if (!p_.enabled_) return;
    auto event = [&] {
        if (!p_.spare_.empty()) {
            cudaEvent_t e = p_.spare_.back();
            p_.spare_.pop_back();
            return e;
        }
        cudaEvent_t e = nullptr;
        check(cudaEventCreate(&e), "profiling");
        return e;
    };
    Pending pending{std::string(p_.phase_) + "/" + std::string(name), event(), event()};
    check(cudaEventRecord(pending.start, stream_), "profiling");
    index_ = static_cast<int>(p_.pending_.size());
    p_.pending_.push_back(pending);
}

OpProfile::Scope::~Scope() {
    if (index_ >= 0) cudaEventRecord(p_.pending_[index_].stop, stream_);
}

}  // namespace tandem::cuda
