// The CUDA backend: implements the Ops contract over device memory. At start-up it uploads every
// weight as the file stores it (cuda/host_image.h), places the KV cache and the activations in
// VRAM, and then runs every operation on one stream: matrix products of any GGUF type, norms,
// rope, attention, and MoE layers: routing on the device, then the experts either resident in
// VRAM (grouped expert products and the weighted sum on the device) or, for the layers the
// expert placement (model/expert_placement.h) leaves in host memory, computed by the CPU executor
// within the stream (model/gpu_cpu_experts.h), or, under the offload strategy, copied into a cache
// of expert slots in VRAM and computed there (model/gpu_expert_slots.h), or under hybrid split
// per step between those slots (hits) and the CPU executor (misses) at once. Decode batches (up to
// cuda::kSmallBatch tokens) are recorded once per size as CUDA graphs and replayed.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "cpu/moe_routing.h"
#include "cuda/attention.h"
#include "cuda/delta_net.h"
#include "cuda/dequant_tables.h"
#include "cuda/host_image.h"
#include "cuda/matmul.h"
#include "cuda/memory.h"
#include "cuda/moe_routing.h"
#include "cuda/op_profile.h"
#include "cuda/rope.h"
#include "cuda/stream.h"
#include "model/cpu_backend.h"
#include "model/expert_placement.h"
#include "model/gpu_cpu_experts.h"
#include "model/gpu_expert_slots.h"
#include "model/gpu_expert_stream.h"
#include "model/model.h"
#include "model/ops.h"

namespace tandem {

class GpuBackend final : public Ops {
  public:
    // gpu: the memory budget and where the experts go. Throws Error when the model does not
    // fit, saying how much it needs. weights().layers[il].experts of a layer whose experts stay
    // on the CPU are host views.
    GpuBackend(const Model& model, ThreadPool& pool, const CpuBackendOptions& options,
               const GpuOptions& gpu);
    ~GpuBackend() override;

    std::string name() const override { return "cuda"; }
    const ModelWeights& weights() const override { return weights_; }
    Act allocate(int rows, int64_t cols) override;
    void set_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                   std::span<const int32_t> logit_rows) override;
    void run(uint64_t key, const std::function<void()>& pass) override;
    void read(Act x, float* host) override;
    void argmax(Act x, int32_t* host) override;

    void embed(const WeightMatrix& table, Act out) override;
    void rms_norm(Act x, const WeightVector& w, float eps, Act out) override;
    void rms_norm_heads(Act x, int head_dim, const WeightVector& w, float eps) override;
    void residual_norm(Act x, Act residual, const WeightVector& w, float eps, Act out,
                       const WeightMatrix* reader) override;
    void norm_rope_heads(int layer, Act x, int n_heads, int head_dim, const WeightVector& w,
                         float eps) override;
    void matmul(Act in, std::initializer_list<MatmulTarget> targets) override;
    void add_bias(Act x, const WeightVector& bias) override;
    void matmul_heads(const ExpertMatrix& w, int n_heads, Act in, int64_t in_head_stride, Act out,
                      int64_t out_head_stride) override;
    void rope(int layer, Act x, int n_heads, int head_dim) override;
    void store_kv(int layer, Act k, Act v) override;
    void norm_rope_store(int layer, Act q, int n_head, Act k, int n_head_kv, Act v, int head_dim,
                         const WeightVector& q_norm, const WeightVector& k_norm,
                         float eps) override;
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
    void moe_into_residual(int layer, Act logits, Act in, Act out) override;
    void gather_logit_rows(Act x, Act out) override;
    size_t sequence_state_bytes(int n_positions) const override;
    void save_sequence(int seq, int n_positions, uint8_t* out) override;
    void load_sequence(int seq, int n_positions, const uint8_t* in) override;

  private:
    // Copies sequence seq's keys and values of positions 0..n_positions-1, every layer's (a
    // sliding layer's: the ring's slots that hold them), between the KV cache and host (keys of
    // every layer, then values), then its recurrent layers' states, as sequence_state_bytes()
    // counts.
    void copy_sequence(const char* op, int seq, int n_positions, uint8_t* host, bool to_host);
    // Recurrent models: checks that each sequence of the batch continues where its states stand
    // (or starts over at position 0), moves them on, and writes the batch grouped by sequence
    // (rows, then n SequenceSpans) at `staging`; returns the bytes written.
    size_t stage_recurrent_batch(std::span<const TokenPlace> places, uint8_t* staging);
    // The batch's sequences as the recurrent kernels take them: a decode batch (a graph replayed
    // for any mix of sequences) as many spans as rows, a prefill batch its own.
    cuda::RecurrentBatch recurrent_batch(int rows) const;
    // Layer `layer`'s conv or delta-rule state of every sequence.
    cuda::RecurrentState recurrent_state(int layer, bool conv) const;
    void check_supported() const;
    // Decides which layers' experts stay on the CPU and adds what goes to the GPU to image_;
    // returns the bytes the GPU holds.
    size_t place_weights(const GpuOptions& gpu, size_t kv_and_activation_bytes);
    void upload_weights();
    // hybrid: max_fetch_ as asked (--moe-hybrid-max-fetch, >= 0), or from this machine's measured
    // copy and CPU executor times (-1).
    void choose_max_fetch(int asked);
    // The routed experts of m over `in` (`routes` naming m's experts) into out, on the GPU;
    // with defer_sum, their weighted sum may be left to the next residual_norm (pending_sum_).
    void gpu_experts(const MoeLayer& m, const Route* routes, Act in, Act out, bool defer_sum);
    // gpu_experts' parts: the routed products, whose outputs it returns, and their weighted sum
    // into out (plus the rows of outputs.extra), or, with defer_sum where the width allows, the
    // sum left to the next residual norm.
    cuda::RoutedRows gpu_expert_products(const MoeLayer& m, const Route* routes, Act in);
    void moe_sum(const cuda::RoutedRows& outputs, Act out, bool defer_sum);
    // Waits for the stream; throws the first error of a kernel or of the CPU experts.
    void synchronize(const char* what);
    float* device_floats(size_t n, const char* what);
    // A copy of `host` in device memory kept as long as the backend.
    void* upload(const void* host, size_t bytes, const char* what);
    // `in` rounded through w's activation type into rounded_ (cuda/activation_rounding.h), or
    // in itself for f32 weights; rounded_ is reused while the same input and type follow. For
    // the q8 types the codes too (rounded_q8_), for the integer kernels.
    struct RoundedInput {
        const float* data;
        const cuda::Q8Rows* q8;  // nullptr: no q8 codes
    };
    RoundedInput rounded_input(Act in, const WeightMatrix& w);
    // rounded_ (and rounded_q8_) now hold `in` rounded through `type`.
    void remember_rounded(Act in, GgmlType type);
    // Every operation calls this for what it writes: a rounded copy of x is then stale.
    void written(Act x);
    // Device memory for the q8 codes of rows × cols activations, and its size in floats.
    cuda::Q8Rows q8_rows(int64_t rows, int64_t cols);
    static size_t q8_floats(int64_t rows, int64_t cols);

    const Model& model_;
    const ModelConfig& c_;
    CpuBackendOptions options_;
    size_t budget_ = 0;
    cuda::Stream stream_;
    cuda::GraphCache graphs_;
    cuda::OpProfile profile_;
    cuda::DeviceDequantTables dequant_tables_;
    cuda::MatmulContext ctx_;
    cuda::HostImage image_;
    ModelWeights weights_;  // views into image_ (experts on the CPU: host views)
    ExpertPlacement placement_;
    std::unique_ptr<GpuCpuExperts> cpu_experts_;      // the layers whose experts are on the CPU
    std::unique_ptr<GpuExpertStream> expert_stream_;  // their experts for prefill batches
    bool slot_map_stale_ = true;  // the stream's copy of the slot table may be out of date
    std::unique_ptr<GpuExpertSlots> expert_slots_;    // offload, hybrid: their experts for decode
    // hybrid: the misses' CPU executor runs on side_stream_ while the GPU computes the hits.
    cuda::Stream side_stream_;
    cuda::Event hybrid_fork_, hybrid_join_;
    int max_fetch_ = 0;  // missed experts copied into slots per layer and step
    std::vector<cuda::DeviceBuffer> buffers_;

    cuda::DeviceKv kv_;
    // The gated delta-net layers' states (qwen3.5), in one allocation: recurrent layer r's of
    // sequence s at recurrent_ + (r · n_seq + s) · recurrent_seq_floats_, its conv state
    // ((taps-1) × conv width) then its delta-rule state (value heads × head_dim²), as the CPU's.
    float* recurrent_ = nullptr;
    std::vector<int> recurrent_index_;  // per layer: its index among the recurrent layers, or -1
    int n_recurrent_ = 0;
    size_t recurrent_conv_floats_ = 0;  // per layer and sequence
    size_t recurrent_seq_floats_ = 0;   // ... conv and delta-rule state
    std::vector<int> recurrent_pos_;    // per sequence: the position its states continue at
    // Scratch of stage_recurrent_batch: the positions after the batch, each sequence's span in
    // it (or -1), the batch's spans.
    std::vector<int> staged_pos_;
    std::vector<int> span_of_seq_;
    std::vector<cuda::SequenceSpan> spans_;
    int32_t* seq_rows_ = nullptr;            // [T] the batch's rows grouped by sequence
    cuda::SequenceSpan* seq_spans_ = nullptr;  // [T]
    int n_spans_ = 0;                          // of the current batch
    cuda::AttentionScratch attention_scratch_;
    // The rotations of the layers: one per distinct rope (one for most models; Gemma 4's sliding
    // and global layers have their own), with device copies of the table's vectors.
    struct LayerRope {
        RopeParams params;
        cuda::RopeTable table;
        const float* factor = nullptr;
        const float* ramp = nullptr;
    };
    std::vector<LayerRope> ropes_;
    std::vector<int> rope_of_;  // per layer: its index in ropes_
    const LayerRope& layer_rope(int layer) const { return ropes_[rope_of_[layer]]; }
    // Device copies of the ropes' tables (in the constructor).
    void make_ropes();

    // The batch: device copies of set_batch's arrays, staged in pinned memory.
    int32_t* tokens_ = nullptr;
    TokenPlace* places_ = nullptr;
    int32_t* logit_rows_ = nullptr;
    uint64_t* argmax_keys_ = nullptr;  // [T]: cuda::argmax_rows' keys
    cuda::PinnedBuffer batch_staging_;
    cudaEvent_t batch_copied_ = nullptr;
    bool batch_staged_ = false;
    int max_pos_ = 0;  // of the current batch
    cuda::PinnedBuffer read_staging_;
    float* rounded_ = nullptr;  // [T × the widest matrix input]
    const float* rounded_from_ = nullptr;  // the activations rounded_ holds, or nullptr
    int64_t rounded_extent_ = 0;            // their span in floats
    int rounded_rows_ = 0;
    GgmlType rounded_as_ = GgmlType::kF32;
    cuda::Q8Rows rounded_q8_;  // the codes of rounded_

    // MoE scratch (T = max_batch, k = experts per token).
    RoutingParams routing_;
    Act router_probs_;              // [T × n_expert]: route_topk's probabilities
    Route* routes_ = nullptr;       // [T · k]
    Route* slot_routes_ = nullptr;  // offload, hybrid: routes_ naming slots [kMaxSlotRoutes]
    Route* cpu_routes_ = nullptr;   // hybrid: the misses of routes_ [kMaxSlotRoutes]
    Act hybrid_out_;                // hybrid: the CPU executor's sums [kSmallBatch × n_embd]
    cuda::Q8Rows expert_q8_;        // the codes of the down projections' input [T · k × n_ff_exp]
    float* expert_gate_ = nullptr;  // [T · k × n_ff_exp]
    float* expert_up_ = nullptr;    // [T · k × n_ff_exp]
    float* expert_down_ = nullptr;  // [T · k × n_embd]
    // moe_into_residual(): an MoE output whose weighted sum the next residual_norm takes, where
    // `out` (its residual) would have held it; out == nullptr when none waits.
    struct PendingSum {
        const float* out = nullptr;
        cuda::RoutedRows experts;
    };
    bool defer_sum_ = false;  // within moe_into_residual()
    PendingSum pending_sum_;
    cuda::GroupBuffers groups_;

    // matmul_heads (multi-head latent attention): the heads' input rows t · H + h as routes to
    // "expert" h (the routed products' kernels), and their grouping for prefill batches.
    Route* head_routes_ = nullptr;  // [T · n_head]
    cuda::GroupBuffers head_groups_;
};

}  // namespace tandem
