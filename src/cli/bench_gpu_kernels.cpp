// `tandem bench kernels --device cuda`.
#include "cli/bench_gpu_kernels.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "formats/format_table.h"
#include "model/backend.h"
#ifdef TANDEM_HAVE_CUDA
#include "cuda/device.h"
#include "cuda/matmul.h"
#include "cuda/matmul_bench.h"
#endif

namespace tandem::cli {

void run_gpu_kernel_bench(const std::vector<GgmlType>& types, int64_t cols, double mib, int rounds,
                          bool json) {
    std::string why;
    if (!gpu_available(&why)) fail("--device cuda: {}", why);
#ifdef TANDEM_HAVE_CUDA
    const cuda::GpuInfo gpu = cuda::list_gpus().front();
    const size_t bytes = static_cast<size_t>((mib > 0 ? mib : 1024.0) * (1 << 20));
    const double copy = cuda::device_copy_gbps();
    nlohmann::json doc = {
        {"gpu", gpu.name}, {"copy_gbps", copy}, {"mib", bytes >> 20}, {"cols", cols}};
    if (!json) {
        std::printf(
            "tandem bench kernels --device cuda: %s, %.0f MiB of weights per type (L2 %.0f MiB), "
            "%lld columns,"
            " median of %d rounds\ncopy bandwidth (device to device, read + write): %.0f GB/s\n\n",
            gpu.name.c_str(), static_cast<double>(bytes >> 20), gpu.l2_bytes / 1048576.0,
            static_cast<long long>(cols), rounds, copy);
        std::printf("%-8s %10s %8s %10s %8s %10s %12s  %s\n", "type", "1 row GB/s", "of copy",
                    "8 rows GB/s", "of copy", "1 row us", "tiles TFLOP/s", "kernels");
    }
    for (GgmlType type : types) {
        const FormatTraits* f = &format_of(type);
        const std::string name(f->name);
        if (!cuda::gpu_supports(type)) fail("--types: '{}' is not a GPU weight type", name);
        if (cols % f->block_size != 0)
            fail("--cols {} is not a multiple of {}'s block of {}", cols, name, f->block_size);
        log_debug("bench kernels: {}", name);
        const cuda::MatvecSpeed s = cuda::measure_matvec(f->type, cols, bytes, rounds);
        doc["types"][name] = {{"gbps_1", s.gbps_1},
                              {"gbps_8", s.gbps_8},
                              {"us_1", s.us_1},
                              {"us_8", s.us_8},
                              {"of_copy_1", s.gbps_1 / copy},
                              {"tflops_prefill", s.tflops_prefill},
                              {"integer_kernels", cuda::gpu_integer_products(type)}};
        if (!json) {
            std::printf("%-8s %10.0f %7.0f%% %10.0f %7.0f%% %10.1f %12.1f  %s\n", name.c_str(),
                        s.gbps_1, 100 * s.gbps_1 / copy, s.gbps_8, 100 * s.gbps_8 / copy, s.us_1,
                        s.tflops_prefill,
                        cuda::gpu_integer_products(type) ? "integer (q8 codes)" : "float");
            std::fflush(stdout);
        }
    }
    if (json) std::printf("%s\n", doc.dump(2).c_str());
#else
    (void)types, (void)cols, (void)mib, (void)rounds, (void)json;
#endif
}

}  // namespace tandem::cli
