// The expert placement decision.
#include "model/expert_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.h"

namespace tandem {
namespace {

double gib(size_t bytes) {
    return static_cast<double>(bytes) / (1u << 30);
}

// The first n MoE layers' experts on the CPU, the rest on the GPU.
ExpertPlacement first_layers_on_cpu(const PlacementNeeds& needs, int n) {
    ExpertPlacement p;
    p.experts_on_cpu.assign(needs.layer_expert_bytes.size(), false);
    p.gpu_bytes = needs.dense_bytes;
    for (size_t il = 0; il < needs.layer_expert_bytes.size(); ++il) {
        const size_t bytes = needs.layer_expert_bytes[il];
        if (bytes == 0) continue;
        ++p.n_moe_layers;
        if (p.n_cpu_layers < n) {
            p.experts_on_cpu[il] = true;
            ++p.n_cpu_layers;
        } else {
            p.gpu_bytes += bytes;
        }
    }
    if (p.n_cpu_layers > 0) p.gpu_bytes += needs.stream_bytes;
    return p;
}

// Every routed expert in host memory and as many expert slots as the budget holds beside the
// dense part (or o.moe_slots), for offload or hybrid.
ExpertPlacement with_slots(const PlacementNeeds& needs, const GpuOptions& o, ExpertPlacement p,
                           MoeStrategy strategy) {
    if (p.n_moe_layers == 0) return p;
    const size_t budget = needs.budget_bytes;
    const size_t room = budget - std::min(budget, p.gpu_bytes);
    const int fit = static_cast<int>(
        std::min<size_t>(room / std::max<size_t>(1, needs.slot_bytes), INT32_MAX));
    const int n = o.moe_slots > 0 ? o.moe_slots : std::min(fit, needs.max_slots);
    if (n > fit) {
        fail("--moe-slots {}: {:.2f} GiB of slots but {:.2f} GiB are left beside the dense "
             "part ({} slots fit)",
             n, gib(n * needs.slot_bytes), gib(room), fit);
    }
    // offload computes every routed expert in a slot; hybrid's misses go to the CPU.
    const int least = strategy == MoeStrategy::kOffload ? needs.min_slots : 1;
    if (n < least) {
        fail("--moe-strategy {}: {} at least {} expert slot{} ({:.2f} GiB) but {} fit "
             "beside the dense part: use --moe-strategy cpu",
             moe_strategy_name(strategy), least > 1 ? "a decode batch needs" : "needs", least,
             least > 1 ? "s" : "", gib(least * needs.slot_bytes), n);
    }
    p.n_slots = n;
    p.hybrid = strategy == MoeStrategy::kHybrid;
    p.gpu_bytes += static_cast<size_t>(n) * needs.slot_bytes;
    return p;
}

}  // namespace

MoeStrategy parse_moe_strategy(std::string_view name) {
    if (name == "auto") return MoeStrategy::kAuto;
    if (name == "fused") return MoeStrategy::kFused;
    if (name == "cpu") return MoeStrategy::kCpu;
    if (name == "offload") return MoeStrategy::kOffload;
    if (name == "hybrid") return MoeStrategy::kHybrid;
    fail("--moe-strategy: '{}' is not auto, fused, cpu, offload or hybrid", name);
}

const char* moe_strategy_name(MoeStrategy s) {
    switch (s) {
        case MoeStrategy::kAuto:
            return "auto";
        case MoeStrategy::kFused:
            return "fused";
        case MoeStrategy::kCpu:
            return "cpu";
        case MoeStrategy::kOffload:
            return "offload";
        case MoeStrategy::kHybrid:
            return "hybrid";
    }
    return "?";
}

ExpertPlacement place_experts(const PlacementNeeds& needs, const GpuOptions& o) {
    int n_moe = 0;
    for (size_t bytes : needs.layer_expert_bytes) n_moe += bytes > 0;
    if (o.moe_cpu_layers < -1) fail("--moe-cpu-layers {} must be >= 0", o.moe_cpu_layers);
    const size_t budget = needs.budget_bytes;
    if (needs.dense_bytes > budget) {
        fail(
            "the GPU needs at least {:.2f} GiB for the model's dense part (attention, KV cache, "
            "scratch) but {:.2f} GiB are available: lower --ctx / --batch, or run it with "
            "--device cpu",
            gib(needs.dense_bytes), gib(budget));
    }
    const ExpertPlacement all_gpu = first_layers_on_cpu(needs, 0);
    const ExpertPlacement all_cpu = first_layers_on_cpu(needs, n_moe);
    if (o.moe_slots < 0) fail("--moe-slots {} must be >= 0", o.moe_slots);
    const bool slotted =
        o.moe_strategy == MoeStrategy::kOffload || o.moe_strategy == MoeStrategy::kHybrid;
    if (o.moe_slots > 0 && !slotted)
        fail("--moe-slots {}: expert slots are for --moe-strategy offload or hybrid", o.moe_slots);
    if (o.moe_hybrid_max_fetch < -1)
        fail("--moe-hybrid-max-fetch {} must be >= 0", o.moe_hybrid_max_fetch);
    if (o.moe_hybrid_max_fetch >= 0 && o.moe_strategy != MoeStrategy::kHybrid)
        fail("--moe-hybrid-max-fetch {}: it is for --moe-strategy hybrid", o.moe_hybrid_max_fetch);
    switch (o.moe_strategy) {
        case MoeStrategy::kOffload:
        case MoeStrategy::kHybrid:
            if (o.moe_cpu_layers >= 0)
                fail("--moe-cpu-layers with --moe-strategy {}, which keeps every layer's experts "
                     "in host memory",
                     moe_strategy_name(o.moe_strategy));
            return with_slots(needs, o, all_cpu, o.moe_strategy);
        case MoeStrategy::kFused:
            if (o.moe_cpu_layers > 0)
                fail("--moe-cpu-layers {} puts experts on the CPU: not with --moe-strategy fused",
                     o.moe_cpu_layers);
            if (all_gpu.gpu_bytes > budget) {
                fail(
                    "--moe-strategy fused: the model needs {:.2f} GiB of GPU memory but {:.2f} GiB "
                    "are available; --moe-strategy auto fits it with experts on the CPU",
                    gib(all_gpu.gpu_bytes), gib(budget));
            }
            return all_gpu;
        case MoeStrategy::kCpu:
            if (o.moe_cpu_layers >= 0 && o.moe_cpu_layers != n_moe)
                fail("--moe-cpu-layers {} with --moe-strategy cpu, which puts all {} layers' "
                     "experts on the CPU: use --moe-strategy auto",
                     o.moe_cpu_layers, n_moe);
            return all_cpu;
        case MoeStrategy::kAuto:
            break;
    }
    if (o.moe_cpu_layers >= 0) {
        const ExpertPlacement p = first_layers_on_cpu(needs, o.moe_cpu_layers);
        if (p.gpu_bytes > budget) {
            int fits = n_moe;
            while (fits > 0 && first_layers_on_cpu(needs, fits - 1).gpu_bytes <= budget) --fits;
            fail("--moe-cpu-layers {}: the GPU would hold {:.2f} GiB but {:.2f} GiB are available "
                 "(--moe-cpu-layers {} fits)",
                 o.moe_cpu_layers, gib(p.gpu_bytes), gib(budget), fits);
        }
        return p;
    }
    if (all_gpu.gpu_bytes <= budget) return all_gpu;
    // Too large for the GPU: every routed expert in host memory and as many slots as fit, the
    // misses on the CPU (hybrid); with no room for even one slot, every expert on the CPU.
    const size_t room = budget - std::min(budget, all_cpu.gpu_bytes);
    if (n_moe == 0 || needs.max_slots == 0 || room < needs.slot_bytes) return all_cpu;
    return with_slots(needs, o, all_cpu, MoeStrategy::kHybrid);
}

int hybrid_max_fetch(int n_expert_used, double cpu_seconds_per_expert,
                     double copy_seconds_per_expert) {
    if (n_expert_used < 1) return 0;
    if (!(cpu_seconds_per_expert > 0) || !(copy_seconds_per_expert > 0)) return 1;
    const double fit = n_expert_used * cpu_seconds_per_expert / copy_seconds_per_expert;
    return static_cast<int>(std::clamp(std::floor(fit), 1.0, static_cast<double>(n_expert_used)));
}

std::string describe(const ExpertPlacement& p) {
    if (p.n_slots > 0 && p.hybrid) {
        return fmt::format(
            "hybrid (every routed expert in host memory, {} expert slots in VRAM, misses on the "
            "CPU executor)",
            p.n_slots);
    }
    if (p.n_slots > 0)
        return fmt::format("offload (every routed expert in host memory, {} expert slots in VRAM)",
                           p.n_slots);
    if (p.n_cpu_layers == 0) return "fused (every expert in VRAM)";
    if (p.n_cpu_layers == p.n_moe_layers) return "cpu (every routed expert on the CPU executor)";
    return fmt::format("the experts of {} of {} layers on the CPU executor, the others in VRAM",
                       p.n_cpu_layers, p.n_moe_layers);
}

}  // namespace tandem
