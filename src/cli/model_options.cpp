// Flags shared by the commands that load a model, and the loading itself.
#include "cli/model_options.h"

#include <algorithm>
#include <charconv>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "kernels/kernel_table.h"

namespace tandem::cli {

void add_model_options(CLI::App* cmd, ModelOptions& o) {
    cmd->add_option("-m,--model", o.model_path, "GGUF model file (of a split model: any part)")->required();
    cmd->add_option("-t,--threads", o.threads, "Threads (default: one per physical core)");
    cmd->add_option("-c,--ctx", o.ctx, "Context size in tokens (default: min(4096, the model's))");
    cmd->add_option("-b,--batch", o.batch, "Prompt tokens per forward pass")->capture_default_str();
    cmd->add_option("--kv-type", o.kv_type, "KV cache type: f16 or f32")->capture_default_str();
    cmd->add_option("--device", o.device, "Where to compute: auto (the GPU when there is one), cpu or cuda")
        ->capture_default_str();
    cmd->add_option("--gpu-mem", o.gpu_mem, "GiB of GPU memory to use (default: the free memory less 1 GiB)");
    cmd->add_option("--moe-strategy", o.moe_strategy,
                    "Where the routed experts live beside a GPU: auto (fused when the model fits "
                    "--gpu-mem, else hybrid with as many slots as fit), fused (all in "
                    "VRAM), cpu (all on the CPU executor), offload (all in host memory, computed on the "
                    "GPU in a cache of expert slots in VRAM) or hybrid (as offload, but the slots' "
                    "misses run on the CPU executor at the same time)")
        ->capture_default_str();
    cmd->add_option("--moe-cpu-layers", o.moe_cpu_layers,
                    "The experts of the first N MoE layers on the CPU, the rest in VRAM (as "
                    "llama.cpp's --n-cpu-moe), or auto")
        ->capture_default_str();
    cmd->add_option("--moe-slots", o.moe_slots,
                    "offload, hybrid: expert slots in VRAM (default: as many as fit --gpu-mem)");
    cmd->add_option("--moe-hybrid-max-fetch", o.moe_hybrid_max_fetch,
                    "hybrid: missed experts copied into slots per layer and decode step (default: "
                    "as many as the CPU's time on a token's experts hides, measured at start)");
    cmd->add_flag("--no-mmap", o.no_mmap, "Read the weights into memory instead of mapping the file");
    cmd->add_flag("--mlock", o.mlock, "Lock the weights in RAM (needs a large enough RLIMIT_MEMLOCK)");
}

KvType parse_kv_type(const std::string& name) {
    if (name == "f16") return KvType::kF16;
    if (name == "f32") return KvType::kF32;
    fail("--kv-type: '{}' is not f16 or f32", name);
}

std::vector<int32_t> parse_token_list(const std::string& list, const std::string& flag) {
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t end = list.find(',', pos);
        if (end == std::string::npos) end = list.size();
        std::string item = list.substr(pos, end - pos);
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        int32_t id = 0;
        auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
        if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || id < 0) {
            fail("{}: '{}' is not a token id (expected comma-separated non-negative integers)", flag, item);
        }
        ids.push_back(id);
        pos = end + 1;
    }
    if (ids.empty()) fail("{}: no token ids", flag);
    return ids;
}

namespace {

// --threads, or by default one per physical core, less one beside a GPU: there the CUDA
// runtime's host-function thread runs the CPU executor's share of a step, and with a thread per
// core beside it the executor ran 2.6 times slower (760 µs a layer against 287 with one core
// left free; H100 host, 16 cores, 7 December, before spin-waits yielded; with the yields, one
// thread more than cores still cost 9 % on a 2-core host).
int default_threads(int threads, Device device) {
    if (threads > 0) return threads;
    const int cores = cpu_features().physical_cores;
    return device != Device::kCpu && cores > 2 && gpu_available(nullptr) ? cores - 1 : cores;
}

}  // namespace

LoadedModel load_model(const ModelOptions& o) {
    if (o.threads < 0) fail("--threads {} must be >= 0", o.threads);
    if (o.batch <= 0) fail("--batch {} must be positive", o.batch);
    if (o.ctx < 0) fail("--ctx {} must be >= 0", o.ctx);
    if (o.gpu_mem < 0) fail("--gpu-mem {} must be >= 0", o.gpu_mem);
    if (o.moe_slots < 0) fail("--moe-slots {} must be >= 0", o.moe_slots);
    if (o.moe_hybrid_max_fetch < -1)
        fail("--moe-hybrid-max-fetch {} must be >= 0", o.moe_hybrid_max_fetch);
    const KvType kv_type = parse_kv_type(o.kv_type);
    const Device device = parse_device(o.device);
    GpuOptions gpu;
    gpu.mem_gib = o.gpu_mem;
    gpu.moe_strategy = parse_moe_strategy(o.moe_strategy);
    if (o.moe_cpu_layers != "auto") {
        const char* end = o.moe_cpu_layers.data() + o.moe_cpu_layers.size();
        auto [ptr, ec] = std::from_chars(o.moe_cpu_layers.data(), end, gpu.moe_cpu_layers);
        if (o.moe_cpu_layers.empty() || ec != std::errc() || ptr != end || gpu.moe_cpu_layers < 0)
            fail("--moe-cpu-layers: '{}' is not auto or a layer count >= 0", o.moe_cpu_layers);
    }
    gpu.moe_slots = o.moe_slots;
    gpu.moe_hybrid_max_fetch = o.moe_hybrid_max_fetch;
    Stopwatch watch;
    LoadedModel m;
    const KernelVariant& variant = chosen_kernel_variant();
    LoadOptions load;
    load.mmap = !o.no_mmap;
    load.mlock = o.mlock;
    load.prefetch_in_background = o.page_in_in_background;
    m.model = Model::load(o.model_path, load);
    const ModelConfig& c = m.model->config();
    if (m.model->file().has("tokenizer.ggml.model")) {
        m.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_gguf(m.model->file()));
    }
    m.pool = std::make_unique<ThreadPool>(default_threads(o.threads, device));
    m.session.n_ctx = o.ctx > 0 ? o.ctx : std::min(4096, c.n_ctx_train);
    m.session.max_batch = std::min(o.batch, m.session.n_ctx);
    m.session.kv_type = kv_type;
    m.session.device = device;
    m.session.gpu = gpu;
    log_info("model: {} ({})", c.name, describe(c));
    log_info("types: {}", m.model->describe_types());
    log_info("cpu: variant {}, {} threads", variant.name, m.pool->size());
    log_info("loaded in {:.2f} s; context {} tokens, kv cache {}", watch.seconds(), m.session.n_ctx, o.kv_type);
    return m;
}

}  // namespace tandem::cli
