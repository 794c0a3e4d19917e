// Progress of a long load (bytes, parts, time), logged now and then so a user watching a
// multi-gigabyte model load sees it move; short loads print nothing until their summary.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/timer.h"

namespace tandem {

// Called with the bytes just done by code that reads, pages in or locks memory.
using ByteCallback = std::function<void(uint64_t bytes)>;

class LoadProgress {
  public:
    // `what` names the work ("reading", "paging in", "locking"); `n_parts` > 1 adds the part.
    // Nothing is logged when `enabled` is false.
    LoadProgress(std::string what, uint64_t total_bytes, int n_parts, bool enabled = true);

    void set_part(int part) { part_ = part; }  // 0-based
    void add(uint64_t bytes);
    // A callback that adds to this progress.
    ByteCallback callback() {
        return [this](uint64_t bytes) { add(bytes); };
    }
    uint64_t done() const { return done_; }
    double seconds() const { return watch_.seconds(); }

  private:
    std::string what_;
    uint64_t total_;
    int n_parts_;
    bool enabled_;
    int part_ = 0;
    uint64_t done_ = 0;
    double next_report_;
    Stopwatch watch_;
};

}  // namespace tandem
