// The CPU backend: implements the Ops contract over host memory with the chosen kernel variant,
// a persistent thread pool, the KV caches (one per layer that owns one, sized by the layer: a
// ring of its window for a sliding layer) and the MoE executor.
#pragma once

#include <memory>
#include <span>
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

    // The cache layer `layer` reads (its own, or the one it shares).
    KvCache& kv_cache(int layer) { return *kv_[c_.layers[layer].kv_layer]; }
    // Bytes of every KV cache.
    size_t kv_bytes() const;
    ThreadPool& pool() { return pool_; }

    std::string name() const override { return "cpu"; }
    const ModelWeights& weights() const override { return model_.weights(); }
    Act allocate(int rows, int64_t cols) override;
    void set_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                   std::span<const int32_t> logit_rows) override;
    void read(Act x, float* host) override;
    void argmax(Act x, int32_t* host) override;

    void embed(const WeightMatrix& table, Act out) override;
    void rms_norm(Act x, const WeightVector& w, float eps, Act out) override;
    void rms_norm_heads(Act x, int head_dim, const WeightVector& w, float eps) override;
    void matmul(Act in, std::initializer_list<MatmulTarget> targets) override;
    void add_bias(Act x, const WeightVector& bias) override;
    void matmul_heads(const ExpertMatrix& w, int n_heads, Act in, int64_t in_head_stride, Act out,
                      int64_t out_head_stride) override;
    void rope(int layer, Act x, int n_heads, int head_dim) override;
    void store_kv(int layer, Act k, Act v) override;
    void attention(int layer, Act q, Act out, const WeightMatrix* reader) override;
    void glu(GluKind kind, Act gate, Act up, Act out) override;
    void add(Act y, Act x) override;
    void scale(Act x, float s) override;
    void mul(Act x, const WeightVector& w) override;
    void softcap(Act x, float cap) override;
    void copy(Act src, Act dst) override;
    void sigmoid(Act x) override;
    void mul_sigmoid(Act x, Act gate) override;
    void l2_norm_heads(Act x, int head_dim, float eps) override;
    void ssm_decay(Act x, const WeightVector& bias, const WeightVector& a) override;
    void short_conv(int layer, Act x, Act out) override;
    void delta_net(int layer, Act q, Act k, Act v, Act g, Act beta, Act out) override;
    void moe(int layer, Act logits, Act in, Act out) override;
    void gather_logit_rows(Act x, Act out) override;
    size_t sequence_state_bytes(int n_positions) const override;
    void save_sequence(int seq, int n_positions, uint8_t* out) override;
    void load_sequence(int seq, int n_positions, const uint8_t* in) override;

  private:
    const Model& model_;
    const ModelConfig& c_;
    ThreadPool& pool_;
    std::vector<std::unique_ptr<KvCache>> kv_;  // per layer; null for a layer that shares another's
    // The recurrent state of a gated delta-net layer, per sequence.
    struct RecurrentState {
        std::vector<float> conv;          // [n_seq × (taps-1) × C] each sequence's last inputs, oldest first
        std::vector<float> ssm;           // [n_seq × Hv × S × S] element (i, j) of head h at [j·S + i]
        std::vector<int> conv_pos, ssm_pos;  // per sequence: the position each state continues at
    };
    std::vector<RecurrentState> recurrent_;     // per layer (empty for the others)
    // The batch's rows of each sequence, in order; checks positions, zeroes states at position 0.
    void sequence_rows(const char* op, int layer, std::vector<int>& next_pos, float* state, size_t state_size);
    std::vector<std::vector<int>> seq_rows_;    // per sequence: its rows in this batch
    // Checks the arguments of save_sequence() and load_sequence().
    void check_sequence(const char* op, int seq, int n_positions) const;
    std::vector<float> delta_scratch_;          // per worker: S values
    Attention attention_;
    std::vector<Rope> ropes_;                   // per layer
    ActivationSet activations_;
    std::unique_ptr<MoeExecutor> moe_;
    std::vector<int> moe_index_;                  // per layer: its index in the executor, or -1
    RoutingParams routing_;
    std::vector<float> scores_;                   // [max_batch × n_expert] gate scores
    std::vector<Route> routes_;                   // [max_batch × top_k]
    std::vector<std::vector<float>> rope_cache_;  // per worker: n_dims
    std::vector<MatmulJob> matmul_jobs_;          // the products of one matmul() call
    std::vector<float> heads_in_;                 // matmul_heads: the heads' inputs packed
    std::vector<ActivationRows> head_rows_;       // ... and each head's view of their conversion
    std::vector<WeightMatrix> head_weights_;      // ... and matrix
    // The batch of set_batch().
    std::vector<int32_t> tokens_;
    std::vector<TokenPlace> places_;
    std::vector<int32_t> logit_rows_;
    int n_ctx_ = 0;
    int n_seq_ = 0;
    // Activation buffers of allocate(), left uninitialised: pages nobody writes (the logits of
    // rows a batch never fills) cost no memory.
    std::vector<std::unique_ptr<float[]>> buffers_;
};

}  // namespace tandem
