// Monotonic wall-clock timing.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace tandem {

inline double now_seconds() {
    using Clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// The median of timings (the mean of the middle two for an even count); 0 when empty: what the
// benchmarks and start-up measurements report, robust to the odd slow run of a shared machine.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class Stopwatch {
public:
    Stopwatch() : start_(now_seconds()) {}
    double seconds() const { return now_seconds() - start_; }
    void reset() { start_ = now_seconds(); }

private:
    double start_;
};

}  // namespace tandem
