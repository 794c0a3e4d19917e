// Owned memory for the GPU side: device buffers (cudaMalloc) and pinned host buffers
// (cudaMallocHost, which the copy engines read at full PCIe rate), freed when they go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tandem::cuda {

// Memory of one kind (device or pinned host), owned: allocated by the constructor (which throws
// Error naming `what` and the size when there is no room), freed by the destructor.
template <typename Kind>
class OwnedMemory {
  public:
    OwnedMemory() = default;
    OwnedMemory(size_t bytes, const char* what)
        : ptr_(Kind::allocate(bytes, what)), bytes_(bytes) {}
    ~OwnedMemory() {
        if (ptr_ != nullptr) Kind::release(ptr_);
    }
    OwnedMemory(OwnedMemory&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
    OwnedMemory& operator=(OwnedMemory&& o) noexcept {
        if (this != &o) {
            if (ptr_ != nullptr) Kind::release(ptr_);
            ptr_ = std::exchange(o.ptr_, nullptr);
            bytes_ = o.bytes_;
        }
        return *this;
    }
    OwnedMemory(const OwnedMemory&) = delete;
    OwnedMemory& operator=(const OwnedMemory&) = delete;

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

struct DeviceMemoryKind {
    static void* allocate(size_t bytes, const char* what);
    static void release(void* p);
};
struct PinnedMemoryKind {
    static void* allocate(size_t bytes, const char* what);
    static void release(void* p);
};
using DeviceBuffer = OwnedMemory<DeviceMemoryKind>;  // cudaMalloc
using PinnedBuffer = OwnedMemory<PinnedMemoryKind>;  // cudaMallocHost

// Host memory that is not CUDA's own (a mapped file, the model's buffers) registered with the
// driver so the copy engines read it at the pinned rate and kernels may read it in place, as
// read-only page-locked mapped ranges; unregistered when this goes. Ranges are widened to whole
// pages and merged first (a page may be registered once only). A range that another
// HostRegistration of the process holds already (two backends on one model) is shared with it:
// the driver's registration goes with the last holder.
class HostRegistration {
  public:
    HostRegistration() = default;
    ~HostRegistration();
    HostRegistration(const HostRegistration&) = delete;
    HostRegistration& operator=(const HostRegistration&) = delete;

    void add(const void* data, size_t bytes);
    // Registers every range added; returns false (and releases what it had) when the driver
    // refuses one, with `why` saying so.
    bool register_all(std::string* why);
    size_t bytes() const { return registered_bytes_; }

  private:
    using Range = std::pair<uintptr_t, uintptr_t>;  // [begin, end)
    void release_all();

    std::vector<Range> ranges_;      // pending
    std::vector<Range> registered_;  // held in the process-wide table
    size_t registered_bytes_ = 0;
};

// The device's address of pinned or registered host memory (a PinnedBuffer's, a
// HostRegistration's range), for kernels that read or write it in place; `what` names it in the
// error.
void* mapped_device_address(const void* host, const char* what);

// Rounds up to the alignment every tensor and buffer gets on the device (so 16-byte vector
// loads of any row start are aligned wherever the row size allows).
constexpr size_t kDeviceAlignment = 256;
constexpr size_t align_up(size_t n, size_t a = kDeviceAlignment) {
    return (n + a - 1) / a * a;
}

}  // namespace tandem::cuda
