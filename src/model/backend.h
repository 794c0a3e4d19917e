// Chooses and builds the backend that computes a model: the CUDA backend where this build has
// one and a GPU is present (or asked for), otherwise the CPU backend. Logs the choice.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/thread_pool.h"
#include "cpu/kv_cache.h"
#include "model/expert_placement.h"
#include "model/model.h"
#include "model/ops.h"

namespace tandem {

enum class Device { kAuto, kCpu, kCuda };

// "auto", "cpu" or "cuda"; throws Error naming the flag's value otherwise.
Device parse_device(std::string_view name);
const char* device_name(Device device);

struct BackendOptions {
    Device device = Device::kCpu;
    int max_batch = 512;  // tokens per forward call
    int n_seq = 1;        // KV cache sequence slots
    int n_ctx = 4096;     // positions per sequence
    KvType kv_type = KvType::kF16;
    GpuOptions gpu;  // the GPU backend's memory budget and expert placement
};

// The backend for `options.device`: kAuto takes the GPU when there is one and the GPU backend
// takes the model, and otherwise says in one log line why not; kCuda without a usable GPU (or in
// a build without CUDA, or for a model the GPU backend cannot run) throws Error.
std::unique_ptr<Ops> make_backend(const Model& model, ThreadPool& pool,
                                  const BackendOptions& options);

// True when this build has the CUDA backend and a GPU answers; otherwise `why` says what is
// missing (no CUDA in this build, no driver, no device).
bool gpu_available(std::string* why = nullptr);

}  // namespace tandem
