// GPU discovery and description.
#include "cuda/device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "cuda/check.h"

namespace tandem::cuda {

std::string cuda_version_text(int version) {
    return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

int device_count(std::string* why) {
    int driver = 0, runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
        if (why != nullptr) *why = "no NVIDIA driver found (libcuda.so is not loadable)";
        return 0;
    }
    if (driver < runtime) {
        if (why != nullptr) {
            *why = fmt::format(
                "the NVIDIA driver supports CUDA {}, older than this build's CUDA {}: update the "
                "driver",
                cuda_version_text(driver), cuda_version_text(runtime));
        }
        return 0;
    }
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        if (why != nullptr) {
            *why = e == cudaSuccess
                       ? std::string("no CUDA device found")
                       : fmt::format("no usable CUDA device ({})", cudaGetErrorString(e));
        }
        cudaGetLastError();
        return 0;
    }
    return count;
}

std::vector<GpuInfo> list_gpus() {
    std::vector<GpuInfo> out;
    const int n = device_count();
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    int current = 0;
    cudaGetDevice(&current);
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        check(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
        GpuInfo g;
        g.index = i;
        g.name = p.name;
        g.total_bytes = p.totalGlobalMem;
        g.cc_major = p.major;
        g.cc_minor = p.minor;
        g.multiprocessors = p.multiProcessorCount;
        g.l2_bytes = static_cast<size_t>(p.l2CacheSize);
        g.driver_version = driver;
        g.runtime_version = runtime;
        check(cudaSetDevice(i), "cudaSetDevice");
        size_t free_bytes = 0, total = 0;
        check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
        g.free_bytes = free_bytes;
        out.push_back(g);
    }
    if (n > 0) cudaSetDevice(current);
    return out;
}

double measure_h2d_gbps(size_t bytes) {
    void* host = nullptr;
    void* device = nullptr;
    check(cudaMallocHost(&host, bytes), "cudaMallocHost (copy-rate probe)");
    const cudaError_t e = cudaMalloc(&device, bytes);
    if (e != cudaSuccess) {
        cudaFreeHost(host);
        check(e, "cudaMalloc (copy-rate probe)");
    }
    std::fill_n(static_cast<unsigned char*>(host), bytes, 1);
    double best = 0.0;
    for (int i = 0; i < 4; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice),
              "cudaMemcpy (copy-rate probe)");
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i > 0) best = std::max(best, static_cast<double>(bytes) / s / 1e9);
    }
    cudaFree(device);
    cudaFreeHost(host);
    return best;
}

}  // namespace tandem::cuda
