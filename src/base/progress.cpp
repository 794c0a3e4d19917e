// Progress of a long load.
#include "base/progress.h"

#include "base/log.h"
#include "base/system_memory.h"

namespace tandem {
namespace {
// The first line after 2 s, then one every 5 s: a minute-long load of a big model shows a dozen.
constexpr double kFirstReport = 2.0;
constexpr double kReportEvery = 5.0;
}  // namespace

LoadProgress::LoadProgress(std::string what, uint64_t total_bytes, int n_parts, bool enabled)
    : what_(std::move(what)),
      total_(total_bytes),
      n_parts_(n_parts),
      enabled_(enabled),
      next_report_(kFirstReport) {}

void LoadProgress::add(uint64_t bytes) {
    done_ += bytes;
    if (!enabled_) return;
    const double t = watch_.seconds();
    if (t < next_report_ || done_ >= total_) return;
    next_report_ = t + kReportEvery;
    const double percent =
        total_ > 0 ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0;
    const std::string part =
        n_parts_ > 1 ? fmt::format(", part {} of {}", part_ + 1, n_parts_) : "";
    log_info("{}: {} of {} ({:.0f}%){}, {:.1f} s", what_, format_bytes(done_), format_bytes(total_),
             percent, part, t);
}

}  // namespace tandem
