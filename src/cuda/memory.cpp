// Owned device and pinned host memory.
#include "cuda/memory.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "base/error.h"
#include "cuda/check.h"

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

namespace {

// The process's registered host ranges and how many HostRegistrations hold each.
std::mutex registry_mutex;
std::map<std::pair<uintptr_t, uintptr_t>, int>& registry() {
    static std::map<std::pair<uintptr_t, uintptr_t>, int> held;
    return held;
}

}  // namespace

HostRegistration::~HostRegistration() {
    release_all();
}

void HostRegistration::release_all() {
    const std::lock_guard<std::mutex> lock(registry_mutex);
    for (const Range& r : registered_) {
        auto it = registry().find(r);
        if (it == registry().end() || --it->second > 0) continue;
        cudaHostUnregister(reinterpret_cast<void*>(r.first));
        registry().erase(it);
    }
    registered_.clear();
    registered_bytes_ = 0;
}

void HostRegistration::add(const void* data, size_t bytes) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) / page * page;
    ranges_.emplace_back(begin, end);
}

bool HostRegistration::register_all(std::string* why) {
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<Range> merged;
    for (const Range& r : ranges_) {
        if (!merged.empty() && r.first <= merged.back().second) {
            merged.back().second = std::max(merged.back().second, r.second);
        } else {
            merged.push_back(r);
        }
    }
    ranges_.clear();
    for (const Range& r : merged) {
        const size_t n = r.second - r.first;
        cudaError_t e = cudaSuccess;
        {
            const std::lock_guard<std::mutex> lock(registry_mutex);
            auto it = registry().find(r);
            if (it != registry().end()) {
                ++it->second;
            } else {
                // Read-only: a file mapped without write access can be registered too. Mapped:
                // kernels may read it in place (the expert slots' copies).
                e = cudaHostRegister(
                    reinterpret_cast<void*>(r.first), n,
                    cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterReadOnly);
                if (e == cudaSuccess) registry()[r] = 1;
            }
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            if (why != nullptr) {
                *why = fmt::format("cudaHostRegister of {:.2f} GiB: {}", gib(n),
                                   cudaGetErrorString(e));
            }
            release_all();
            return false;
        }
        registered_.push_back(r);
        registered_bytes_ += n;
    }
    return true;
}

void* mapped_device_address(const void* host, const char* what) {
    void* device = nullptr;
    check(cudaHostGetDevicePointer(&device, const_cast<void*>(host), 0), what);
    return device;
}

}  // namespace tandem::cuda
