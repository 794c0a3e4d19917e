// Owned device and pinned host memory.
#include "cuda/memory.h"

#include <cuda_runtime.h>

#include "base/error.h"

namespace tandem::cuda {
namespace {

double gib(size_t bytes) {
    return static_cast<double>(bytes) / (1u << 30);
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        ptr_ = nullptr;
        size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        fail("GPU memory for {}: {:.2f} GiB requested, {:.2f} GiB free of {:.2f} GiB ({})", what,
             gib(bytes), gib(free_bytes), gib(total), cudaGetErrorString(e));
    }
}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_ != nullptr) cudaFree(ptr_);
        ptr_ = std::exchange(o.ptr_, nullptr);
        bytes_ = o.bytes_;
    }
    return *this;
}

PinnedBuffer::PinnedBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t e = cudaMallocHost(&ptr_, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        ptr_ = nullptr;
        fail("pinned host memory for {}: {:.2f} GiB could not be allocated ({})", what, gib(bytes),
             cudaGetErrorString(e));
    }
}

PinnedBuffer::~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_ != nullptr) cudaFreeHost(ptr_);
        ptr_ = std::exchange(o.ptr_, nullptr);
        bytes_ = o.bytes_;
    }
    return *this;
}

}  // namespace tandem::cuda
