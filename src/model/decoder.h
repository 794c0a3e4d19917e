// The forward pass of the decoder architectures (llama, qwen3, qwen3moe, gemma4, gpt-oss),
// written once against the Ops contract: embedding, then per layer norm → attention →
// residual → norm → FFN (dense, routed experts, or both) → residual, then the final norm and the
// output head. The model's config says which parts a layer has (ModelConfig, LayerConfig).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "model/ops.h"

namespace tandem {

class Decoder {
  public:
    // Activation buffers for batches of up to max_batch tokens are allocated here, in the
    // backend's memory.
    Decoder(const Model& model, Ops& ops, int max_batch);

    // Evaluates a batch: token t at places[t]. Logits of the tokens with want_logits[t] != 0 are
    // written, in batch order, to logits (rows of n_vocab floats). Returns the number of rows.
    int eval(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
             std::span<const uint8_t> want_logits, float* logits);

    // As eval, but writes only the argmax of each wanted row's logits (greedy decoding; the
    // logits stay in the backend).
    int eval_argmax(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                    std::span<const uint8_t> want_logits, int32_t* ids);

    int max_batch() const { return max_batch_; }
    Ops& ops() { return ops_; }

  private:
    // Checks and hands over the batch, runs the forward pass; returns the rows that want logits.
    int run_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                  std::span<const uint8_t> want_logits);
    // The forward pass of n tokens, of which m want logits.
    void forward(int n, int m);
    // Gemma's per-layer inputs of the batch into pl_ (n_embd_per_layer > 0).
    void per_layer_inputs(int n);
    void layer(int il, int n);
    void attention(int il, int n);
    // Multi-head latent attention (DeepSeek-V2/V3) of layer il, into o_.
    void latent_attention(int il, int n);
    // A gated delta-net layer (qwen3.5's linear attention), into o_.
    void delta_net(int il, int n);
    // The FFN block of layer il on the residual x_; its output in o_.
    void ffn(int il, int n);
    // A gated FFN: out = down(act(gate(in)) · up(in)), `width` wide.
    void glu_ffn(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, int width, Act in,
                 Act out);
    // The routed experts of layer il on `in` (the router reading router_in) into out;
    // into_residual: out is read next only as the next norm's residual (Ops::moe_into_residual).
    void experts(int il, Act router_in, Act in, Act out, bool into_residual = false);
    // Whether layer il's FFN output goes unchanged to the next layer's first norm, as its
    // residual (nothing between: no post-norm, output scale or per-layer input).
    bool ffn_output_feeds_next_norm(int il) const;
    // The residual stream's pending add: a block's output waits in residual_ so that the add
    // and the next block's norm run as one operation (Ops::residual_norm).
    void add_residual();
    // out = rms_norm(x_ + residual_) · w, x_ updated; reader: the matrix that reads out next.
    void norm_input(const WeightVector& w, Act out, const WeightMatrix* reader);

    const ModelConfig& c_;
    Ops& ops_;
    const ModelWeights& w_;  // the backend's
    int max_batch_;
    std::vector<int32_t> logit_rows_;
    // Activations, max_batch rows each (T = tokens in the batch, M = rows that want logits; the
    // attention buffers are as wide as the widest layer, each layer uses their first columns):
    Act x_;       // [T × n_embd] residual stream
    Act h_;       // [T × n_embd] normed input of a block
    Act q_;       // [T × n_head·dk]
    Act k_;       // [T × n_kv·dk]
    Act v_;       // [T × n_kv·dv]
    Act attn_;    // [T × n_head·dv]
    Act o_;       // [T × n_embd] block output
    Act residual_;  // a block output not yet added to x_ (add_residual, norm_input), or empty
    Act gate_;    // [T × n_ff] dense FFN
    Act up_;      // [T × n_ff]
    Act router_;  // [T × n_expert] router logits
    Act r_;       // [T × n_embd] router input (kScaledRmsNorm)
    Act e_;       // [T × n_embd] a dense FFN's or shared expert's output beside the experts
    Act qa_;      // [T × n_head·(N + R)] MLA: the queries before their absorption
    Act ql_;      // [T × Lq] MLA: the queries' low-rank projection
    Act av_;      // [T × n_head·Dv] MLA: the values after their up-projection
    Act qg_;      // [T × n_head·2·dk] queries with their output gates (attn_output_gate)
    Act ag_;      // [T × n_head·dk] the output gates
    Act sg_;      // [T × 1] the shared expert's gate
    Act mixed_;   // [T × C] delta-net: q, k, v before the convolution
    Act conv_;    // [T × C] ... after it
    Act z_;       // [T × Hv·S] the output gate
    Act beta_;    // [T × Hv]
    Act decay_;   // [T × Hv]
    Act dn_;      // [T × Hv·S] the delta rule's output
    Act pl_;      // [T × n_pl·n_layer] per-layer inputs: layer il's are columns [il·n_pl, (il+1)·n_pl)
    Act pl_proj_; // [T × n_pl·n_layer] their projection from the embeddings
    Act pl_gate_; // [T × n_pl]
    Act out_x_;   // [M × n_embd] rows that want logits
    Act logits_;  // [M × n_vocab]
};

}  // namespace tandem
