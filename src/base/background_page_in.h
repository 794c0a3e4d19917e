// Paging a mapped model in on a thread of its own, so a server answers as soon as the model is
// set up while the weights' pages come into memory behind it: the first requests then run at
// the steady rate instead of faulting each weight page in on first use (or waiting at load for
// the whole model to be read).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

namespace tandem {

class BackgroundPageIn {
  public:
    // Starts paging the ranges in (page_in, in chunks) and logs the bytes and seconds when done.
    // The ranges must stay mapped until this object is destroyed.
    explicit BackgroundPageIn(std::vector<std::span<const uint8_t>> ranges);
    // Stops after the chunk in progress and joins the thread: nothing touches the ranges after.
    ~BackgroundPageIn();
    BackgroundPageIn(const BackgroundPageIn&) = delete;
    BackgroundPageIn& operator=(const BackgroundPageIn&) = delete;

    bool done() const { return done_.load(std::memory_order_acquire); }
    uint64_t bytes_done() const { return bytes_done_.load(std::memory_order_relaxed); }

  private:
    void run();

    std::vector<std::span<const uint8_t>> ranges_;
    std::atomic<bool> stop_{false}, done_{false};
    std::atomic<uint64_t> bytes_done_{0};
    std::thread thread_;  // last: started once the members it reads exist
};

}  // namespace tandem
