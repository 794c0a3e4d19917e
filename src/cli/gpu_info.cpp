// GPUs for `tandem inspect --system`.
#include "cli/gpu_info.h"

#include <cstdio>
#include <string>

#include "model/backend.h"
#ifdef TANDEM_HAVE_CUDA
#include "cuda/device.h"
#endif

namespace tandem::cli {

void print_gpus() {
    std::string why;
    if (!gpu_available(&why)) {
        std::printf("gpu: none to use (%s)\n", why.c_str());
        return;
    }
#ifdef TANDEM_HAVE_CUDA
    for (const cuda::GpuInfo& g : cuda::list_gpus()) {
        std::printf(
            "gpu %d: %s, %.1f GiB (%.1f free), compute %d.%d, %d multiprocessors, L2 %.0f MiB, "
            "driver CUDA %s "
            "(built with %s)\n",
            g.index, g.name.c_str(), g.total_bytes / 1073741824.0, g.free_bytes / 1073741824.0,
            g.cc_major, g.cc_minor, g.multiprocessors, g.l2_bytes / 1048576.0,
            cuda::cuda_version_text(g.driver_version).c_str(),
            cuda::cuda_version_text(g.runtime_version).c_str());
    }
    std::printf("gpu host-to-device copy: %.1f GB/s from pinned memory\n",
                cuda::measure_h2d_gbps());
#endif
}

}  // namespace tandem::cli
