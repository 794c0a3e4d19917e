// Causal multi-head attention over the KV cache, with grouped-query heads, computed as
// llama.cpp's CPU graph does without flash attention: scores q·K as a matrix product of the
// keys with the queries (rounded to the cache type), softmax, then the transposed values times
// the softmax weights (rounded to the cache type), through the chosen kernel variant.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "cpu/kv_cache.h"

namespace tandem {

// Where one token of a batch sits: its sequence slot and position.
struct TokenPlace {
    int seq = 0;
    int pos = 0;
};

class Attention {
  public:
    // Scratch for n_threads workers over sequences of up to n_ctx positions, heads of up to
    // head_dim values, up to max_group query heads per KV head and windows of up to max_window
    // positions (0: none).
    Attention(int n_threads, int n_ctx, int head_dim, int max_group, int max_window = 0);

    // What one layer's attention sees and how it weighs it.
    struct Params {
        int n_head = 0;
        float scale = 1.0f;            // of q·k
        int window = 0;                // > 0: positions pos - window < j <= pos only
        const float* sinks = nullptr;  // [n_head]: exp(sink) joins each head's softmax denominator
    };

    // For every token t and head h: out[t][h] = Σ_j softmax_j(q[t][h] · K[j] · scale) · V[j]
    // over the positions j ≤ pos_t of the token's sequence (the last `window` of them when
    // window > 0, read from the cache's ring, in position order whatever the ring's size, so
    // results do not depend on it), K/V from kv head h / (n_head / n_kv); with sinks,
    // the softmax's denominator also holds exp(sink[h]) (ggml's soft_max_add_sinks).
    // q: n_tokens × n_head × head_dim_k; out: n_tokens × n_head × head_dim_v.
    void run(const KvCache& cache, int layer, const float* q, const TokenPlace* places,
             int n_tokens, const Params& params, float* out, ThreadPool& pool);

  private:
    // Heads [h0, h0 + n) of one token, all reading KV head kv_head: their queries are the
    // columns of one tile over the keys, their weights the columns of one tile over the values.
    void head_group(const KvCache& cache, int layer, const float* q, TokenPlace place, int kv_head,
                    int h0, int n, const Params& params, float* out, int worker);

    struct Scratch {
        std::vector<uint8_t> query;    // max_group × head_dim values in the cache type
        std::vector<float> scores;     // max_group × n_ctx
        std::vector<uint8_t> weights;  // max_group × n_ctx values in the cache type
        std::vector<uint8_t> values;   // head_dim × max(window, chunk): values in position order
        std::vector<float> part;       // max_group × head_dim: one chunk's product
    };
    // Positions transposed at a time when the values are in the keys.
    static constexpr int kLatentChunk = 256;
    // The softmax·V products of n heads when the values are the keys' first dims.
    void latent_values(const KvCache& cache, int layer, int seq, int kv_head, int first, int n_kv, int n,
                       float* out, int worker);
    int n_ctx_;
    int head_dim_;
    std::vector<Scratch> scratch_;  // per worker
};

}  // namespace tandem
