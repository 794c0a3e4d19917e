// Routed experts computed by the CPU executor inside the GPU backend's stream (the `cpu`
// strategy, the CPU layers of --moe-cpu-layers, hybrid's misses): the layer's input rows and the
// routes the GPU chose go to pinned host memory through a HostMailbox, a thread of this class
// that polls it runs the CPU MoE executor on them (from the expert weights in host memory, in
// place), and the stream waits for its weighted sum and takes it back. All of it is kernels, so a
// decode step with CPU layers is still one CUDA graph, and no host thread waits on the stream.
// The thread spins while requests come (a decode step's layers are tens of µs apart) and sleeps
// in short naps after a few milliseconds without one.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "cpu/moe_executor.h"
#include "cuda/host_mailbox.h"
#include "model/model.h"

namespace tandem {

class GpuCpuExperts {
  public:
    // The executor over the host experts of the layers marked in on_cpu, for batches of up to
    // max_tokens tokens.
    GpuCpuExperts(const Model& model, const std::vector<bool>& on_cpu, int max_tokens,
                  ThreadPool& pool);
    ~GpuCpuExperts();
    GpuCpuExperts(const GpuCpuExperts&) = delete;
    GpuCpuExperts& operator=(const GpuCpuExperts&) = delete;

    bool has(int layer) const {
        return layer >= 0 && layer < static_cast<int>(index_.size()) && index_[layer] >= 0;
    }
    // Queues on `stream` the experts of `layer` over n rows of `in` (device, rows `in_stride`
    // floats apart) with the device routes (n × top_k), the weighted sum into out (device).
    void enqueue(int layer, const float* in, int64_t in_stride, const Route* routes, int n,
                 float* out, int64_t out_stride, cudaStream_t stream);
    // The seconds the executor takes for one expert of one token's routes, measured here with
    // nothing beside it: calls of one token routed to top_k distinct experts, each call on other
    // experts (of another layer where there are several) so that they are read from memory as
    // in a step, not from the cache; the median call over top_k. Before any enqueue.
    double seconds_per_expert();
    // Throws the Error a host function met since the last call (after the stream synchronised).
    void check();

  private:
    // The thread that answers the mailbox's requests until stop_.
    void serve();
    void compute(int layer, int n) noexcept;

    const int64_t n_embd_;
    const int top_k_;
    std::vector<int> index_;  // layer -> executor layer, -1: on the GPU
    std::unique_ptr<MoeExecutor> executor_;
    // Requests: max_tokens rows of n_embd and their routes (max_tokens × top_k); answers:
    // max_tokens rows of n_embd.
    cuda::HostMailbox mailbox_;
    std::atomic<bool> stop_{false};
    std::thread server_;
    std::mutex error_mutex_;
    std::string error_;
    std::atomic<bool> failed_{false};
    // With TANDEM_GPU_PROFILE=1: the requests' count, their seconds in the executor, and the
    // seconds from one's end to the next one's start (the GPU's share of a step, plus the
    // mailbox's round trip), logged at exit.
    bool timed_ = false;
    long timed_calls_ = 0;
    double executor_seconds_ = 0.0, between_seconds_ = 0.0, last_end_ = 0.0;
};

}  // namespace tandem
