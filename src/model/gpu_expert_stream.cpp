// Host experts streamed through two VRAM buffers for prefill.
#include "model/gpu_expert_stream.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "cuda/check.h"

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
        host_memory_ = fmt::format("{:.2f} GiB of host experts pinned in {:.2f} s",
                                   static_cast<double>(registration_.bytes()) / (1u << 30),
                                   watch.seconds());
    } else {
        host_memory_ = "host experts copy from pageable memory (" + why + ")";
    }
}

void GpuExpertStream::start_copy(int layer, Buffer& b) {
    const cudaStream_t copy = copy_stream_.get();
    b.released.wait_on(copy);  // the compute that last read this buffer is done
    const MoeLayer& m = layers_[layer];
    const std::array<size_t, 4> at = part_offsets(m);
    for (int i = 0; i < 3; ++i) {
        const ExpertMatrix& e = *parts(m)[i];
        cuda::check(cudaMemcpyAsync(b.memory.as<uint8_t>() + at[i], e.matrix.data,
                                    tensor_bytes(e, m.n_expert), cudaMemcpyHostToDevice, copy),
                    "streaming experts to the GPU");
    }
    b.copied.record(copy);
    b.layer = layer;
}

MoeLayer GpuExpertStream::acquire(int layer, cudaStream_t compute) {
    if (layer < 0 || layer >= static_cast<int>(ordinal_.size()) || ordinal_[layer] < 0)
        fail("moe: layer {} has no experts in host memory", layer);
    Buffer& b = buffers_[buffer_of(layer)];
    if (b.layer != layer) start_copy(layer, b);
    // The next host layer's experts into the other buffer, behind this layer's compute.
    const int next = ordinal_[layer] + 1;
    if (next < static_cast<int>(host_layers_.size())) {
        const int next_layer = host_layers_[next];
        Buffer& o = buffers_[buffer_of(next_layer)];
        if (&o != &b && o.layer != next_layer) start_copy(next_layer, o);
    }
    b.copied.wait_on(compute);
    // The device's view: scales and biases as uploaded, the matrices in the buffer.
    MoeLayer d = layers_[layer];
    const std::array<size_t, 4> at = part_offsets(d);
    ExpertMatrix* dp[] = {&d.gate, &d.up, &d.down};
    for (int i = 0; i < 3; ++i) dp[i]->matrix.data = b.memory.as<uint8_t>() + at[i];
    return d;
}

void GpuExpertStream::release(int layer, cudaStream_t compute) {
    buffers_[buffer_of(layer)].released.record(compute);
}

}  // namespace tandem
