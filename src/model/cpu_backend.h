// The CPU backend: implements the Ops contract over host memory with the chosen kernel variant,
// a persistent thread pool, the KV cache and the MoE executor.
#pragma once

#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "cpu/activation_rows.h"
#include "cpu/attention.h"
#include "cpu/kv_cache.h"
#include "cpu/matmul.h"
#include "cpu/moe_executor.h"
#include "cpu/moe_routing.h"
#include "cpu/rope.h"
#include "model/model.h"
#include "model/ops.h"

namespace tandem {

struct CpuBackendOptions {
    int max_batch = 512;  // tokens per forward call
    int n_seq = 1;        // KV cache sequence slots
    int n_ctx = 4096;     // positions per sequence
    KvType kv_type = KvType::kF16;
};

class CpuBackend final : public Ops {
  public:
    CpuBackend(const Model& model, ThreadPool& pool, const CpuBackendOptions& options);

    KvCache& kv_cache() { return kv_; }
    ThreadPool& pool() { return pool_; }

    void embed(const WeightMatrix& table, const int32_t* tokens, Act out) override;
    void rms_norm(Act x, const std::vector<float>& w, float eps, Act out) override;
    void rms_norm_heads(Act x, int head_dim, const std::vector<float>& w, float eps) override;
    void matmul(Act in, std::initializer_list<MatmulTarget> targets) override;
    void add_bias(Act x, const std::vector<float>& bias) override;
    void rope(Act x, int n_heads, int head_dim, const TokenPlace* places) override;
    void store_kv(int layer, Act k, Act v, const TokenPlace* places) override;
    void attention(int layer, Act q, const TokenPlace* places, Act out) override;
    void glu(GluKind kind, Act gate, Act up, Act out) override;
    void add(Act y, Act x) override;
    void moe(int layer, Act in, Act out) override;
    void gather_rows(Act x, const std::vector<int>& rows, Act out) override;

  private:
    const Model& model_;
    const ModelConfig& c_;
    ThreadPool& pool_;
    KvCache kv_;
    Attention attention_;
    Rope rope_;
    ActivationSet activations_;
    std::unique_ptr<MoeExecutor> moe_;
    RoutingParams routing_;
    std::vector<float> router_logits_;            // [max_batch × n_expert]
    std::vector<Route> routes_;                   // [max_batch × top_k]
    std::vector<std::vector<float>> rope_cache_;  // per worker: n_dims
    std::vector<MatmulJob> matmul_jobs_;          // the products of one matmul() call
};

}  // namespace tandem
