// One sequence: prompt processing in batches, then one token at a time, keeping its place in the
// KV cache, on the backend the options choose. Used by `tandem run`, `tandem logits` and
// `tandem chat`.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "model/backend.h"
#include "model/decoder.h"
#include "model/model.h"

namespace tandem {

struct SessionOptions {
    int n_ctx = 4096;      // positions of the sequence (at most the model's training context)
    int max_batch = 512;   // prompt tokens per forward call
    KvType kv_type = KvType::kF16;
    Device device = Device::kCpu;
    GpuOptions gpu;  // BackendOptions::gpu
};

class Session {
public:
    Session(const Model& model, ThreadPool& pool, const SessionOptions& options);

    // Evaluates tokens at the next positions; returns the logits of the last one.
    std::span<const float> feed(std::span<const int32_t> tokens);
    // Evaluates tokens at the next positions and returns the argmax of the last one's logits
    // (computed where the logits are: greedy decoding without copying them out).
    int32_t feed_greedy(std::span<const int32_t> tokens);
    // Evaluates tokens at the next positions and returns the logits of every one of them
    // (teacher forcing): tokens.size() × n_vocab.
    std::span<const float> feed_all(std::span<const int32_t> tokens);

    int position() const { return n_past_; }
    int n_ctx() const { return options_.n_ctx; }
    int n_vocab() const { return model_.config().n_vocab; }
    const Ops& backend() const { return *backend_; }
    // Forgets the sequence (the KV cache is overwritten from position 0).
    void reset() { n_past_ = 0; }
    // Forgets the positions from `position` on; the ones before stay, so a prompt that shares
    // them (the next turn of a chat) need not evaluate them again. When the cache no longer
    // holds what the position needs (a sliding window's ring has moved past it:
    // max_rewind()), the whole sequence is forgotten; position() says where to continue from.
    void rewind(int position);

private:
    void check_room(size_t n) const;
    // Evaluates tokens at the next positions in batches of at most max_batch, with places_ and
    // want_ set for each (every row wants logits with want_all, else the last one):
    // eval(batch, offset of the batch in tokens).
    template <typename Eval>
    void for_each_batch(std::span<const int32_t> tokens, bool want_all, Eval eval);

    const Model& model_;
    SessionOptions options_;
    std::unique_ptr<Ops> backend_;
    Decoder decoder_;
    int n_past_ = 0;
    std::vector<float> logits_;
    std::vector<TokenPlace> places_;
    std::vector<uint8_t> want_;
};

}  // namespace tandem
