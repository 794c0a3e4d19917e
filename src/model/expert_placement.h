// Where a MoE model's routed experts live when the rest of it runs on the GPU: the strategy
// (--moe-strategy) and how many layers keep their experts in host memory for the CPU executor
// (--moe-cpu-layers), decided from what the parts need against the GPU memory budget. Plain
// arithmetic over byte counts, so that the choice is testable without a GPU.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// fused: every expert in VRAM. cpu: every routed expert on the CPU executor, everything else on
// the GPU. offload: every routed expert in host memory, a cache of expert slots in VRAM (least
// recently used) that decode steps copy missed experts into and compute them in. hybrid: as
// offload, but a step's misses run on the CPU executor while the GPU computes the hits, and up to
// a few missed experts a step are copied into slots for later steps. auto: fused when
// the model fits the budget, otherwise hybrid with as many slots as fit (cpu when none does);
// with --moe-cpu-layers N, the experts of the first N layers on the CPU (as llama.cpp's
// --n-cpu-moe) and the others in VRAM.
enum class MoeStrategy { kAuto, kFused, kCpu, kOffload, kHybrid };

// "auto", "fused", "cpu", "offload" or "hybrid"; throws Error listing the strategies otherwise.
MoeStrategy parse_moe_strategy(std::string_view name);
const char* moe_strategy_name(MoeStrategy s);

// What the GPU backend is asked for, beside the device.
struct GpuOptions {
    double mem_gib = 0;  // what the GPU backend may take; 0: the free memory less a margin
    MoeStrategy moe_strategy = MoeStrategy::kAuto;
    int moe_cpu_layers = -1;  // layers whose experts stay on the CPU; -1: the strategy decides
    int moe_slots = 0;        // offload, hybrid: expert slots in VRAM; 0: as many as fit
    int moe_hybrid_max_fetch = -1;  // hybrid: missed experts copied into slots a step; -1: auto
};

// The sizes the decision is made from.
struct PlacementNeeds {
    size_t dense_bytes = 0;                 // everything but routed experts: weights, KV, scratch
    std::vector<size_t> layer_expert_bytes;  // per layer; 0 for a layer without experts
    // VRAM taken as soon as any layer's experts are on the CPU (the prefill stream's buffers).
    size_t stream_bytes = 0;
    // offload: the bytes of one expert slot, the fewest slots a decode batch needs, and the most
    // that can be used (every expert of every layer).
    size_t slot_bytes = 0;
    int min_slots = 0;
    int max_slots = 0;
    size_t budget_bytes = 0;
};

struct ExpertPlacement {
    std::vector<bool> experts_on_cpu;  // per layer
    int n_cpu_layers = 0;              // MoE layers whose experts are on the CPU
    int n_moe_layers = 0;
    int n_slots = 0;                   // offload, hybrid: expert slots in VRAM (0: neither)
    bool hybrid = false;               // the slots' misses run on the CPU executor
    size_t gpu_bytes = 0;              // what the GPU holds under this placement
};

// The placement for `options`, or an Error of one line saying what does not fit and what would
// (the dense part's minimum, the strategy or layer count that fits).
ExpertPlacement place_experts(const PlacementNeeds& needs, const GpuOptions& options);

// hybrid's default --moe-hybrid-max-fetch: the missed experts a layer may copy into slots a
// step, from the measured seconds the CPU executor takes for one expert and the seconds one
// expert's copy into a slot takes. A layer's copies overlap the rest of the step, which is at
// least the CPU's share of the layer when its routes miss: k · cpu seconds for top-k k. As many
// copies as fit in that (k · cpu / copy), at least 1 (without copies the slots never fill) and
// at most k (a token's misses).
int hybrid_max_fetch(int n_expert_used, double cpu_seconds_per_expert,
                     double copy_seconds_per_expert);

// "fused", "cpu", "offload with N slots" or "N of M layers' experts on the CPU", for logs.
std::string describe(const ExpertPlacement& p);

}  // namespace tandem
