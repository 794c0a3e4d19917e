// The operations a decoder's forward pass is written against. The CPU backend implements them
// over host memory; the CUDA backend implements the same contract over device memory. Everything
// an operation reads or writes is the backend's: activations come from allocate(), weights from
// weights(), and the batch's token ids and places are handed over once by set_batch(), so that a
// GPU backend can record a whole forward pass once and replay it (CUDA graphs).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "cpu/attention.h"
#include "cpu/elementwise.h"
#include "cpu/weight_matrix.h"
#include "model/model_weights.h"

namespace tandem {

// rows × cols activations in the backend's memory, rows `stride` floats apart.
struct Act {
    float* data = nullptr;
    int rows = 0;
    int64_t cols = 0;
    int64_t stride = 0;
    float* row(int r) const { return data + r * stride; }
    Act first_rows(int n) const { return {data, n, cols, stride}; }
};

// One matrix of a group that shares an input: out = in · Wᵀ.
struct MatmulTarget {
    const WeightMatrix* weight;
    Act out;
};

class Ops {
  public:
    virtual ~Ops() = default;

    // "cpu" or "cuda", for logs.
    virtual std::string name() const = 0;
    // The model's weights as this backend holds them: views into its memory.
    virtual const ModelWeights& weights() const = 0;
    // rows × cols floats in the backend's memory, kept as long as the backend.
    virtual Act allocate(int rows, int64_t cols) = 0;
    // The inputs of the next forward pass: token t at places[t]; logit_rows lists the batch rows
    // whose logits are wanted, in output order. Checks the places against the KV cache.
    virtual void set_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                           std::span<const int32_t> logit_rows) = 0;
    // Runs `pass`, a forward pass over the batch of set_batch(). Passes with the same key issue
    // the same operations on the same buffers, so a backend may record the first and replay it.
    virtual void run(uint64_t key, const std::function<void()>& pass) {
        (void)key;
        pass();
    }
    // Copies x (x.rows × x.cols) to host memory, rows packed.
    virtual void read(Act x, float* host) = 0;
    // host[r] = the column of the largest value of row r of x (the lowest among equals): greedy
    // decoding without copying the logits out.
    virtual void argmax(Act x, int32_t* host) = 0;

    // out[t] = row tokens[t] of the embedding table, as f32.
    virtual void embed(const WeightMatrix& table, Act out) = 0;
    // out = rms_norm(x) · w, row by row: x / sqrt(mean(x²) + eps) (the mean summed in double),
    // then times w; an empty w multiplies by nothing. out may be x.
    virtual void rms_norm(Act x, const WeightVector& w, float eps, Act out) = 0;
    // In place, every head_dim slice of every row: x = rms_norm(x) · w (w of head_dim values, or
    // empty: no weight).
    virtual void rms_norm_heads(Act x, int head_dim, const WeightVector& w, float eps) = 0;
    // The residual add that closes a block and the norm that opens the next, in one step: x +=
    // residual (unless residual.data is null), then out = rms_norm(x) · w, as add() and
    // rms_norm() compute them. `reader`, when given, is a matrix whose product reads out next: a
    // backend may round out to that matrix's activation type in the same pass.
    virtual void residual_norm(Act x, Act residual, const WeightVector& w, float eps, Act out,
                               const WeightMatrix* reader) {
        (void)reader;
        if (residual.data != nullptr) add(x, residual);
        rms_norm(x, w, eps, out);
    }
    // Per-head norm then rotary embedding of n_heads heads per row (queries or keys with
    // per-head norms): rms_norm_heads(x, head_dim, w, eps), then rope(layer, x, ...).
    virtual void norm_rope_heads(int layer, Act x, int n_heads, int head_dim, const WeightVector& w,
                                 float eps) {
        rms_norm_heads(x, head_dim, w, eps);
        rope(layer, x, n_heads, head_dim);
    }
    // The attention block's per-head steps before attention, in one: norm_rope_heads() of q's
    // n_head heads (q_norm) and of k's n_head_kv heads (k_norm), then store_kv(layer, k, v).
    virtual void norm_rope_store(int layer, Act q, int n_head, Act k, int n_head_kv, Act v,
                                 int head_dim, const WeightVector& q_norm,
                                 const WeightVector& k_norm, float eps) {
        norm_rope_heads(layer, q, n_head, head_dim, q_norm, eps);
        norm_rope_heads(layer, k, n_head_kv, head_dim, k_norm, eps);
        store_kv(layer, k, v);
    }
    // Several matrices over the same input; the input is converted once per activation format.
    virtual void matmul(Act in, std::initializer_list<MatmulTarget> targets) = 0;
    virtual void add_bias(Act x, const WeightVector& bias) = 0;
    // One matrix per head (w's "experts" are the heads): for every row t and head h < n_heads,
    // out[t][h·out_head_stride + r] = Σ_k W_h[r][k] · in[t][h·in_head_stride + k], k over
    // w.matrix.cols, r over w.matrix.rows; each head's input converted to the weights'
    // activation format on its own (ggml's batched mul_mat over the heads). MLA's absorbed
    // key and value up-projections.
    virtual void matmul_heads(const ExpertMatrix& w, int n_heads, Act in, int64_t in_head_stride, Act out,
                              int64_t out_head_stride) = 0;
    // Rotary embedding of n_heads heads per row with the rope of config.layers[layer] (its base,
    // scale, rotated dimensions, YaRN and frequency factors), row t at the position of token t.
    virtual void rope(int layer, Act x, int n_heads, int head_dim) = 0;
    // Stores row t of k and v at token t's place in the KV cache of `layer`, whose shape is the
    // layer's (n_head_kv heads of head_dim_k / head_dim_v). A sliding-window layer's cache is a
    // ring of kv_cache_positions() positions per sequence: position p goes to slot p mod size.
    virtual void store_kv(int layer, Act k, Act v) = 0;
    // Causal attention of each token's queries (config.layers[layer]: n_head heads of
    // head_dim_k, grouped over n_head_kv KV heads; with values_in_keys the values are the first
    // head_dim_v dims of each key, and store_kv's v is ignored) over the KV cache of layer
    // config.layers[layer].kv_layer: token t at position p sees the positions j <= p of its
    // sequence (kFull), or p - window < j <= p (kSliding). Scores are q·k · attn_scale; when
    // weights().layers[layer].attn_sinks is not empty, exp(sink[h] - max) joins the softmax's
    // denominator of head h (the max taken over the scores and the sink), as ggml's
    // soft_max_add_sinks. out: n_head × head_dim_v per row. `reader`, when given, is the matrix
    // whose product reads out next: a backend may round out for it in the same pass.
    virtual void attention(int layer, Act q, Act out, const WeightMatrix* reader) = 0;
    // out = act(gate, up) row by row (GluKind says how, as ggml computes it). out may be gate.
    virtual void glu(GluKind kind, Act gate, Act up, Act out) = 0;
    // y += x.
    virtual void add(Act y, Act x) = 0;
    // x *= s.
    virtual void scale(Act x, float s) = 0;
    // x[t][i] *= w[i] (w of x.cols values), or x[t][i] *= w[0] when w has one value.
    virtual void mul(Act x, const WeightVector& w) = 0;
    // x = cap · tanh(x · (1/cap)) (ggml's scale, tanh, scale of final logit soft-capping).
    virtual void softcap(Act x, float cap) = 0;
    // x = 1 / (1 + exp(-x)).
    virtual void sigmoid(Act x) = 0;
    // x[t][i] *= σ(gate[t][i]) (gate as wide as x), or x[t][i] *= σ(gate[t][0]) (gate one column
    // wide), σ as sigmoid() computes it (ggml's sigmoid then mul).
    virtual void mul_sigmoid(Act x, Act gate) = 0;
    // In place, every head_dim slice of every row: x = x / max(‖x‖₂, eps) (the sum of squares in
    // double; ggml_l2_norm).
    virtual void l2_norm_heads(Act x, int head_dim, float eps) = 0;
    // The gated delta-net's decay, per column (head) h: x[t][h] = softplus(x[t][h] + bias[h]) ·
    // a[h], softplus(y) = y > 20 ? y : log(1 + exp(y)) (ggml_softplus).
    virtual void ssm_decay(Act x, const WeightVector& bias, const WeightVector& a) = 0;
    // The short causal convolution of a gated delta-net layer, then SiLU: for token t of
    // sequence s and channel c, out[t][c] = silu(Σ_i w[c][i] · u_{p-K+1+i}[c]) over the K taps of
    // weights().layers[layer].ssm_conv (channel-major), i in order, where u_p is x's row of the
    // token at position p and u_{p'} for p' < p comes from the batch's earlier rows of the same
    // sequence or from the sequence's conv state (its last K-1 inputs; zeros at position 0). The
    // state then keeps the sequence's last K-1 inputs. A sequence's tokens in a batch are in
    // position order, each continuing where the state left it (a token at position 0 starts the
    // sequence over); anything else is an Error.
    virtual void short_conv(int layer, Act x, Act out) = 0;
    // The gated delta rule of a gated delta-net layer (ggml_gated_delta_net), per token of each
    // sequence in order and per value head h (key head h mod n_k_heads; config.delta), with the
    // sequence's state S_h (head_dim × head_dim; zeros at position 0): S_h *= exp(g[t][h]);
    // d = (v[t][h] - S_hᵀ k[t][h]) · beta[t][h]; S_h += k[t][h] dᵀ; out[t][h] = S_hᵀ q[t][h] /
    // √head_dim. q, k: n_k_heads × head_dim per row; v, out: n_v_heads × head_dim; g, beta:
    // n_v_heads. The same ordering rules as short_conv.
    virtual void delta_net(int layer, Act q, Act k, Act v, Act g, Act beta, Act out) = 0;
    // dst = src (same shape; either may be a strided view, e.g. rows of per-head slices).
    virtual void copy(Act src, Act dst) = 0;
    // The routed experts of an MoE layer, from the router's logits [rows × n_expert] (bias
    // included): the layer's gating (config.gating: softmax then top-k; top-k of the logits then
    // softmax over the k; sigmoid then top-k), the choice made on the scores plus
    // weights().layers[layer].expert_bias when there is one (the weights stay the unbiased
    // scores) and, with config.n_expert_groups > 1, only among the n_group_used groups whose two
    // best scores sum highest (route_experts in cpu/moe_routing.h), optional renormalisation of the k weights
    // (config.expert_weights_norm, the sum clamped below at 2^-14) and scale
    // (config.expert_weights_scale), then the experts over `in` (gate and up, their per-expert
    // scales and biases, config.expert_activation, down with its scale and bias) and their
    // weighted sum in route order into out. Among equal scores the lower expert id goes first.
    virtual void moe(int layer, Act logits, Act in, Act out) = 0;
    // moe() whose out is read next only by residual_norm(), as its residual: a backend may leave
    // the experts' weighted sum to that norm, which then takes it in the same pass (on the GPU a
    // launch less a decode layer), and out unwritten.
    virtual void moe_into_residual(int layer, Act logits, Act in, Act out) {
        moe(layer, logits, in, out);
    }
    // out[i] = x[logit_rows[i]] for the logit rows of set_batch().
    virtual void gather_logit_rows(Act x, Act out) = 0;

    // The prefix cache in host memory (engine/prefix_cache.h) keeps finished sequences beyond
    // the KV cache's sequence slots. A sequence's state after its first n positions is what its
    // caches hold for them: the KV of positions 0..n-1 (a sliding window's ring: the ring's
    // slots that hold them), and each recurrent layer's conv and delta-net states, which stand
    // at position n. save_sequence() copies it out; load_sequence() copies it into a sequence
    // slot (the same or another), which then continues from any position the saved one could
    // have (max_rewind()) with the same numbers. sequence_state_bytes(n) is the size of the
    // copy; 0 for a backend that cannot copy sequences, which keeps reuse within its slots.
    virtual size_t sequence_state_bytes(int n_positions) const {
        (void)n_positions;
        return 0;
    }
    // out holds sequence_state_bytes(n_positions) bytes. Throws Error naming the sequence when
    // its state does not stand at n_positions (a recurrent state elsewhere).
    virtual void save_sequence(int seq, int n_positions, uint8_t* out) {
        (void)seq, (void)n_positions, (void)out;
        throw_unsupported("save_sequence");
    }
    // in holds what save_sequence(any seq, n_positions) wrote, on this backend.
    virtual void load_sequence(int seq, int n_positions, const uint8_t* in) {
        (void)seq, (void)n_positions, (void)in;
        throw_unsupported("load_sequence");
    }

  protected:
    [[noreturn]] void throw_unsupported(const char* op) const;
};

}  // namespace tandem
