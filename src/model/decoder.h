// The forward pass of the decoder architectures (llama, qwen3, qwen3moe), written once
// against the Ops contract: embedding, then per layer norm → attention → residual → norm →
// FFN (dense or routed experts) → residual, then the final norm and the output head.
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
    void layer(int il, int n);

    const ModelConfig& c_;
    Ops& ops_;
    const ModelWeights& w_;  // the backend's
    int max_batch_;
    std::vector<int32_t> logit_rows_;
    // Activations, max_batch rows each (T = tokens in the batch, M = rows that want logits):
    Act x_;       // [T × n_embd] residual stream
    Act h_;       // [T × n_embd] normed input of a block
    Act q_;       // [T × n_head·dk]
    Act k_;       // [T × n_kv·dk]
    Act v_;       // [T × n_kv·dv]
    Act attn_;    // [T × n_head·dv]
    Act o_;       // [T × n_embd] block output
    Act gate_;    // [T × n_ff] dense FFN
    Act up_;      // [T × n_ff]
    Act out_x_;   // [M × n_embd] rows that want logits
    Act logits_;  // [M × n_vocab]
};

}  // namespace tandem
