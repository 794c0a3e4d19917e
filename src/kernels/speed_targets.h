// The speed targets the CPU kernels are held to, as `tandem bench kernels` measures them, and
// the check of one weight type's figures against them. The benchmark prints what each type
// misses, so a run shows the targets' state without reading the table by hand.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// One weight type's figures from one benchmark run. A ratio of 0 was not measured (no ggml run:
// the oracle kit not set up, or --no-ggml).
struct KernelSpeed {
    double dram_vs_ggml = 0;   // matvec, weights far larger than the LLC: our speed / ggml's
    double l2_vs_ggml = 0;     // matvec, weights in L2 (pure compute): our speed / ggml's
    double c8_vs_matvecs = 0;  // C = 8 small matmul from DRAM: its time / eight matvecs' time
    double dram_gbs = 0;       // the DRAM matvec's weight bytes per second
    double l2_gbs = 0;         // the in-L2 matvec's
    double stream_gbs = 0;     // the STREAM-style read on the same threads
};

struct SpeedTargets {
    double dram_vs_ggml = 1.0;
    double l2_vs_ggml = 1.0;
    double l2_vs_ggml_core = 1.2;  // the types most models are made of (core_type)
    double c8_vs_matvecs = 0.35;
    // Of the STREAM-style read, for the DRAM matvec of a type that is not compute-bound: one
    // whose in-L2 matvec would take at most that fraction of the read's time (L2 GB/s at least
    // the read / read_fraction).
    double read_fraction = 0.9;
};
inline constexpr SpeedTargets kSpeedTargets{};

// The types held to l2_vs_ggml_core.
inline constexpr std::array<std::string_view, 7> kCoreTypes = {"q4_K", "q5_K",  "q6_K",  "q8_0",
                                                               "q4_0", "mxfp4", "iq4_xs"};
bool core_type(std::string_view type);

// The targets the figures of `type` miss, each as a short label ("dram<1.0", "L2<1.2",
// "C=8>0.35", "read<90%"); empty when it meets every target that was measured. Ratios are
// taken to two decimals, as the benchmark prints them.
std::vector<std::string> missed_speed_targets(std::string_view type, const KernelSpeed& s,
                                              const SpeedTargets& t = kSpeedTargets);

}  // namespace tandem
