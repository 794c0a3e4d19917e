// Host memory ranges copied once into one device allocation, with the translation of host
// pointers inside them to device pointers: how the weights (views into the mapped GGUF file and
// small f32 copies) move to the GPU without dequantizing anything. Overlapping ranges (a fused
// gate_up tensor seen as two matrices) are copied once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "cuda/memory.h"

namespace tandem::cuda {

class HostImage {
  public:
    // Adds [data, data + bytes) to what upload() copies.
    void add(const void* data, size_t bytes);
    // Device bytes the ranges take once merged and aligned.
    size_t device_bytes() const;

    // Copies every range through pinned staging buffers; progress(bytes_done, bytes_total) is
    // called now and then.
    void upload(const std::function<void(size_t done, size_t total)>& progress);

    // The device address of host address p, which must lie in an added range.
    const void* device(const void* p) const;
    template <typename T>
    const T* device(const T* p) const {
        return static_cast<const T*>(device(static_cast<const void*>(p)));
    }

  private:
    struct Range {
        uintptr_t begin, end;
        size_t offset = 0;  // into device_
    };
    std::vector<Range> merged() const;

    std::vector<Range> pending_;
    std::map<uintptr_t, Range> ranges_;  // by begin, after upload
    DeviceBuffer device_;
};

}  // namespace tandem::cuda
