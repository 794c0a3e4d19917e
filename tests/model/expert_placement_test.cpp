// The expert placement decision: which layers' experts stay on the CPU for each strategy and
// budget, and the one-line refusals.
#include "model/expert_placement.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace tandem {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

// Four layers: the first dense, three with 2 GiB of experts each; 3 GiB of dense part.
PlacementNeeds needs(double budget_gib) {
    PlacementNeeds n;
    n.dense_bytes = 3 * kGiB;
    n.layer_expert_bytes = {0, 2 * kGiB, 2 * kGiB, 2 * kGiB};
    n.budget_bytes = static_cast<size_t>(budget_gib * kGiB);
    return n;
}

GpuOptions options(MoeStrategy s, int cpu_layers = -1) {
    GpuOptions o;
    o.moe_strategy = s;
    o.moe_cpu_layers = cpu_layers;
    return o;
}

std::string error_of(const PlacementNeeds& n, const GpuOptions& o) {
    try {
        place_experts(n, o);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(ExpertPlacement, AutoIsFusedWhenEverythingFits) {
    const ExpertPlacement p = place_experts(needs(9.5), options(MoeStrategy::kAuto));
    EXPECT_EQ(p.n_cpu_layers, 0);
    EXPECT_EQ(p.n_moe_layers, 3);
    EXPECT_EQ(p.gpu_bytes, 9 * kGiB);
    EXPECT_EQ(p.experts_on_cpu, (std::vector<bool>{false, false, false, false}));
    EXPECT_EQ(describe(p), "fused (every expert in VRAM)");
}

TEST(ExpertPlacement, AutoMovesTheFirstLayersExpertsUntilTheRestFits) {
    ExpertPlacement p = place_experts(needs(7.5), options(MoeStrategy::kAuto));
    EXPECT_EQ(p.n_cpu_layers, 1);
    EXPECT_EQ(p.experts_on_cpu, (std::vector<bool>{false, true, false, false}));
    EXPECT_EQ(p.gpu_bytes, 7 * kGiB);
    p = place_experts(needs(3.5), options(MoeStrategy::kAuto));
    EXPECT_EQ(p.n_cpu_layers, 3);
    EXPECT_EQ(p.gpu_bytes, 3 * kGiB);
    EXPECT_EQ(describe(p), "cpu (every routed expert on the CPU executor)");
}

TEST(ExpertPlacement, ExplicitLayerCountsAndStrategies) {
    ExpertPlacement p = place_experts(needs(100), options(MoeStrategy::kAuto, 2));
    EXPECT_EQ(p.experts_on_cpu, (std::vector<bool>{false, true, true, false}));
    EXPECT_EQ(describe(p), "the experts of 2 of 3 layers on the CPU executor, the others in VRAM");
    p = place_experts(needs(100), options(MoeStrategy::kAuto, 0));
    EXPECT_EQ(p.n_cpu_layers, 0);
    p = place_experts(needs(100), options(MoeStrategy::kAuto, 50));  // as many as there are
    EXPECT_EQ(p.n_cpu_layers, 3);
    p = place_experts(needs(100), options(MoeStrategy::kCpu));
    EXPECT_EQ(p.experts_on_cpu, (std::vector<bool>{false, true, true, true}));
    p = place_experts(needs(9), options(MoeStrategy::kFused));
    EXPECT_EQ(p.n_cpu_layers, 0);
}

TEST(ExpertPlacement, CountsTheStreamBuffersOnceAnyExpertsAreOnTheCpu) {
    PlacementNeeds n = needs(7.5);  // without stream buffers one layer off would fit (7 GiB)
    n.stream_bytes = kGiB;
    ExpertPlacement p = place_experts(n, options(MoeStrategy::kAuto));
    EXPECT_EQ(p.n_cpu_layers, 2);
    EXPECT_EQ(p.gpu_bytes, 6 * kGiB);
    n.budget_bytes = 9 * kGiB;  // fused needs no stream
    p = place_experts(n, options(MoeStrategy::kFused));
    EXPECT_EQ(p.gpu_bytes, 9 * kGiB);
}

TEST(ExpertPlacement, RefusesWhatDoesNotFitInOneLine) {
    EXPECT_NE(error_of(needs(2.5), options(MoeStrategy::kAuto))
                  .find("at least 3.00 GiB for the model's dense part"),
              std::string::npos);
    EXPECT_NE(error_of(needs(8), options(MoeStrategy::kFused))
                  .find("--moe-strategy fused: the model needs 9.00 GiB"),
              std::string::npos);
    EXPECT_NE(error_of(needs(5.5), options(MoeStrategy::kAuto, 1))
                  .find("--moe-cpu-layers 1: the GPU would hold 7.00 GiB but 5.50 GiB are "
                        "available (--moe-cpu-layers 2 fits)"),
              std::string::npos);
    EXPECT_NE(error_of(needs(100), options(MoeStrategy::kCpu, 1)).find("--moe-strategy cpu"),
              std::string::npos);
    EXPECT_NE(error_of(needs(100), options(MoeStrategy::kFused, 2)).find("not with --moe-strategy fused"),
              std::string::npos);
    for (const std::string& e : {error_of(needs(2.5), options(MoeStrategy::kAuto)),
                                 error_of(needs(8), options(MoeStrategy::kFused))}) {
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
}

TEST(ExpertPlacement, ParsesStrategies) {
    EXPECT_EQ(parse_moe_strategy("auto"), MoeStrategy::kAuto);
    EXPECT_EQ(parse_moe_strategy("fused"), MoeStrategy::kFused);
    EXPECT_EQ(parse_moe_strategy("cpu"), MoeStrategy::kCpu);
    try {
        parse_moe_strategy("gpu");
        ADD_FAILURE() << "'gpu' accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'gpu' is not auto, fused or cpu"), std::string::npos);
    }
}

}  // namespace
}  // namespace tandem
