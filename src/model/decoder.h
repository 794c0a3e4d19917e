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
    // Activation buffers for batches of up to max_batch tokens are allocated here.
    Decoder(const Model& model, Ops& ops, int max_batch);

    // Evaluates a batch: token t at places[t]. Logits of the tokens with want_logits[t] != 0 are
    // written, in batch order, to logits (rows of n_vocab floats). Returns the number of rows.
    int eval(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
             std::span<const uint8_t> want_logits, float* logits);

    int max_batch() const { return max_batch_; }

private:
    void layer(int il, int n);
    Act buffer(std::vector<float>& storage, int rows, int64_t cols);

    const Model& model_;
    const ModelConfig& c_;
    Ops& ops_;
    int max_batch_;
    const TokenPlace* places_ = nullptr;
    // Activations (T = tokens in the batch):
    std::vector<float> x_;      // [T × n_embd] residual stream
    std::vector<float> h_;      // [T × n_embd] normed input of a block
    std::vector<float> q_;      // [T × n_head·dk]
    std::vector<float> k_;      // [T × n_kv·dk]
    std::vector<float> v_;      // [T × n_kv·dv]
    std::vector<float> attn_;   // [T × n_head·dv]
    std::vector<float> o_;      // [T × n_embd] block output
    std::vector<float> gate_;   // [T × n_ff] dense FFN
    std::vector<float> up_;     // [T × n_ff]
    std::vector<float> out_x_;  // [T × n_embd] rows that want logits
};

}  // namespace tandem
