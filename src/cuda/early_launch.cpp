// Whether kernels may launch before their predecessor finishes, and whether they prefetch their
// weights meanwhile (cuda/early_launch.cuh).
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

bool weight_prefetch_enabled() {
    // On by default (an H100, 7 December: fused decode 248.6 → 253.1 tok/s); TANDEM_GPU_PREFETCH=0
    // turns it off.
    static const bool enabled = !env_flag_off("TANDEM_GPU_PREFETCH");
    return enabled;
}

}  // namespace tandem::cuda
