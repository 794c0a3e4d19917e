// The expert placement decision: which layers' experts stay on the CPU for each strategy and
// budget, and the one-line refusals.
#include "model/expert_placement.h"

#include <gtest/gtest.h>

#include <cmath>
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
    PlacementNeeds n = needs(8.5);
    n.stream_bytes = kGiB;
    ExpertPlacement p = place_experts(n, options(MoeStrategy::kAuto, 1));
    EXPECT_EQ(p.gpu_bytes, 8 * kGiB);  // 3 dense + 2 layers' experts + 1 of stream
    n.budget_bytes = static_cast<size_t>(7.5 * kGiB);  // without the stream 7 GiB would fit
    EXPECT_NE(error_of(n, options(MoeStrategy::kAuto, 1)).find("(--moe-cpu-layers 2 fits)"),
              std::string::npos);
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

// needs() with 1 GiB of stream buffers and slots of 0.25 GiB, a decode batch needing 4 of them.
PlacementNeeds slot_needs(double budget_gib) {
    PlacementNeeds n = needs(budget_gib);
    n.stream_bytes = kGiB;
    n.slot_bytes = kGiB / 4;
    n.min_slots = 4;
    n.max_slots = 300;
    return n;
}

// offload: every layer's experts in host memory, the slots that fit beside the dense part (and the
// stream), never more than there are experts, never fewer than a decode batch needs.
TEST(ExpertPlacement, OffloadFillsTheRestWithSlots) {
    PlacementNeeds n = slot_needs(5.25);
    GpuOptions o = options(MoeStrategy::kOffload);
    ExpertPlacement p = place_experts(n, o);
    EXPECT_EQ(p.experts_on_cpu, (std::vector<bool>{false, true, true, true}));
    EXPECT_EQ(p.n_slots, 5);  // 1.25 GiB beside 3 GiB dense and 1 GiB of stream
    EXPECT_EQ(p.gpu_bytes, 4 * kGiB + 5 * n.slot_bytes);
    EXPECT_EQ(describe(p), "offload (every routed expert in host memory, 5 expert slots in VRAM)");
    n.max_slots = 3 + 1;
    n.budget_bytes = 100 * kGiB;
    EXPECT_EQ(place_experts(n, o).n_slots, 4);  // every expert has one
    o.moe_slots = 4;
    n.budget_bytes = static_cast<size_t>(5.25 * kGiB);
    EXPECT_EQ(place_experts(n, o).n_slots, 4);
    o.moe_slots = 6;
    EXPECT_NE(error_of(n, o).find("--moe-slots 6: 1.50 GiB of slots but 1.25 GiB are left beside "
                                  "the dense part (5 slots fit)"),
              std::string::npos);
    o.moe_slots = 0;
    n.budget_bytes = static_cast<size_t>(4.5 * kGiB);  // 2 slots fit, a decode batch needs 4
    EXPECT_NE(error_of(n, o).find("needs at least 4 expert slots (1.00 GiB) but 2 fit"),
              std::string::npos);
    EXPECT_NE(error_of(n, options(MoeStrategy::kOffload, 1)).find("--moe-cpu-layers with"),
              std::string::npos);
    GpuOptions fused_with_slots = options(MoeStrategy::kFused);
    fused_with_slots.moe_slots = 3;
    EXPECT_NE(error_of(needs(100), fused_with_slots).find("slots are for --moe-strategy offload or hybrid"),
              std::string::npos);
}

// hybrid: as offload, but one slot is enough (the misses run on the CPU).
TEST(ExpertPlacement, HybridNeedsOneSlot) {
    PlacementNeeds n = slot_needs(4.5);
    GpuOptions o = options(MoeStrategy::kHybrid);
    ExpertPlacement p = place_experts(n, o);
    EXPECT_EQ(p.n_slots, 2);
    EXPECT_TRUE(p.hybrid);
    EXPECT_EQ(describe(p), "hybrid (every routed expert in host memory, 2 expert slots in VRAM, "
                           "misses on the CPU executor)");
    n.budget_bytes = static_cast<size_t>(4.1 * kGiB);
    EXPECT_NE(error_of(n, o).find("--moe-strategy hybrid: needs at least 1 expert slot (0.25 "
                                  "GiB) but 0 fit"),
              std::string::npos);
    o.moe_hybrid_max_fetch = -2;
    EXPECT_NE(error_of(needs(100), o).find("--moe-hybrid-max-fetch -2 must be >= 0"),
              std::string::npos);
    GpuOptions offload = options(MoeStrategy::kOffload);
    offload.moe_hybrid_max_fetch = 2;
    EXPECT_NE(error_of(needs(100), offload).find("it is for --moe-strategy hybrid"),
              std::string::npos);
}

TEST(ExpertPlacement, ParsesStrategies) {
    EXPECT_EQ(parse_moe_strategy("hybrid"), MoeStrategy::kHybrid);
    EXPECT_EQ(parse_moe_strategy("offload"), MoeStrategy::kOffload);
    EXPECT_EQ(parse_moe_strategy("auto"), MoeStrategy::kAuto);
    EXPECT_EQ(parse_moe_strategy("fused"), MoeStrategy::kFused);
    EXPECT_EQ(parse_moe_strategy("cpu"), MoeStrategy::kCpu);
    try {
        parse_moe_strategy("gpu");
        ADD_FAILURE() << "'gpu' accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'gpu' is not auto, fused, cpu, offload or hybrid"), std::string::npos);
    }
}

// auto, when the model does not fit: every routed expert in host memory and as many slots as
// fit, the misses on the CPU; with no room for one slot, every expert on the CPU.
TEST(ExpertPlacement, AutoIsHybridWithTheSlotsThatFitWhenTheModelDoesNot) {
    PlacementNeeds n = slot_needs(5.25);
    ExpertPlacement p = place_experts(n, options(MoeStrategy::kAuto));
    EXPECT_TRUE(p.hybrid);
    EXPECT_EQ(p.n_slots, 5);
    EXPECT_EQ(p.experts_on_cpu, (std::vector<bool>{false, true, true, true}));
    EXPECT_EQ(p.gpu_bytes, 4 * kGiB + 5 * n.slot_bytes);
    n.budget_bytes = static_cast<size_t>(4.1 * kGiB);  // dense and stream fit, no slot does
    p = place_experts(n, options(MoeStrategy::kAuto));
    EXPECT_EQ(p.n_slots, 0);
    EXPECT_EQ(p.n_cpu_layers, 3);
    EXPECT_EQ(describe(p), "cpu (every routed expert on the CPU executor)");
    n.budget_bytes = 10 * kGiB;  // everything fits: fused, no slots
    p = place_experts(n, options(MoeStrategy::kAuto));
    EXPECT_EQ(p.n_slots, 0);
    EXPECT_EQ(p.n_cpu_layers, 0);
}

// hybrid's default copies a step: as many as the CPU's share of a layer hides, between 1 and k.
TEST(ExpertPlacement, HybridFetchesWhatTheCpuTimeHides) {
    // A copy at 55 GB/s of an expert the CPU computes at 98 GB/s: about half of top-8.
    EXPECT_EQ(hybrid_max_fetch(8, 27e-6, 48e-6), 4);
    EXPECT_EQ(hybrid_max_fetch(8, 10e-6, 48e-6), 1);  // floor(1.67)
    EXPECT_EQ(hybrid_max_fetch(8, 1e-6, 48e-6), 1);   // never none: the slots must fill
    EXPECT_EQ(hybrid_max_fetch(8, 100e-6, 48e-6), 8);  // never more than a token's misses
    EXPECT_EQ(hybrid_max_fetch(6, 48e-6, 48e-6), 6);
    EXPECT_EQ(hybrid_max_fetch(4, 30e-6, 20e-6), 4);  // floor(6), at most 4
    EXPECT_EQ(hybrid_max_fetch(32, 30e-6, 40e-6), 24);
    // A failed measurement (zero, NaN) falls back to one copy a step.
    EXPECT_EQ(hybrid_max_fetch(8, 0.0, 48e-6), 1);
    EXPECT_EQ(hybrid_max_fetch(8, 27e-6, std::nan("")), 1);
}

}  // namespace
}  // namespace tandem
