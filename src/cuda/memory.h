// Owned memory for the GPU side: device buffers (cudaMalloc) and pinned host buffers
// (cudaMallocHost, which the copy engines read at full PCIe rate), freed when they go.
#pragma once

#include <cstddef>
#include <utility>

namespace tandem::cuda {

class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    // Throws Error naming `what` and the size when the device has no room.
    DeviceBuffer(size_t bytes, const char* what);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* get() const { return ptr_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }
    size_t bytes() const { return bytes_; }

  private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

class PinnedBuffer {
  public:
    PinnedBuffer() = default;
    PinnedBuffer(size_t bytes, const char* what);
    ~PinnedBuffer();
    PinnedBuffer(PinnedBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;

    void* get() const { return ptr_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }
    size_t bytes() const { return bytes_; }

  private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// Rounds up to the alignment every tensor and buffer gets on the device (so 16-byte vector
// loads of any row start are aligned wherever the row size allows).
constexpr size_t kDeviceAlignment = 256;
constexpr size_t align_up(size_t n, size_t a = kDeviceAlignment) {
    return (n + a - 1) / a * a;
}

}  // namespace tandem::cuda
