// Host memory for weights read into memory (--no-mmap): one allocator decides where they live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

// Every buffer of weights read into host memory is allocated through host_allocator(). Today
// that is page-aligned anonymous memory; the CUDA backend is meant to install its own (pinned
// memory from cudaHostAlloc, which the copy engine reads at full speed) with
// set_host_allocator() before the model loads, so that nothing below cuda/ knows about CUDA.
struct HostAllocator {
    const char* name;                 // for logs: "anonymous pages", "cuda pinned", ...
    void* (*allocate)(size_t bytes);  // nullptr on failure (errno set where it can be)
    void (*release)(void* data, size_t bytes);
};

const HostAllocator& host_allocator();
// Replaces the allocator; buffers allocated before keep the allocator they came from.
void set_host_allocator(const HostAllocator& allocator);

// An owned block of host memory from host_allocator(); movable, freed when destroyed.
class HostBuffer {
  public:
    HostBuffer() = default;
    // Allocates `bytes`; throws Error naming `what` and the size when the allocator refuses.
    HostBuffer(size_t bytes, const std::string& what);
    ~HostBuffer();
    HostBuffer(HostBuffer&& other) noexcept;
    HostBuffer& operator=(HostBuffer&& other) noexcept;
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;

    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    // The name of the allocator it came from.
    const char* kind() const { return allocator_.name; }

  private:
    void reset();

    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    HostAllocator allocator_{"none", nullptr, nullptr};
};

}  // namespace tandem
