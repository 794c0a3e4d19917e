// Backend choice.
#include "model/backend.h"

#include "base/error.h"
#include "base/log.h"
#include "model/cpu_backend.h"
#ifdef TANDEM_HAVE_CUDA
#include "cuda/device.h"
#include "model/gpu_backend.h"
#endif

namespace tandem {

Device parse_device(std::string_view name) {
    if (name == "auto") return Device::kAuto;
    if (name == "cpu") return Device::kCpu;
    if (name == "cuda") return Device::kCuda;
    fail("--device: '{}' is not auto, cpu or cuda", name);
}

const char* device_name(Device device) {
    switch (device) {
        case Device::kAuto:
            return "auto";
        case Device::kCpu:
            return "cpu";
        case Device::kCuda:
            return "cuda";
    }
    return "?";
}

bool gpu_available(std::string* why) {
#ifdef TANDEM_HAVE_CUDA
    return cuda::device_count(why) > 0;
#else
    if (why != nullptr)
        *why = "this build has no CUDA backend (nvcc was not found when it was built)";
    return false;
#endif
}

std::unique_ptr<Ops> make_backend(const Model& model, ThreadPool& pool, const BackendOptions& o) {
    Device device = o.device;
    const bool gpu_placement_asked =
        o.gpu.moe_strategy != MoeStrategy::kAuto || o.gpu.moe_cpu_layers >= 0 ||
        o.gpu.moe_slots != 0 || o.gpu.moe_hybrid_max_fetch >= 0;
    if (device == Device::kCpu && gpu_placement_asked)
        fail("--moe-strategy / --moe-cpu-layers / --moe-slots / --moe-hybrid-max-fetch place "
             "experts beside a GPU: not with --device cpu");
    if (device != Device::kCpu) {
        std::string why;
        const bool gpu = gpu_available(&why);
        if (!gpu && device == Device::kCuda) fail("--device cuda: {}", why);
        if (!gpu && gpu_placement_asked)
            fail("--moe-strategy {}: needs a GPU ({})", moe_strategy_name(o.gpu.moe_strategy), why);
        if (!gpu) log_info("backend: cpu ({})", why);
        device = gpu ? Device::kCuda : Device::kCpu;
    }
    CpuBackendOptions cpu;
    cpu.max_batch = o.max_batch;
    cpu.n_seq = o.n_seq;
    cpu.n_ctx = o.n_ctx;
    cpu.kv_type = o.kv_type;
#ifdef TANDEM_HAVE_CUDA
    if (device == Device::kCuda) {
        if (o.device == Device::kCuda || gpu_placement_asked)
            return std::make_unique<GpuBackend>(model, pool, cpu, o.gpu);
        // auto: a model the GPU backend cannot take (an operation it lacks, a budget too small)
        // runs on the CPU, and the log says why.
        try {
            return std::make_unique<GpuBackend>(model, pool, cpu, o.gpu);
        } catch (const Error& e) {
            log_info("backend: cpu ({})", e.what());
        }
    }
#endif
    return std::make_unique<CpuBackend>(model, pool, cpu);
}

void Ops::throw_unsupported(const char* op) const {
    fail("{}: the {} backend cannot copy a sequence's state to host memory", op, name());
}

}  // namespace tandem
