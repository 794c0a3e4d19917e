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

void* DeviceMemoryKind::allocate(size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        fail("GPU memory for {}: {:.2f} GiB requested, {:.2f} GiB free of {:.2f} GiB ({})", what,
             gib(bytes), gib(free_bytes), gib(total), cudaGetErrorString(e));
    }
    return p;
}

void DeviceMemoryKind::release(void* p) {
    cudaFree(p);
}

void* PinnedMemoryKind::allocate(size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        fail("pinned host memory for {}: {:.2f} GiB could not be allocated ({})", what, gib(bytes),
             cudaGetErrorString(e));
    }
    return p;
}

void PinnedMemoryKind::release(void* p) {
    cudaFreeHost(p);
}

}  // namespace tandem::cuda
