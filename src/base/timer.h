// Monotonic wall-clock timing.
#pragma once

#include <chrono>

namespace tandem {

inline double now_seconds() {
    using Clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
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
