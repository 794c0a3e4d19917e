// Whether kernels may launch before their predecessor finishes (cuda/early_launch.cuh).
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace tandem::cuda {

bool early_launch_enabled() {
    static const bool enabled = [] {
        // Opt-in until it has been measured and run through the GPU tests on a Hopper machine.
        const char* env = std::getenv("TANDEM_GPU_EARLY_LAUNCH");
        if (env == nullptr || std::strcmp(env, "1") != 0) return false;
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
