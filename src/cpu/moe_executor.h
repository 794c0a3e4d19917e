// The CPU MoE executor: computes a layer's routed experts from the expert weights in host
// memory, for any mix of weight formats. submit() returns at once; wait() gives the output.
//
// Routes are grouped by expert so every expert's rows are read once per step for all the tokens
// routed to it (small-matmul tiles). Pass 1 computes gate and up and the activation into an
// intermediate, quantized once for the down format by whichever thread finishes an expert's
// last tile; pass 2 computes down and the weighted sum per token, in route order (as llama.cpp
// adds experts), so results do not depend on the number of threads. Work is split into tiles
// claimed from one shared counter; a pass-2 tile waits only for its own expert (a completion
// flag, no locks and no barrier between the passes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "cpu/moe_layer.h"

namespace tandem {

class MoeExecutor {
  public:
    // Buffers are sized here for batches of up to max_tokens tokens with top_k routes each;
    // nothing is allocated per call.
    MoeExecutor(std::vector<MoeLayer> layers, int max_tokens, int top_k, ThreadPool& pool);
    ~MoeExecutor();
    MoeExecutor(const MoeExecutor&) = delete;
    MoeExecutor& operator=(const MoeExecutor&) = delete;

    // hidden: n_tokens × n_embd floats; routes: n_tokens × top_k. Both must stay valid until
    // wait() returns. A route with expert -1 is skipped.
    void submit(int layer, const float* hidden, int n_tokens, const Route* routes);
    // Returns out: n_tokens × n_embd, valid until the next submit().
    const float* wait();

    const MoeLayer& layer(int il) const { return layers_[il]; }
    int max_tokens() const { return max_tokens_; }
    int top_k() const { return top_k_; }

  private:
    struct Plan;
    void run_job(int worker);
    void prepare_inputs(int64_t token);
    void gate_up_item(int64_t item, int worker);
    void finish_expert(int active_index);
    void down_item(int block, int active_index, int worker);
    void weighted_sum(int64_t h0, int64_t h1);

    std::vector<MoeLayer> layers_;
    int max_tokens_;
    int top_k_;
    ThreadPool& pool_;
    std::unique_ptr<Plan> plan_;
    bool pending_ = false;      // submitted, not yet waited for
    bool job_running_ = false;  // the pool runs this layer's job
};

}  // namespace tandem
