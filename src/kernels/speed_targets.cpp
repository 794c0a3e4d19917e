#include "kernels/speed_targets.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tandem {
namespace {

// Ratios are checked as the benchmark prints them, to two decimals (the read to a percent): a
// 0.996 printed "1.00" is not a miss of 1.0.
double as_printed(double ratio) {
    return std::round(ratio * 100) / 100;
}

}  // namespace

bool core_type(std::string_view type) {
    return std::find(kCoreTypes.begin(), kCoreTypes.end(), type) != kCoreTypes.end();
}

std::vector<std::string> missed_speed_targets(std::string_view type, const KernelSpeed& measured,
                                              const SpeedTargets& t) {
    KernelSpeed s = measured;
    s.dram_vs_ggml = as_printed(s.dram_vs_ggml);
    s.l2_vs_ggml = as_printed(s.l2_vs_ggml);
    s.c8_vs_matvecs = as_printed(s.c8_vs_matvecs);
    std::vector<std::string> missed;
    if (s.dram_vs_ggml > 0 && s.dram_vs_ggml < t.dram_vs_ggml)
        missed.push_back(fmt::format("dram<{:.1f}", t.dram_vs_ggml));
    const double l2 = core_type(type) ? t.l2_vs_ggml_core : t.l2_vs_ggml;
    if (s.l2_vs_ggml > 0 && s.l2_vs_ggml < l2) missed.push_back(fmt::format("L2<{:.1f}", l2));
    if (s.c8_vs_matvecs > t.c8_vs_matvecs)
        missed.push_back(fmt::format("C=8>{:.2f}", t.c8_vs_matvecs));
    // The read target holds a kernel whose compute alone fits in it: one that needs more than
    // that share of the memory's time for its arithmetic (from L2) cannot also overlap it all.
    const bool compute_bound = s.l2_gbs * t.read_fraction < s.stream_gbs;
    if (s.stream_gbs > 0 && !compute_bound) {
        if (as_printed(s.dram_gbs / s.stream_gbs) < t.read_fraction)
            missed.push_back(fmt::format("read<{:.0f}%", 100 * t.read_fraction));
    }
    return missed;
}

}  // namespace tandem
