// The `offload` and `hybrid` strategies' expert slots: a cache of VRAM slots, each holding one
// expert (gate, up and down) of any host layer, filled from host memory when a decode step routes
// to an expert that has none and computed by the same kernels as resident experts
// (cuda/expert_slots.h keeps the table and does the copies on the device, inside the step's CUDA
// graph).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cpu/moe_layer.h"
#include "cuda/expert_slots.h"
#include "cuda/memory.h"
#include "cuda/stream.h"

namespace tandem {

// Where the copy kernels read `m`'s experts (its host matrices, registered with the driver as
// mapped memory) and where part p (gate, up, down) goes in a destination: offset[p]. Without
// scales or biases.
cuda::SlotLayer mapped_expert_source(const MoeLayer& m, const int64_t offset[3]);

class GpuExpertSlots {
  public:
    // The bytes one slot takes to hold an expert of any of `layers` (n_expert 0: not a host layer).
    static int64_t slot_bytes(const std::vector<MoeLayer>& layers);

    // layers: as GpuExpertStream takes them (host matrices, device scales); the host matrices must
    // be registered with the driver as mapped memory. n_slots >= the distinct experts of a decode
    // batch.
    GpuExpertSlots(const std::vector<MoeLayer>& layers, int n_slots);

    // Queues on `stream`: the slots of the experts `routes` names (n_routes of them), the copies
    // of the missed ones, and slot_routes (the routes naming slots); returns the layer's experts
    // as a view over the slots, for the routed products with slot_routes.
    MoeLayer prepare(int layer, const Route* routes, int n_routes, Route* slot_routes,
                     cudaStream_t stream);

    // hybrid: queues the split of `routes` into hits (slot_routes, naming slots) and misses
    // (cpu_routes, for the CPU executor) on `stream`, and the copies of up to max_fetch missed
    // experts into slots for later steps on a stream of their own, so that they overlap the
    // step's compute instead of delaying it (the slots they fill are none this step's hits read:
    // a filled slot belongs to this layer's missed expert from the split on); returns the view
    // over the slots for slot_routes. join() must follow before the next step.
    MoeLayer split(int layer, const Route* routes, int n_routes, int max_fetch, Route* slot_routes,
                   Route* cpu_routes, cudaStream_t stream);
    // Makes `stream` wait for the copies that split() queued (at the end of a forward pass, so
    // that a replayed graph holds them too).
    void join(cudaStream_t stream);

    // The device seconds one expert's copy from host memory into a slot takes, measured with
    // n_copies experts copied at once (as split() copies up to max_fetch), each time other ones;
    // the median over a few copies. Before any prepare() or split(): it writes slots that no
    // expert owns yet.
    double copy_seconds_per_expert(int n_copies, cudaStream_t stream);

    // Fills the slots before the first step: expert 0 of each host layer in turn, then expert 1,
    // and so on until the slots run out, so that the first prompt's streamed layers and the first
    // decode steps find part of every layer in VRAM; routing replaces them, least recently used
    // first, as it goes. Waits for the copies; returns how many experts it placed. After
    // copy_seconds_per_expert, which writes slots as it likes (and refuses to once they are
    // filled).
    int preload(cudaStream_t stream);

    // Which slot holds each expert (layer · n_expert() + e; -1: none) once the work queued on
    // `stream` is done (waits for it). The table changes only within decode steps, so a prefill
    // pass may take it as fixed.
    std::vector<int32_t> slot_map(cudaStream_t stream) const;
    // Where cuda::fill_slots reads `layer`'s experts out of the slots (a fill's expert index is
    // then a slot), writing part p at offset[p] of its destination: the prefill stream copies the
    // experts that sit in slots from there rather than from host memory.
    cuda::SlotLayer slotted_source(int layer, const int64_t offset[3]) const;

    // `layer`'s row of the device table's slot_of: the slot of each of its experts, or -1.
    const int32_t* device_slot_of(int layer) const {
        return table_.slot_of + static_cast<size_t>(layer) * table_.n_expert;
    }

    int n_slots() const { return table_.n_slots; }
    int n_expert() const { return table_.n_expert; }
    // Hits and misses so far (distinct experts per call); waits for the device.
    std::pair<uint64_t, uint64_t> counts() const;

  private:
    void check_call(int layer, int n_routes) const;
    MoeLayer view(int layer) const;
    // The table with `layer`'s own list of fills: a layer's copies may still be reading theirs
    // while later layers' splits write their own.
    cuda::SlotTable layer_table(int layer) const;

    std::vector<MoeLayer> layers_;
    std::vector<cuda::SlotLayer> sources_;  // per layer
    cuda::DeviceBuffer state_;
    cuda::DeviceBuffer memory_;
    cuda::SlotTable table_;
    cuda::SlotMemory slots_;
    cuda::Stream fill_stream_;  // hybrid's copies for later steps
    cuda::Event fill_fork_, fill_join_;
    bool fills_pending_ = false;
    bool filled_ = false;  // preload(), prepare() or split() has given experts slots
};

}  // namespace tandem
