// The offload strategy's expert slots.
#include "model/gpu_expert_slots.h"

#include <algorithm>

#include "base/error.h"
#include "base/timer.h"  // median
#include "cuda/check.h"

namespace tandem {
namespace {

// A layer's list of fills: kMaxSlotRoutes slots, as many experts, and their count.
constexpr size_t kFillListWords = 2 * cuda::kMaxSlotRoutes + 1;

const ExpertMatrix* part(const MoeLayer& m, int p) {
    return p == 0 ? &m.gate : p == 1 ? &m.up : &m.down;
}
ExpertMatrix* part(MoeLayer& m, int p) {
    return p == 0 ? &m.gate : p == 1 ? &m.up : &m.down;
}

int64_t expert_bytes(const ExpertMatrix& e) {
    return e.matrix.empty() ? 0 : e.matrix.rows * static_cast<int64_t>(e.matrix.row_bytes);
}

}  // namespace

cuda::SlotLayer mapped_expert_source(const MoeLayer& m, const int64_t offset[3]) {
    cuda::SlotLayer s;
    for (int p = 0; p < 3; ++p) {
        const ExpertMatrix& e = *part(m, p);
        if (e.matrix.empty()) continue;
        s.source[p] = static_cast<const uint8_t*>(cuda::mapped_device_address(
            e.matrix.data, "mapping host experts for the GPU's copies"));
        s.stride[p] = e.expert_stride;
        s.bytes[p] = expert_bytes(e);
        s.offset[p] = offset[p];
    }
    return s;
}

int64_t GpuExpertSlots::slot_bytes(const std::vector<MoeLayer>& layers) {
    int64_t widest = 0;
    for (const MoeLayer& m : layers) {
        if (m.n_expert == 0) continue;
        int64_t bytes = 0;
        for (int p = 0; p < 3; ++p) bytes += cuda::align_up(expert_bytes(*part(m, p)));
        widest = std::max(widest, bytes);
    }
    return widest;
}

GpuExpertSlots::GpuExpertSlots(const std::vector<MoeLayer>& layers, int n_slots)
    : layers_(layers), sources_(layers.size()) {
    int n_expert = 0;
    for (const MoeLayer& m : layers) n_expert = std::max(n_expert, m.n_expert);
    for (size_t il = 0; il < layers.size(); ++il) {
        const MoeLayer& m = layers[il];
        if (m.n_expert == 0) continue;
        int64_t offset[3] = {}, at = 0;
        for (int p = 0; p < 3; ++p) {
            offset[p] = at;
            at += cuda::align_up(expert_bytes(*part(m, p)));
        }
        cuda::SlotLayer& s = sources_[il];
        s = mapped_expert_source(m, offset);
        for (int p = 0; p < 3; ++p) {
            const ExpertMatrix& e = *part(m, p);
            if (e.matrix.empty()) continue;
            s.scales[p] = e.scales;
            if (e.bias != nullptr) {
                s.biases[p] = e.bias;
                s.bias_stride[p] = e.bias_stride;
                s.bias_rows[p] = e.matrix.rows;
                slots_.bias_stride[p] = std::max(slots_.bias_stride[p], e.matrix.rows);
            }
        }
    }
    // The table: slot_of, owner, last_used, clock, fills, counts, in one allocation.
    const size_t n_owned = static_cast<size_t>(layers.size()) * n_expert;
    const size_t words =
        n_owned + 2 * static_cast<size_t>(n_slots) + 1 + layers.size() * kFillListWords;
    state_ = cuda::DeviceBuffer(cuda::align_up(sizeof(int32_t) * words) + 2 * sizeof(uint64_t),
                                "the expert slot table");
    int32_t* w = state_.as<int32_t>();
    table_.slot_of = w;
    table_.owner = w + n_owned;
    table_.last_used = reinterpret_cast<uint32_t*>(table_.owner + n_slots);
    table_.clock = table_.last_used + n_slots;
    table_ = cuda::with_fill_list(table_, reinterpret_cast<int32_t*>(table_.clock + 1),
                                  cuda::kMaxSlotRoutes);
    table_.counts =
        reinterpret_cast<uint64_t*>(state_.as<uint8_t>() + cuda::align_up(sizeof(int32_t) * words));
    table_.n_slots = n_slots;
    table_.n_expert = n_expert;
    // -1 everywhere in slot_of and owner; zeros after them.
    cuda::check(cudaMemset(table_.slot_of, 0xff, sizeof(int32_t) * (n_owned + n_slots)),
                "clearing the expert slot table");
    cuda::check(
        cudaMemset(table_.last_used, 0, state_.bytes() - sizeof(int32_t) * (n_owned + n_slots)),
        "clearing the expert slot table");

    slots_.slot_bytes = slot_bytes(layers);
    // After the slots: each part's scales, then its biases (slots_.bias_stride floats a slot).
    const size_t scale_bytes = cuda::align_up(sizeof(float) * n_slots);
    size_t total = static_cast<size_t>(n_slots) * slots_.slot_bytes + 3 * scale_bytes;
    size_t bias_bytes[3];
    for (int p = 0; p < 3; ++p) {
        bias_bytes[p] = cuda::align_up(sizeof(float) * n_slots * slots_.bias_stride[p]);
        total += bias_bytes[p];
    }
    memory_ = cuda::DeviceBuffer(total, "the expert slots");
    slots_.base = memory_.as<uint8_t>();
    uint8_t* at = slots_.base + static_cast<size_t>(n_slots) * slots_.slot_bytes;
    for (int p = 0; p < 3; ++p) {
        slots_.scales[p] = reinterpret_cast<float*>(at);
        at += scale_bytes;
    }
    for (int p = 0; p < 3; ++p) {
        slots_.biases[p] = reinterpret_cast<float*>(at);
        at += bias_bytes[p];
    }
}

void GpuExpertSlots::check_call(int layer, int n_routes) const {
    if (layer < 0 || layer >= static_cast<int>(layers_.size()) || layers_[layer].n_expert == 0)
        fail("moe: layer {} has no experts in host memory", layer);
    if (n_routes > cuda::kMaxSlotRoutes)
        fail("moe: {} routes for the expert slots (at most {})", n_routes, cuda::kMaxSlotRoutes);
}

MoeLayer GpuExpertSlots::view(int layer) const {
    MoeLayer v = layers_[layer];
    for (int p = 0; p < 3; ++p) {
        ExpertMatrix& e = *part(v, p);
        if (e.matrix.empty()) continue;
        e.matrix.data = slots_.base + sources_[layer].offset[p];
        e.expert_stride = slots_.slot_bytes;
        if (e.scales != nullptr) e.scales = slots_.scales[p];
        if (e.bias != nullptr) {
            e.bias = slots_.biases[p];
            e.bias_stride = slots_.bias_stride[p];
        }
    }
    v.n_expert = table_.n_slots;  // the routes name slots
    return v;
}

cuda::SlotTable GpuExpertSlots::layer_table(int layer) const {
    return cuda::with_fill_list(table_,
                                table_.fill_slot + static_cast<size_t>(layer) * kFillListWords,
                                cuda::kMaxSlotRoutes);
}

MoeLayer GpuExpertSlots::prepare(int layer, const Route* routes, int n_routes, Route* slot_routes,
                                 cudaStream_t stream) {
    check_call(layer, n_routes);
    filled_ = true;
    const cuda::SlotTable t = layer_table(layer);
    cuda::assign_slots(routes, n_routes, layer, t, slot_routes, stream);
    cuda::fill_slots(sources_[layer], t, slots_, n_routes, stream);
    return view(layer);
}

MoeLayer GpuExpertSlots::split(int layer, const Route* routes, int n_routes, int max_fetch,
                               Route* slot_routes, Route* cpu_routes, cudaStream_t stream) {
    check_call(layer, n_routes);
    filled_ = true;
    max_fetch = std::min(max_fetch, n_routes);
    const cuda::SlotTable t = layer_table(layer);
    cuda::split_slot_routes(routes, n_routes, layer, t, max_fetch, slot_routes, cpu_routes, stream);
    if (max_fetch > 0) {
        fill_fork_.record(stream);
        fill_fork_.wait_on(fill_stream_.get());
        cuda::fill_slots(sources_[layer], t, slots_, max_fetch, fill_stream_.get());
        fills_pending_ = true;
    }
    return view(layer);
}

void GpuExpertSlots::join(cudaStream_t stream) {
    if (!fills_pending_) return;
    fill_join_.record(fill_stream_.get());
    fill_join_.wait_on(stream);
    fills_pending_ = false;
}

double GpuExpertSlots::copy_seconds_per_expert(int n_copies, cudaStream_t stream) {
    if (filled_) fail("the expert copy measurement: the slots hold experts already");
    int layer = 0;
    while (layer < static_cast<int>(layers_.size()) && layers_[layer].n_expert == 0) ++layer;
    if (layer == static_cast<int>(layers_.size())) return 0.0;
    const int n_expert = layers_[layer].n_expert;
    const int n = std::min({n_copies, table_.n_slots, n_expert});
    if (n < 1) return 0.0;
    // A list of fills of its own (slots 0..n-1), so that the table stays as it is: no expert
    // owns those slots yet, and none is left owning what the copies wrote.
    std::vector<int32_t> fills(2 * static_cast<size_t>(n) + 1);
    cuda::DeviceBuffer list(sizeof(int32_t) * fills.size(), "the expert copy measurement");
    const cuda::SlotTable t = cuda::with_fill_list(table_, list.as<int32_t>(), n);
    const cuda::Event start(true), stop(true);
    constexpr int kCopies = 5;  // after one that warms the mappings
    std::vector<double> seconds;
    for (int copy = 0; copy <= kCopies; ++copy) {
        for (int j = 0; j < n; ++j) {
            fills[j] = j;
            fills[n + j] = (copy * n + j) % n_expert;
        }
        fills[2 * n] = n;
        cuda::check(cudaMemcpyAsync(list.get(), fills.data(), sizeof(int32_t) * fills.size(),
                                    cudaMemcpyHostToDevice, stream),
                    "the expert copy measurement");
        start.record(stream);
        cuda::fill_slots(sources_[layer], t, slots_, n, stream);
        stop.record(stream);
        const double ms = stop.milliseconds_since(start);
        if (copy > 0) seconds.push_back(1e-3 * ms);
    }
    return median(std::move(seconds)) / n;
}

int GpuExpertSlots::preload(cudaStream_t stream) {
    filled_ = true;
    const size_t n_layer = layers_.size(), NE = static_cast<size_t>(table_.n_expert);
    // The table as the host makes it (slot_of, then owner: adjacent on the device), and per
    // layer its list of fills as fill_slots reads them: slots, experts, their count.
    std::vector<int32_t> table(n_layer * NE + table_.n_slots, -1);
    int32_t* owner = table.data() + n_layer * NE;
    const size_t list_words = 2 * NE + 1;
    std::vector<int32_t> lists(n_layer * list_words, 0);
    int slot = 0;
    for (size_t e = 0; e < NE && slot < table_.n_slots; ++e) {
        for (size_t il = 0; il < n_layer && slot < table_.n_slots; ++il) {
            if (e >= static_cast<size_t>(layers_[il].n_expert)) continue;
            table[il * NE + e] = slot;
            owner[slot] = static_cast<int32_t>(il * NE + e);
            int32_t* list = lists.data() + il * list_words;
            int32_t& n = list[2 * NE];
            list[n] = slot;
            list[NE + n] = static_cast<int32_t>(e);
            ++n;
            ++slot;
        }
    }
    cuda::check(cudaMemcpyAsync(table_.slot_of, table.data(), sizeof(int32_t) * table.size(),
                                cudaMemcpyHostToDevice, stream),
                "preloading the expert slots");
    const cuda::DeviceBuffer list_memory(sizeof(int32_t) * lists.size(), "the expert slot preload");
    cuda::check(cudaMemcpyAsync(list_memory.get(), lists.data(), sizeof(int32_t) * lists.size(),
                                cudaMemcpyHostToDevice, stream),
                "preloading the expert slots");
    for (size_t il = 0; il < n_layer; ++il) {
        const int n = lists[il * list_words + 2 * NE];
        if (n == 0) continue;
        const cuda::SlotTable t = cuda::with_fill_list(
            table_, list_memory.as<int32_t>() + il * list_words, static_cast<int>(NE));
        cuda::fill_slots(sources_[il], t, slots_, n, stream);
    }
    cuda::check(cudaStreamSynchronize(stream), "preloading the expert slots");
    return slot;
}

std::vector<int32_t> GpuExpertSlots::slot_map(cudaStream_t stream) const {
    std::vector<int32_t> map(layers_.size() * static_cast<size_t>(table_.n_expert));
    cuda::check(cudaMemcpyAsync(map.data(), table_.slot_of, sizeof(int32_t) * map.size(),
                                cudaMemcpyDeviceToHost, stream),
                "reading the expert slot table");
    cuda::check(cudaStreamSynchronize(stream), "reading the expert slot table");
    return map;
}

cuda::SlotLayer GpuExpertSlots::slotted_source(int layer, const int64_t offset[3]) const {
    cuda::SlotLayer s;
    for (int p = 0; p < 3; ++p) {
        s.source[p] = slots_.base + sources_[layer].offset[p];
        s.stride[p] = slots_.slot_bytes;
        s.bytes[p] = sources_[layer].bytes[p];
        s.offset[p] = offset[p];
    }
    return s;
}

std::pair<uint64_t, uint64_t> GpuExpertSlots::counts() const {
    uint64_t c[2] = {0, 0};
    cuda::check(cudaMemcpy(c, table_.counts, sizeof(c), cudaMemcpyDeviceToHost),
                "reading the expert slot counts");
    return {c[0], c[1]};
}

}  // namespace tandem
