// The GPUs of this machine as the CUDA runtime sees them: whether there is a usable one (and why
// not), their names, memory, compute capability and driver, and the host-to-device copy rate.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem::cuda {

// The number of usable GPUs; 0 with `why` set when there is none: no driver, a driver older
// than this build's CUDA runtime, or no device.
int device_count(std::string* why = nullptr);

struct GpuInfo {
    int index = 0;
    std::string name;
    size_t total_bytes = 0;
    size_t free_bytes = 0;
    int cc_major = 0, cc_minor = 0;  // compute capability
    int multiprocessors = 0;
    size_t l2_bytes = 0;
    int driver_version = 0;   // CUDA version the driver supports, e.g. 13000
    int runtime_version = 0;  // this build's CUDA runtime
};

std::vector<GpuInfo> list_gpus();

// Host-to-device copy rate of `bytes` from pinned host memory, in GB/s (the best of a few
// copies), on the current device.
double measure_h2d_gbps(size_t bytes = size_t{256} << 20);

// "13.0" from 13000.
std::string cuda_version_text(int version);

}  // namespace tandem::cuda
