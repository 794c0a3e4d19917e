// Where a GPU forward pass spends its time, by operation: with TANDEM_GPU_PROFILE=1 the backend
// runs without graphs and brackets every operation with CUDA events; at exit the log gets a table
// of milliseconds per operation and phase (decode passes of up to kSmallBatch tokens, prefill).
// Off (the default), a Scope costs a branch.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::cuda {

class OpProfile {
  public:
    OpProfile();
    ~OpProfile();  // logs the table
    OpProfile(const OpProfile&) = delete;
    OpProfile& operator=(const OpProfile&) = delete;

    bool enabled() const { return enabled_; }
    // The phase of the next pass ("decode", "prefill").
    void set_phase(const char* phase) { phase_ = phase; }
    // Waits for the pass and adds its events' times to the totals.
    void collect();

    class Scope {
      public:
        Scope(OpProfile& p, std::string_view name, cudaStream_t stream);
        ~Scope();
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

      private:
        OpProfile& p_;
        cudaStream_t stream_;
        int index_ = -1;
    };

  private:
    struct Pending {
        std::string key;
        cudaEvent_t start, stop;
    };
    bool enabled_ = false;
    const char* phase_ = "decode";
    std::vector<Pending> pending_;
    std::vector<cudaEvent_t> spare_;
    std::map<std::string, std::pair<double, long>> totals_;  // key -> (ms, count)
    std::map<std::string, long> passes_;                     // phase -> passes
};

}  // namespace tandem::cuda
