// Whether kernels may launch before their predecessor finishes (cuda/early_launch.cuh).
#include <cuda_runtime.h>

#include "base/env_flag.h"

namespace tandem::cuda {

bool early_launch_enabled() {
    static const bool enabled = [] {
        // On by default (measured on an H100, 7 December: decode +3 %); TANDEM_GPU_EARLY_LAUNCH=0
        // launches every kernel the ordinary way.
        if (env_flag_off("TANDEM_GPU_EARLY_LAUNCH")) return false;
        int device = 0, major = 0;
        if (cudaGetDevice(&device) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        return major >= 9;
    }();
    return enabled;
}

}  // namespace tandem::cuda
