// Host experts streamed through two VRAM buffers for prefill.
#include "model/gpu_expert_stream.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "cuda/check.h"
#include "model/gpu_expert_slots.h"  // mapped_expert_source

namespace tandem {
namespace {

size_t tensor_bytes(const ExpertMatrix& e, int n_expert) {
    if (e.matrix.empty()) return 0;
    return static_cast<size_t>(n_expert - 1) * e.expert_stride +
           static_cast<size_t>(e.matrix.rows) * e.matrix.row_bytes;
}

std::array<const ExpertMatrix*, 3> parts(const MoeLayer& m) {
    return {&m.gate, &m.up, &m.down};
}

// Where part i of a layer's experts sits in a buffer.
std::array<size_t, 4> part_offsets(const MoeLayer& m) {
    std::array<size_t, 4> at{};
    for (int i = 0; i < 3; ++i)
        at[i + 1] = at[i] + cuda::align_up(tensor_bytes(*parts(m)[i], m.n_expert));
    return at;
}

}  // namespace

size_t GpuExpertStream::buffer_bytes(const ModelWeights& host, const std::vector<bool>& on_cpu) {
    size_t widest = 0;
    for (size_t il = 0; il < on_cpu.size(); ++il) {
        if (on_cpu[il]) widest = std::max(widest, part_offsets(host.layers[il].experts)[3]);
    }
    return widest;
}

GpuExpertStream::GpuExpertStream(std::vector<MoeLayer> layers)
    : layers_(std::move(layers)), ordinal_(layers_.size(), -1) {
    size_t bytes = 0;
    for (size_t il = 0; il < layers_.size(); ++il) {
        const MoeLayer& m = layers_[il];
        if (m.n_expert == 0) continue;
        ordinal_[il] = static_cast<int>(host_layers_.size());
        host_layers_.push_back(static_cast<int>(il));
        // One range per expert tensor: a layer's gate, up and down may lie in different parts of
        // a split model, whose mappings need not be adjacent (registration merges the ranges
        // that touch). Every placement registers the same ranges, which two backends on one
        // model share (cuda/memory.h).
        for (const ExpertMatrix* e : parts(m)) {
            if (!e->matrix.empty()) registration_.add(e->matrix.data, tensor_bytes(*e, m.n_expert));
        }
        bytes = std::max(bytes, part_offsets(m)[3]);
    }
    for (Buffer& b : buffers_) b.memory = cuda::DeviceBuffer(bytes, "the prefill expert stream");
    Stopwatch watch;
    std::string why;
    if (registration_.register_all(&why)) {
        host_memory_ =
            fmt::format("{:.2f} GiB of host experts pinned in {:.2f} s",
                        static_cast<double>(registration_.bytes()) / (1u << 30), watch.seconds());
    } else {
        host_memory_ = "host experts copy from pageable memory (" + why + ")";
    }
    if (!pinned()) return;  // the kernel's copies read the registered memory
    sources_.resize(layers_.size());
    list_at_.assign(layers_.size(), 0);
    size_t list_ints = 0;
    for (const int il : host_layers_) {
        const MoeLayer& m = layers_[il];
        if (m.n_expert > cuda::kMaxListedExperts) {
            fail("the prefill expert stream: layer {} has {} experts (at most {})", il, m.n_expert,
                 cuda::kMaxListedExperts);
        }
        sources_[il] = mapped_expert_source(m, part_offsets_of(il).data());
        list_at_[il] = list_ints;
        list_ints += 2 * (2 * static_cast<size_t>(m.n_expert) + 1);  // two lists (routed_list)
    }
    lists_ = cuda::DeviceBuffer(sizeof(int32_t) * list_ints, "the prefill expert stream's lists");
    routed_counts_ = cuda::PinnedBuffer(sizeof(int32_t) * layers_.size(), "routed expert counts");
    std::fill_n(routed_counts_.as<int32_t>(), layers_.size(), -1);
    routes_counted_.assign(layers_.size(), 0);
}

GpuExpertStream::~GpuExpertStream() {
    cudaStreamSynchronize(copy_stream_.get());
}

cuda::SlotTable GpuExpertStream::routed_list(int layer, bool in_slots) const {
    const int n = layers_[layer].n_expert;
    return cuda::with_fill_list(
        {},
        lists_.as<int32_t>() + list_at_[layer] + (in_slots ? 2 * static_cast<size_t>(n) + 1 : 0),
        n);
}

bool GpuExpertStream::copies_routed_only(int layer, int n_routes) const {
    if (sources_.empty()) return false;
    // The count the stream wrote for the layer's last batch (read while no copy of it is queued:
    // the batch has ended, or the value is the one before; either is a fair guess).
    const int counted = reinterpret_cast<const volatile int32_t*>(routed_counts_.get())[layer];
    if (counted < 0 || routes_counted_[layer] <= 0) return false;
    // A batch with more routes reaches more experts: scale the count up, never down. The count
    // is of the routed experts that no slot held, against what the whole copy would move.
    const double expected =
        counted * std::max(1.0, static_cast<double>(n_routes) / routes_counted_[layer]);
    const int unslotted = layers_[layer].n_expert - (slots_ != nullptr ? n_slotted_[layer] : 0);
    return expected < 0.5 * unslotted;
}

std::array<int64_t, 3> GpuExpertStream::part_offsets_of(int layer) const {
    const std::array<size_t, 4> at = part_offsets(layers_[layer]);
    return {static_cast<int64_t>(at[0]), static_cast<int64_t>(at[1]), static_cast<int64_t>(at[2])};
}

cuda::SlotMemory GpuExpertStream::as_slots(Buffer& b, int layer) const {
    cuda::SlotMemory into;
    into.base = b.memory.as<uint8_t>();
    for (int i = 0; i < 3; ++i) into.part_stride[i] = parts(layers_[layer])[i]->expert_stride;
    return into;
}

void GpuExpertStream::take_from_slots(const GpuExpertSlots* slots, std::vector<int32_t> slot_map) {
    // The staged lists may still be on their way to the device.
    cuda::check(cudaStreamSynchronize(copy_stream_.get()), "streaming experts to the GPU");
    slots_ = slots;
    slot_map_ = std::move(slot_map);
    n_slotted_.assign(layers_.size(), 0);
    if (slots_ == nullptr) return;
    const int n_expert = slots_->n_expert();
    if (slot_map_.size() != layers_.size() * static_cast<size_t>(n_expert))
        fail("the prefill expert stream: a slot map of {} experts", slot_map_.size());
    const size_t words = layers_.size() * (2 * static_cast<size_t>(n_expert) + 1);
    if (slot_lists_.bytes() < sizeof(int32_t) * words) {
        slot_lists_host_ = cuda::PinnedBuffer(sizeof(int32_t) * words, "the slotted expert lists");
        slot_lists_ = cuda::DeviceBuffer(sizeof(int32_t) * words, "the slotted expert lists");
    }
    for (const int il : host_layers_) {
        int32_t* list =
            slot_lists_host_.as<int32_t>() + il * (2 * static_cast<size_t>(n_expert) + 1);
        int n = 0;
        for (int e = 0; e < layers_[il].n_expert; ++e) {
            const int32_t slot = slot_map_[static_cast<size_t>(il) * n_expert + e];
            if (slot < 0) continue;
            list[n] = e;                // the destination: where the whole copy puts expert e
            list[n_expert + n] = slot;  // the source
            ++n;
        }
        list[2 * n_expert] = n;
        n_slotted_[il] = n;
    }
    // To the device once, ahead of the copies that read them on the same stream.
    cuda::check(cudaMemcpyAsync(slot_lists_.get(), slot_lists_host_.get(), sizeof(int32_t) * words,
                                cudaMemcpyHostToDevice, copy_stream_.get()),
                "streaming experts to the GPU");
}

bool GpuExpertStream::in_slot(int layer, int e) const {
    return slots_ != nullptr && slot_map_[static_cast<size_t>(layer) * slots_->n_expert() + e] >= 0;
}

void GpuExpertStream::copy_from_slots(int layer, Buffer& b) {
    const int n_expert = slots_->n_expert();
    const size_t at = static_cast<size_t>(layer) * (2 * static_cast<size_t>(n_expert) + 1);
    const cuda::SlotTable list = cuda::with_fill_list({}, slot_lists_.as<int32_t>() + at, n_expert);
    cuda::fill_slots(slots_->slotted_source(layer, part_offsets_of(layer).data()), list,
                     as_slots(b, layer), n_slotted_[layer], copy_stream_.get());
}

void GpuExpertStream::start_copy(int layer, Buffer& b) {
    const cudaStream_t copy = copy_stream_.get();
    b.released.wait_on(copy);  // the compute that last read this buffer is done
    b.layer = -1;              // until the copy is queued whole
    const MoeLayer& m = layers_[layer];
    const std::array<size_t, 4> at = part_offsets(m);
    // First the experts that sit in slots, so that order_before() waits for those reads only.
    if (slots_ != nullptr && n_slotted_[layer] > 0) {
        copy_from_slots(layer, b);
        slots_read_.record(copy);
        slot_reads_queued_ = true;
        for (const ExpertMatrix* e : parts(m))
            traffic_.slot_bytes += static_cast<double>(n_slotted_[layer]) * tensor_bytes(*e, 1);
    }
    // From host memory, each run of experts that no slot holds (all of them, without slots).
    for (int i = 0; i < 3; ++i) {
        const ExpertMatrix& e = *parts(m)[i];
        if (e.matrix.empty()) continue;
        for (int e0 = 0; e0 < m.n_expert;) {
            if (in_slot(layer, e0)) {
                ++e0;
                continue;
            }
            int e1 = e0 + 1;
            while (e1 < m.n_expert && !in_slot(layer, e1)) ++e1;
            const size_t from = static_cast<size_t>(e0) * e.expert_stride;
            cuda::check(cudaMemcpyAsync(b.memory.as<uint8_t>() + at[i] + from, e.matrix.data + from,
                                        tensor_bytes(e, e1 - e0), cudaMemcpyHostToDevice, copy),
                        "streaming experts to the GPU");
            traffic_.host_bytes += static_cast<double>(tensor_bytes(e, e1 - e0));
            e0 = e1;
        }
    }
    ++traffic_.whole_copies;
    b.copied.record(copy);
    b.layer = layer;
}

MoeLayer GpuExpertStream::acquire(int layer, const Route* routes, int n_routes,
                                  cudaStream_t compute) {
    if (layer < 0 || layer >= static_cast<int>(ordinal_.size()) || ordinal_[layer] < 0)
        fail("moe: layer {} has no experts in host memory", layer);
    // A pass that failed between acquire and release: its kernels may still read the buffer.
    if (acquired_layer_ >= 0) buffers_[last_acquired_].released.record(compute);
    // The buffer that holds the layer (copied ahead), else the one the last layer's compute did
    // not read.
    const int in = buffers_[0].layer == layer ? 0 : buffers_[1].layer == layer ? 1 : 1 - last_acquired_;
    last_acquired_ = in;
    acquired_layer_ = layer;
    Buffer& b = buffers_[in];
    const bool routed_only = b.layer != layer && copies_routed_only(layer, n_routes);
    if (b.layer != layer && !routed_only) start_copy(layer, b);
    // The next host layer's experts into the other buffer, behind this layer's compute; after
    // the last host layer, the first's: a long prompt's next batch starts with it, and so does
    // the next prompt after decode steps, which leave these buffers alone.
    const int next_layer =
        host_layers_[(ordinal_[layer] + 1) % static_cast<int>(host_layers_.size())];
    Buffer& o = buffers_[1 - in];
    if (next_layer != layer && o.layer != next_layer && !copies_routed_only(next_layer, n_routes))
        start_copy(next_layer, o);
    b.copied.wait_on(compute);
    MoeLayer d = layers_[layer];
    if (!sources_.empty()) {
        // This batch's routed experts (those in slots on a list of their own): the lists for a
        // routed-only copy, and the count of the others for the next batch's choice.
        const bool slotted = slots_ != nullptr && n_slotted_[layer] > 0;
        const cuda::SlotTable list = routed_list(layer, false), in_slots = routed_list(layer, true);
        cuda::list_routed_experts(routes, n_routes, d.n_expert, list, compute,
                                  slotted ? slots_->device_slot_of(layer) : nullptr,
                                  slotted ? &in_slots : nullptr);
        cuda::check(cudaMemcpyAsync(routed_counts_.as<int32_t>() + layer, list.n_fills,
                                    sizeof(int32_t), cudaMemcpyDeviceToHost, compute),
                    "counting the routed experts");
        routes_counted_[layer] = n_routes;
        if (routed_only) {
            // Into the buffer in the whole copy's layout (expert e where the whole copy puts
            // it): the routes need no renaming. The compute that last read the buffer is on this
            // stream, before this copy.
            cuda::fill_slots(sources_[layer], list, as_slots(b, layer), d.n_expert, compute);
            if (slotted) {
                cuda::fill_slots(slots_->slotted_source(layer, part_offsets_of(layer).data()),
                                 in_slots, as_slots(b, layer), d.n_expert, compute);
            }
            b.layer = -1;  // not the whole layer: no later batch may take it as copied
            ++traffic_.routed_only_copies;
        }
    }
    // The device's view: scales and biases as uploaded, the matrices in the buffer.
    const std::array<size_t, 4> at = part_offsets(d);
    ExpertMatrix* dp[] = {&d.gate, &d.up, &d.down};
    for (int i = 0; i < 3; ++i) dp[i]->matrix.data = b.memory.as<uint8_t>() + at[i];
    return d;
}

void GpuExpertStream::order_before(cudaStream_t stream) {
    if (!slot_reads_queued_) return;
    slots_read_.wait_on(stream);
    slot_reads_queued_ = false;
}

void GpuExpertStream::release(int layer, cudaStream_t compute) {
    if (layer != acquired_layer_)
        fail("the prefill expert stream: layer {} released, {} acquired", layer, acquired_layer_);
    buffers_[last_acquired_].released.record(compute);
    acquired_layer_ = -1;
}

}  // namespace tandem
