// Causal multi-head attention over the KV cache.
#include "cpu/attention.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "cpu/elementwise.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

GgmlType cache_format(const KvCache& cache) {
    return cache.type() == KvType::kF16 ? GgmlType::kF16 : GgmlType::kF32;
}

// out[c * out_stride + r] = row r · column c, columns in groups the tile contract allows.
void dot_columns(DotTileFn dot, int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                 const uint8_t* a, size_t a_stride, int n_cols, float* out, size_t out_stride) {
    for (int c0 = 0; c0 < n_cols; c0 += kMaxTileCols) {
        dot(k, w, w_stride, n_rows, a + c0 * a_stride, a_stride,
            std::min(kMaxTileCols, n_cols - c0), out + c0 * out_stride, out_stride);
    }
}

}  // namespace

Attention::Attention(int n_threads, int n_ctx, int head_dim, int max_group, int max_window)
    : n_ctx_(n_ctx), head_dim_(head_dim), scratch_(n_threads) {
    for (Scratch& s : scratch_) {
        // f32 is the wider cache type: 4 bytes per value.
        s.query.resize(static_cast<size_t>(max_group) * head_dim * 4);
        s.scores.resize(static_cast<size_t>(max_group) * n_ctx);
        s.weights.resize(static_cast<size_t>(max_group) * n_ctx * 4);
        const int gathered = std::max(std::min(max_window, n_ctx), std::min(kLatentChunk, n_ctx));
        s.values.resize(static_cast<size_t>(head_dim) * gathered * 4);
        s.part.resize(static_cast<size_t>(max_group) * head_dim);
    }
}

void Attention::run(const KvCache& cache, int layer, const float* q, const TokenPlace* places,
                    int n_tokens, const Params& params, float* out, ThreadPool& pool) {
    const KvShape& s = cache.shape();
    const int n_head = params.n_head;
    const int group = n_head / s.n_kv_head;
    if (static_cast<size_t>(group) * s.head_dim_k * 4 > scratch_[0].query.size() ||
        s.head_dim_k > head_dim_ || s.head_dim_v > head_dim_) {
        fail("attention: {} heads per KV head of {}/{} values exceed the scratch", group,
             s.head_dim_k, s.head_dim_v);
    }
    // Items: (token, KV head, part of its query heads). Whole groups read each key and value
    // once for all their heads; groups are split only when there are too few for the threads.
    int parts = 1;
    while (parts < group &&
           static_cast<int64_t>(n_tokens) * s.n_kv_head * parts < 2 * pool.size()) {
        do ++parts;
        while (group % parts != 0);
    }
    const int per_part = group / parts;
    const int64_t items = static_cast<int64_t>(n_tokens) * s.n_kv_head * parts;
    pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1, int worker) {
        for (int64_t i = i0; i < i1; ++i) {
            const int t = static_cast<int>(i / (s.n_kv_head * parts));
            const int rest = static_cast<int>(i % (s.n_kv_head * parts));
            const int kv_head = rest / parts;
            const int h0 = kv_head * group + (rest % parts) * per_part;
            const int64_t row = static_cast<int64_t>(t) * n_head + h0;
            head_group(cache, layer, q + row * s.head_dim_k, places[t], kv_head, h0, per_part, params,
                       out + row * s.head_dim_v, worker);
        }
    });
}

void Attention::head_group(const KvCache& cache, int layer, const float* q, TokenPlace place,
                           int kv_head, int h0, int n, const Params& params, float* out, int worker) {
    const KvShape& s = cache.shape();
    // The positions seen: [first, place.pos], at most the window, in the cache's slots as one
    // run, or two when they wrap around the ring.
    const int first = params.window > 0 ? std::max(0, place.pos - params.window + 1) : 0;
    const int n_kv = place.pos - first + 1;
    if (n_kv > s.n_ctx || n_kv > n_ctx_) {
        fail("attention: position {} sees {} positions, the cache keeps {}", place.pos, n_kv, s.n_ctx);
    }
    const int slot0 = cache.slot(first);
    const int run0 = std::min(n_kv, s.n_ctx - slot0);  // slots [slot0, slot0 + run0), then [0, n_kv - run0)
    const int dk = s.head_dim_k, dv = s.head_dim_v;
    const GgmlType format = cache_format(cache);
    const KernelTable& kt = kernels();
    const DotTileFn dot = kt.dot[type_id(format)];
    const ActQuantizeFn convert = kt.quantize[type_id(format)];
    Scratch& sc = scratch_[worker];
    const size_t vb = cache.value_bytes();
    const uint8_t* keys = cache.k_head(layer, place.seq, kv_head);
    const uint8_t* values = cache.v_head(layer, place.seq, kv_head);

    // Scores: the keys (rows, one per position) times the queries in the cache type (columns),
    // as ggml converts q to the f16 of the cache before the dot products.
    for (int c = 0; c < n; ++c)
        convert(q + static_cast<size_t>(c) * dk, sc.query.data() + c * dk * vb, dk);
    dot_columns(dot, dk, keys + slot0 * cache.k_position_bytes(), cache.k_position_bytes(), run0,
                sc.query.data(), dk * vb, n, sc.scores.data(), n_ctx_);
    if (run0 < n_kv) {
        dot_columns(dot, dk, keys, cache.k_position_bytes(), n_kv - run0, sc.query.data(), dk * vb, n,
                    sc.scores.data() + run0, n_ctx_);
    }

    // Softmax per head, the weights in the cache type (ggml rounds them to f16 for an f16 cache).
    for (int c = 0; c < n; ++c) {
        float* p = sc.scores.data() + static_cast<size_t>(c) * n_ctx_;
        if (params.sinks != nullptr) {
            softmax_with_sink(p, n_kv, params.scale, params.sinks[h0 + c]);
        } else {
            softmax(p, n_kv, params.scale);
        }
        convert(p, sc.weights.data() + static_cast<size_t>(c) * n_ctx_ * vb, n_kv);
    }

    if (s.values_in_keys) {
        latent_values(cache, layer, place.seq, kv_head, first, n_kv, n, out, worker);
        return;
    }
    // Values: the transposed values (rows, one per dimension, of n_kv positions) times the weights.
    if (run0 == n_kv) {
        dot_columns(dot, n_kv, values + slot0 * vb, cache.v_row_bytes(), dv, sc.weights.data(), n_ctx_ * vb, n, out,
                    dv);
        return;
    }
    // The window wraps around the ring: its values gathered in position order first, so that each
    // dot product runs over the positions in the same order as without the wrap.
    const size_t row = static_cast<size_t>(n_kv) * vb;
    if (sc.values.size() < dv * row) fail("attention: a window of {} positions exceeds the scratch", n_kv);
    for (int d = 0; d < dv; ++d) {
        const uint8_t* src = values + static_cast<size_t>(d) * cache.v_row_bytes();
        uint8_t* dst = sc.values.data() + d * row;
        std::memcpy(dst, src + slot0 * vb, static_cast<size_t>(run0) * vb);
        std::memcpy(dst + static_cast<size_t>(run0) * vb, src, static_cast<size_t>(n_kv - run0) * vb);
    }
    dot_columns(dot, n_kv, sc.values.data(), row, dv, sc.weights.data(), n_ctx_ * vb, n, out, dv);
}

void Attention::latent_values(const KvCache& cache, int layer, int seq, int kv_head, int first, int n_kv, int n,
                              float* out, int worker) {
    // The values are the first dv dims of the keys, stored by position: chunks of positions are
    // transposed into rows of positions per dim (as ggml transposes the view before its product),
    // each chunk's product added to the output.
    const KvShape& s = cache.shape();
    const int dv = s.head_dim_v;
    const size_t vb = cache.value_bytes();
    const KernelTable& kt = kernels();
    const DotTileFn dot = kt.dot[type_id(cache_format(cache))];
    Scratch& sc = scratch_[worker];
    const uint8_t* keys = cache.k_head(layer, seq, kv_head);
    const size_t key_bytes = cache.k_position_bytes();
    for (int c0 = 0; c0 < n_kv; c0 += kLatentChunk) {
        const int cn = std::min(kLatentChunk, n_kv - c0);
        const size_t row = static_cast<size_t>(cn) * vb;
        for (int j = 0; j < cn; ++j) {
            const uint8_t* key = keys + static_cast<size_t>(cache.slot(first + c0 + j)) * key_bytes;
            uint8_t* dst = sc.values.data() + static_cast<size_t>(j) * vb;
            if (vb == 2) {
                for (int d = 0; d < dv; ++d) std::memcpy(dst + d * row, key + d * 2, 2);
            } else {
                for (int d = 0; d < dv; ++d) std::memcpy(dst + d * row, key + d * 4, 4);
            }
        }
        float* target = c0 == 0 ? out : sc.part.data();
        dot_columns(dot, cn, sc.values.data(), row, dv, sc.weights.data() + static_cast<size_t>(c0) * vb, n_ctx_ * vb,
                    n, target, dv);
        if (c0 > 0) {
            for (int i = 0; i < n * dv; ++i) out[i] += sc.part[i];
        }
    }
}

}  // namespace tandem
