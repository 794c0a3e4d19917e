// The expert slot cache on the device (the `offload` strategy): routed experts whose weights live
// in host memory are copied into slots of VRAM when a step needs them and computed there, the
// least recently used slot giving way. The table of which expert sits in which slot lives on the
// device and is kept by a kernel, and the copies are read by kernels straight from host memory
// that is registered and mapped (zero-copy), so a decode step with misses needs no host round
// trip and stays one CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cpu/moe_layer.h"

namespace tandem::cuda {

// The most routes one call of assign_slots takes (a decode batch's tokens × top-k).
constexpr int kMaxSlotRoutes = 256;

// The slots' device state: which expert (layer · n_expert + e) each holds, and when it was last
// used (a counter advanced by every call).
struct SlotTable {
    int32_t* slot_of = nullptr;     // [n_layer · n_expert]: the slot holding it, or -1
    int32_t* owner = nullptr;       // [n_slots]: the expert held, or -1
    uint32_t* last_used = nullptr;  // [n_slots]
    uint32_t* clock = nullptr;      // [1]
    int32_t* fill_slot = nullptr;   // [kMaxSlotRoutes]: the slots the last call must fill ...
    int32_t* fill_expert = nullptr;  // [kMaxSlotRoutes]: ... with these experts of its layer
    int32_t* n_fills = nullptr;      // [1]
    uint64_t* counts = nullptr;      // [2]: hits and misses so far
    int n_slots = 0;
    int n_expert = 0;
};

// Where one layer's experts come from and where they go within a slot (gate, up, down).
struct SlotLayer {
    const uint8_t* source[3] = {};   // expert 0's bytes, device-visible host memory
    int64_t stride[3] = {};          // bytes from one expert to the next in the source
    int64_t bytes[3] = {};           // bytes of one expert
    int64_t offset[3] = {};          // where the part starts within a slot
    const float* scales[3] = {};     // per-expert second-level scales on the device, or nullptr
    const float* biases[3] = {};     // per-expert biases on the device, or nullptr ...
    int64_t bias_stride[3] = {};     // ... floats from one expert's to the next
    int64_t bias_rows[3] = {};       // ... floats of one expert
};

// `t` with its list of fills at `words` (2 · capacity + 1 ints: the slots, the experts, their
// count), the layout every list of fills keeps.
inline SlotTable with_fill_list(SlotTable t, int32_t* words, int capacity) {
    t.fill_slot = words;
    t.fill_expert = words + capacity;
    t.n_fills = words + 2 * capacity;
    return t;
}

// The slots' memory: n_slots slots of slot_bytes, and the per-slot copies of the scales and
// biases.
struct SlotMemory {
    uint8_t* base = nullptr;
    int64_t slot_bytes = 0;  // from one slot to the next
    // When set, part p of slot s lies at base + offset[p] + s · part_stride[p] instead: the
    // prefill stream's buffers, whose slot s is expert s of whole tensors laid end to end.
    int64_t part_stride[3] = {};
    float* scales[3] = {};       // [n_slots] each
    float* biases[3] = {};       // [n_slots][bias_stride[p]] each
    int64_t bias_stride[3] = {};  // floats from one slot's biases to the next
};

// offload: gives every expert that `routes` (n_routes <= kMaxSlotRoutes, experts of `layer`)
// names a slot: those already in one keep it (a hit), the others (misses, in route order) take
// the least recently used slot not used by this call (the lowest index among equals), which needs
// n_slots >= the distinct experts routed. Writes slot_routes (each route with its slot in place
// of the expert) and the fills that fill_slots must copy.
void assign_slots(const Route* routes, int n_routes, int layer, const SlotTable& table,
                  Route* slot_routes, cudaStream_t stream);

// hybrid: splits `routes` into those whose expert has a slot (slot_routes names the slot, -1 for
// the others) and the misses (cpu_routes keeps their expert, -1 for the hits), and gives the
// first max_fetch distinct missed experts the least recently used slots not used by this call
// for later calls (fill_slots copies them; this call's misses still go to the CPU).
void split_slot_routes(const Route* routes, int n_routes, int layer, const SlotTable& table,
                       int max_fetch, Route* slot_routes, Route* cpu_routes, cudaStream_t stream);

// The distinct experts that `routes` names (experts below n_expert, at most kMaxListedExperts),
// as the list of fills that copies each into the slot of its own index (in expert order): for
// the prefill stream, which copies only the experts a batch routes to. With slot_of (a layer's
// row of a slot table's slot_of), those that have a slot are listed in `slotted` instead, each
// with its slot in fill_expert: to be copied from there.
constexpr int kMaxListedExperts = 4096;
void list_routed_experts(const Route* routes, int n_routes, int n_expert, const SlotTable& list,
                         cudaStream_t stream, const int32_t* slot_of = nullptr,
                         const SlotTable* slotted = nullptr);

// Copies the experts that the last assign_slots, split_slot_routes or list_routed_experts call
// gave slots (at most max_fills: its n_routes, max_fetch or n_expert) from host memory into
// their slots, with their scales and biases.
void fill_slots(const SlotLayer& layer, const SlotTable& table, const SlotMemory& memory,
                int max_fills, cudaStream_t stream);

}  // namespace tandem::cuda
