// The CPU backend.
#include "model/cpu_backend.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "cpu/elementwise.h"
#include "cpu/matmul.h"

namespace tandem {
namespace {

KvShape kv_shape(const ModelConfig& c, const CpuBackendOptions& o) {
    return {c.n_layer, o.n_seq, o.n_ctx, c.n_head_kv, c.head_dim_k, c.head_dim_v};
}

}  // namespace

CpuBackend::CpuBackend(const Model& model, ThreadPool& pool, const CpuBackendOptions& o)
    : model_(model),
      c_(model.config()),
      pool_(pool),
      kv_(kv_shape(model.config(), o), o.kv_type),
      attention_(pool.size(), o.n_ctx,
                 std::max(model.config().head_dim_k, model.config().head_dim_v),
                 std::max(1, model.config().n_head / std::max(1, model.config().n_head_kv))),
      rope_(model.config().rope),
      rope_cache_(pool.size(), std::vector<float>(model.config().rope.n_dims + 2)) {
    int64_t widest = std::max<int64_t>({c_.n_embd, int64_t{c_.n_head} * c_.head_dim_v, c_.n_ff});
    activations_.reserve(o.max_batch, widest);
    matmul_jobs_.reserve(8);
    tokens_.reserve(o.max_batch);
    places_.reserve(o.max_batch);
    logit_rows_.reserve(o.max_batch);
    if (c_.is_moe()) {
        std::vector<MoeLayer> layers;
        for (const LayerWeights& L : model.weights().layers) layers.push_back(L.experts);
        moe_ =
            std::make_unique<MoeExecutor>(std::move(layers), o.max_batch, c_.n_expert_used, pool);
        routing_ = {c_.n_expert, c_.n_expert_used, c_.expert_weights_norm, c_.expert_weights_scale};
        router_logits_.resize(static_cast<size_t>(o.max_batch) * c_.n_expert);
        routes_.resize(static_cast<size_t>(o.max_batch) * c_.n_expert_used);
    }
}

Act CpuBackend::allocate(int rows, int64_t cols) {
    const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    buffers_.push_back(std::unique_ptr<float[]>(new float[n]));
    return {buffers_.back().get(), rows, cols, cols};
}

void CpuBackend::set_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                           std::span<const int32_t> logit_rows) {
    for (const TokenPlace& p : places) {
        if (p.seq < 0 || p.seq >= kv_.shape().n_seq || p.pos < 0 || p.pos >= kv_.shape().n_ctx) {
            fail(
                "token at sequence {} position {} is outside the KV cache ({} sequences x {} "
                "positions)",
                p.seq, p.pos, kv_.shape().n_seq, kv_.shape().n_ctx);
        }
    }
    tokens_.assign(tokens.begin(), tokens.end());
    places_.assign(places.begin(), places.end());
    logit_rows_.assign(logit_rows.begin(), logit_rows.end());
}

void CpuBackend::read(Act x, float* host) {
    for (int t = 0; t < x.rows; ++t) std::memcpy(host + t * x.cols, x.row(t), sizeof(float) * x.cols);
}

void CpuBackend::argmax(Act x, int32_t* host) {
    for (int t = 0; t < x.rows; ++t) {
        const float* row = x.row(t);
        host[t] = static_cast<int32_t>(std::max_element(row, row + x.cols) - row);
    }
}

void CpuBackend::embed(const WeightMatrix& table, Act out) {
    for (int t = 0; t < out.rows; ++t)
        table.format->dequantize_row(table.row(tokens_[t]), out.row(t), out.cols);
}

void CpuBackend::rms_norm(Act x, const WeightVector& w, float eps, Act out) {
    for (int t = 0; t < x.rows; ++t) tandem::rms_norm(x.row(t), w.data, x.cols, eps, out.row(t));
}

void CpuBackend::rms_norm_heads(Act x, int head_dim, const WeightVector& w, float eps) {
    const int64_t heads = x.cols / head_dim;
    for (int t = 0; t < x.rows; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            float* p = x.row(t) + h * head_dim;
            tandem::rms_norm(p, w.data, head_dim, eps, p);
        }
    }
}

void CpuBackend::matmul(Act in, std::initializer_list<MatmulTarget> targets) {
    activations_.reset(in.data, static_cast<size_t>(in.stride), in.rows, in.cols);
    // The input converted once per format, then every product in one job of the pool.
    std::vector<MatmulJob>& jobs = matmul_jobs_;
    jobs.clear();
    for (const MatmulTarget& target : targets) {
        const WeightMatrix& w = *target.weight;
        const ActivationRows& rows = activations_.get(w.format->dot_type, &pool_);
        jobs.push_back({&w, &rows, target.out.data, static_cast<size_t>(target.out.stride)});
    }
    matmul_group(jobs, pool_);
}

void CpuBackend::add_bias(Act x, const WeightVector& bias) {
    for (int t = 0; t < x.rows; ++t) add_into(x.row(t), bias.data, x.cols);
}

void CpuBackend::rope(Act x, int n_heads, int head_dim) {
    for (int t = 0; t < x.rows; ++t)
        rope_.apply(x.row(t), n_heads, head_dim, places_[t].pos, rope_cache_[0].data());
}

void CpuBackend::store_kv(int layer, Act k, Act v) {
    for (int t = 0; t < k.rows; ++t) {
        const TokenPlace p = places_[t];
        kv_.store_k(layer, p.seq, p.pos, k.row(t));
        kv_.store_v(layer, p.seq, p.pos, v.row(t));
    }
}

void CpuBackend::attention(int layer, Act q, Act out) {
    attention_.run(kv_, layer, q.data, places_.data(), q.rows, c_.n_head, c_.attn_scale, out.data,
                   pool_);
}

void CpuBackend::glu(GluKind kind, Act gate, Act up, Act out) {
    for (int t = 0; t < gate.rows; ++t)
        tandem::glu(kind, gate.row(t), up.row(t), gate.cols, out.row(t));
}

void CpuBackend::add(Act y, Act x) {
    for (int t = 0; t < y.rows; ++t) add_into(y.row(t), x.row(t), y.cols);
}

void CpuBackend::moe(int layer, Act in, Act out) {
    const LayerWeights& L = model_.weights().layers[layer];
    const int n = in.rows;
    Act logits{router_logits_.data(), n, c_.n_expert, c_.n_expert};
    matmul(in, {{&L.router, logits}});
    for (int t = 0; t < n; ++t)
        route_experts(routing_, logits.row(t), routes_.data() + t * c_.n_expert_used);
    moe_->submit(layer, in.data, n, routes_.data());
    const float* result = moe_->wait();
    for (int t = 0; t < n; ++t)
        std::memcpy(out.row(t), result + t * in.cols, sizeof(float) * in.cols);
}

void CpuBackend::gather_logit_rows(Act x, Act out) {
    for (size_t i = 0; i < logit_rows_.size(); ++i) {
        std::memmove(out.row(static_cast<int>(i)), x.row(logit_rows_[i]), sizeof(float) * x.cols);
    }
}

}  // namespace tandem
