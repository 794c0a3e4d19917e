// Flags shared by the commands that load a model (-m, --threads, --ctx, --kv-type, --batch,
// --no-mmap, --mlock),
// and the loading itself with its start-up log: model, architecture, types, CPU variant.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/thread_pool.h"
#include "cpu/kv_cache.h"
#include "engine/session.h"
#include "model/model.h"
#include "text/tokenizer.h"

namespace tandem::cli {

struct ModelOptions {
    std::string model_path;
    int threads = 0;  // 0: one per physical core
    int ctx = 0;      // 0: min(4096, the model's training context)
    int batch = 512;
    std::string kv_type = "f16";
    std::string device = "auto";  // auto | cpu | cuda
    double gpu_mem = 0;            // GiB the GPU backend may take; 0: free memory less a margin
    std::string moe_strategy = "auto";  // auto | fused | cpu
    std::string moe_cpu_layers = "auto";  // auto or a layer count
    int moe_slots = 0;                     // offload's and hybrid's slots; 0: as many as fit
    int moe_hybrid_max_fetch = -1;         // hybrid: copies into slots a step; -1: the default
    bool no_mmap = false;  // read the weights into memory instead of mapping them
    bool mlock = false;    // lock the weights in RAM
    // Page a mapped model in on a background thread instead of before load_model returns
    // (serve: the server answers at once; not a flag).
    bool page_in_in_background = false;
};

void add_model_options(CLI::App* cmd, ModelOptions& options);

struct LoadedModel {
    std::unique_ptr<Model> model;
    std::unique_ptr<Tokenizer> tokenizer;  // nullptr when the file has no vocabulary
    std::unique_ptr<ThreadPool> pool;
    SessionOptions session;
};

// Loads the model and its tokenizer and starts the thread pool; logs what was chosen.
// Throws Error on a bad file or flag.
LoadedModel load_model(const ModelOptions& options);

// "1,2,3" -> ids; throws Error naming the flag and the bad item.
std::vector<int32_t> parse_token_list(const std::string& list, const std::string& flag);

KvType parse_kv_type(const std::string& name);

}  // namespace tandem::cli
