// Owned device and pinned host memory.
#include "cuda/memory.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>

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

HostRegistration::~HostRegistration() {
    for (void* p : registered_) cudaHostUnregister(p);
}

void HostRegistration::add(const void* data, size_t bytes) {
    if (data == nullptr || bytes == 0) return;
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) / page * page;
    ranges_.emplace_back(begin, end);
}

bool HostRegistration::register_all(std::string* why) {
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<std::pair<uintptr_t, uintptr_t>> merged;
    for (const auto& r : ranges_) {
        if (!merged.empty() && r.first <= merged.back().second) {
            merged.back().second = std::max(merged.back().second, r.second);
        } else {
            merged.push_back(r);
        }
    }
    ranges_.clear();
    for (const auto& [begin, end] : merged) {
        void* p = reinterpret_cast<void*>(begin);
        const size_t n = end - begin;
        // Read-only: a file mapped without write access can be registered too.
        const cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterPortable | cudaHostRegisterReadOnly);
        if (e != cudaSuccess) {
            cudaGetLastError();
            if (why != nullptr)
                *why = fmt::format("cudaHostRegister of {:.2f} GiB: {}", gib(n), cudaGetErrorString(e));
            for (void* q : registered_) cudaHostUnregister(q);
            registered_.clear();
            registered_bytes_ = 0;
            return false;
        }
        registered_.push_back(p);
        registered_bytes_ += n;
    }
    return true;
}

}  // namespace tandem::cuda
