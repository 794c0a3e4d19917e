// A thread that pages mapped ranges in chunk by chunk, stopping between chunks when asked.
#include "base/background_page_in.h"

#include <algorithm>

#include "base/log.h"
#include "base/resident_memory.h"
#include "base/system_memory.h"
#include "base/timer.h"

namespace tandem {
namespace {

// Small enough that a stop request waits at most one chunk's read, large enough that the
// madvise calls cost nothing next to the reading.
constexpr size_t kChunk = size_t{16} << 20;

}  // namespace

BackgroundPageIn::BackgroundPageIn(std::vector<std::span<const uint8_t>> ranges)
    : ranges_(std::move(ranges)), thread_([this] { run(); }) {}

BackgroundPageIn::~BackgroundPageIn() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
}

void BackgroundPageIn::run() {
    const Stopwatch watch;
    for (const std::span<const uint8_t>& range : ranges_) {
        for (size_t at = 0; at < range.size(); at += kChunk) {
            if (stop_.load(std::memory_order_relaxed)) {
                log_debug("background page-in stopped after {}", format_bytes(bytes_done()));
                return;
            }
            const size_t len = std::min(kChunk, range.size() - at);
            page_in(range.data() + at, len);
            bytes_done_.fetch_add(len, std::memory_order_relaxed);
        }
    }
    done_.store(true, std::memory_order_release);
    const double seconds = watch.seconds();
    log_info("weights paged in (in the background): {} in {:.2f} s ({:.2f} GiB/s)",
             format_bytes(bytes_done()), seconds,
             static_cast<double>(bytes_done()) / (1u << 30) / std::max(seconds, 1e-9));
}

}  // namespace tandem
