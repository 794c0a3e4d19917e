// Causal multi-head attention over the KV cache, with grouped-query heads, computed as
// llama.cpp's CPU graph does without flash attention: with an f16 cache the query and the
// softmax weights are rounded to f16 before their dot products, as ggml converts them.
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
    // Scratch for n_threads workers over sequences of up to n_ctx positions.
    Attention(int n_threads, int n_ctx, int head_dim);

    // For every token t and head h: out[t][h] = Σ_j softmax_j(q[t][h] · K[j] · scale) · V[j]
    // over positions j ≤ pos_t of the token's sequence, K/V from kv head h / (n_head / n_kv).
    // q: n_tokens × n_head × head_dim_k; out: n_tokens × n_head × head_dim_v.
    void run(const KvCache& cache, int layer, const float* q, const TokenPlace* places,
             int n_tokens, int n_head, float scale, float* out, ThreadPool& pool);

private:
    void one_head(const KvCache& cache, int layer, const float* q, TokenPlace place, int kv_head,
                  float scale, float* out, int worker);
    int n_ctx_;
    std::vector<std::vector<float>> scores_;  // per worker: n_ctx
    std::vector<std::vector<float>> query_;   // per worker: head_dim (f16-rounded query)
};

}  // namespace tandem
