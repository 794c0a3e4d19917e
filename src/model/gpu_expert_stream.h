// Prefill over experts that live in host memory: a prompt batch routes to nearly every expert of
// a layer, so the layer's expert tensors are copied whole into VRAM and computed there by the
// GPU's grouped expert kernels, as if resident. Two buffers take turns: while the GPU computes
// one layer's experts, the copy engine fills the other with the next host layer's (on a stream
// of its own, ordered by events), so the copies hide behind the compute when PCIe keeps up; the
// last host layer's compute hides the copy of the first's, for the next batch. The host ranges
// are registered with the driver first, so they copy at the pinned rate.
//
// A batch that routes to few of a layer's experts (a short prompt, a router that favours a few)
// needs only those: each batch lists the experts it routes to per layer, and a layer whose last
// batch routed to under half of what its whole copy would move copies only the routed ones, by a
// kernel reading the registered host memory, after its router (that copy cannot start a layer
// early, so it pays only when it moves much less).
//
// Under the offload and hybrid strategies some experts already sit in VRAM slots: both copies
// take those from the slots (device to device) and only the others from host memory, so a
// prefill moves over PCIe what the slots lack.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/moe_layer.h"
#include "cuda/expert_slots.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "model/model_weights.h"

namespace tandem {

class GpuExpertSlots;

class GpuExpertStream {
  public:
    // The VRAM one buffer takes for the largest of the host layers' experts.
    static size_t buffer_bytes(const ModelWeights& host, const std::vector<bool>& on_cpu);

    // layers: per layer, the experts of a host layer with their matrices in host memory (what
    // is copied) and their per-expert scales and biases on the device; n_expert 0 for the
    // others.
    explicit GpuExpertStream(std::vector<MoeLayer> layers);
    // Waits for the copies under way (the first layer's, copied ahead for a next batch that may
    // never come) before the buffers and the host registration go.
    ~GpuExpertStream();
    GpuExpertStream(const GpuExpertStream&) = delete;
    GpuExpertStream& operator=(const GpuExpertStream&) = delete;

    // The experts of host layer `layer` that `routes` (n_routes, on the device) name in VRAM for
    // work queued on `compute` after this call: starts the copy of the layer's experts unless it
    // is under way or done (or of the routed ones only, as above), and the copy of the next host
    // layer's (after the last, the first's) into the other buffer. Call release(layer) once the
    // work reading them is queued, before the next acquire.
    MoeLayer acquire(int layer, const Route* routes, int n_routes, cudaStream_t compute);
    void release(int layer, cudaStream_t compute);

    // Makes the work queued on `stream` after this call wait for the copies' reads of slots queued
    // so far: before a pass that may refill those slots (the first after a prefill, whose last
    // layer copied the first one's ahead for the next batch, partly out of slots).
    void order_before(cudaStream_t stream);

    // The experts that `slots` holds (its slot_map()), which the whole-layer copies from now on
    // take from there; call again whenever the slots may have changed (before each prefill
    // pass), with nullptr when there are none.
    void take_from_slots(const GpuExpertSlots* slots, std::vector<int32_t> slot_map);

    // What registering the host ranges gave: pinned GiB, or why the copies run pageable.
    const std::string& host_memory() const { return host_memory_; }
    // What the copies moved so far: whole-layer copies with their bytes from host memory and
    // from slots, and routed-only copies (whose bytes only the device knows).
    struct Traffic {
        long whole_copies = 0, routed_only_copies = 0;
        double host_bytes = 0, slot_bytes = 0;
    };
    const Traffic& traffic() const { return traffic_; }
    // Whether the host experts are registered with the driver (pinned and mapped).
    bool pinned() const { return registration_.bytes() > 0; }

  private:
    struct Buffer {
        cuda::DeviceBuffer memory;
        cuda::Event copied;    // the copy into it is done
        cuda::Event released;  // the compute reading it is done
        int layer = -1;        // whose experts it holds or receives
    };
    void start_copy(int layer, Buffer& b);
    // Whether `layer` copies only the experts routed to, for a batch of n_routes routes.
    bool copies_routed_only(int layer, int n_routes) const;
    // The lists of routed experts of host layer `layer` (cuda::list_routed_experts): those to
    // copy from host memory, or with in_slots those to copy from their slots.
    cuda::SlotTable routed_list(int layer, bool in_slots) const;
    // Where gate, up and down start in a buffer holding `layer`'s experts.
    std::array<int64_t, 3> part_offsets_of(int layer) const;
    // A buffer as the destination of cuda::fill_slots: expert e of `layer` where the whole
    // copy puts it.
    cuda::SlotMemory as_slots(Buffer& b, int layer) const;
    // Whether expert e of `layer` sits in a slot that take_from_slots named.
    bool in_slot(int layer, int e) const;
    // Queues on the copy stream the copies of `layer`'s experts that sit in slots into b.
    void copy_from_slots(int layer, Buffer& b);

    std::vector<MoeLayer> layers_;
    std::vector<int> ordinal_;      // layer -> its rank among the host layers, -1: resident
    std::vector<int> host_layers_;  // in order
    cuda::Stream copy_stream_;
    cuda::Event slots_read_;          // after the last copy's reads of slots
    bool slot_reads_queued_ = false;  // since the last order_before()
    Buffer buffers_[2];
    int last_acquired_ = 1;  // the buffer acquire() gave last (1: the first takes buffer 0)
    int acquired_layer_ = -1;  // acquired and not yet released, or -1
    cuda::HostRegistration registration_;
    std::string host_memory_;
    Traffic traffic_;
    // The routed-only copies: each layer's experts as the kernel reads them (device pointers to
    // the registered host memory), the device lists of routed experts, and per layer the count
    // of its last batch's routed experts (pinned, written by the stream; -1: none yet) and that
    // batch's routes.
    std::vector<cuda::SlotLayer> sources_;
    cuda::DeviceBuffer lists_;
    std::vector<size_t> list_at_;  // per layer, ints into lists_
    cuda::PinnedBuffer routed_counts_;
    std::vector<int> routes_counted_;
    // take_from_slots: the slots, which slot holds each expert, and per layer the list of its
    // experts in slots (as fill_slots takes them: destination expert, source slot), staged in
    // pinned memory and copied to the device once per take_from_slots (2 · n_expert + 1 ints a
    // layer).
    const GpuExpertSlots* slots_ = nullptr;
    std::vector<int32_t> slot_map_;
    std::vector<int> n_slotted_;
    cuda::PinnedBuffer slot_lists_host_;
    cuda::DeviceBuffer slot_lists_;
};

}  // namespace tandem
