// Causal multi-head attention over the KV cache.
#include "cpu/attention.h"

#include <cstring>

#include "cpu/elementwise.h"
#include "formats/float16.h"

namespace tandem {

Attention::Attention(int n_threads, int n_ctx, int head_dim)
    : n_ctx_(n_ctx), scores_(n_threads, std::vector<float>(n_ctx)),
      query_(n_threads, std::vector<float>(head_dim)) {}

void Attention::run(const KvCache& cache, int layer, const float* q, const TokenPlace* places,
                    int n_tokens, int n_head, float scale, float* out, ThreadPool& pool) {
    const KvShape& s = cache.shape();
    const int group = n_head / s.n_kv_head;
    const int64_t items = static_cast<int64_t>(n_tokens) * n_head;
    pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1, int worker) {
        for (int64_t i = i0; i < i1; ++i) {
            const int t = static_cast<int>(i / n_head), h = static_cast<int>(i % n_head);
            one_head(cache, layer, q + (static_cast<int64_t>(t) * n_head + h) * s.head_dim_k, places[t],
                     h / group, scale,
                     out + (static_cast<int64_t>(t) * n_head + h) * s.head_dim_v, worker);
        }
    });
}

void Attention::one_head(const KvCache& cache, int layer, const float* q, TokenPlace place,
                         int kv_head, float scale, float* out, int worker) {
    const KvShape& s = cache.shape();
    const int n_kv = place.pos + 1;
    const int dk = s.head_dim_k, dv = s.head_dim_v;
    float* scores = scores_[worker].data();
    float* query = query_[worker].data();
    const bool f16 = cache.type() == KvType::kF16;

    // Scores q·k_j; ggml converts q to the cache's f16 before the dot product.
    for (int d = 0; d < dk; ++d) query[d] = f16 ? fp16_to_f32(f32_to_fp16(q[d])) : q[d];
    for (int j = 0; j < n_kv; ++j) {
        const uint8_t* k = cache.k(layer, place.seq, j) + static_cast<size_t>(kv_head) * dk * cache.value_bytes();
        float dot = 0.0f;
        if (f16) {
            const uint16_t* kh = reinterpret_cast<const uint16_t*>(k);
            for (int d = 0; d < dk; ++d) dot += query[d] * fp16_to_f32(kh[d]);
        } else {
            const float* kf = reinterpret_cast<const float*>(k);
            for (int d = 0; d < dk; ++d) dot += query[d] * kf[d];
        }
        scores[j] = dot;
    }
    softmax(scores, n_kv, scale);

    // Weighted sum of values; with an f16 cache the weights are rounded to f16 first.
    std::memset(out, 0, sizeof(float) * dv);
    for (int j = 0; j < n_kv; ++j) {
        const float p = f16 ? fp16_to_f32(f32_to_fp16(scores[j])) : scores[j];
        const uint8_t* v = cache.v(layer, place.seq, j) + static_cast<size_t>(kv_head) * dv * cache.value_bytes();
        if (f16) {
            const uint16_t* vh = reinterpret_cast<const uint16_t*>(v);
            for (int d = 0; d < dv; ++d) out[d] += p * fp16_to_f32(vh[d]);
        } else {
            const float* vf = reinterpret_cast<const float*>(v);
            for (int d = 0; d < dv; ++d) out[d] += p * vf[d];
        }
    }
}

}  // namespace tandem
