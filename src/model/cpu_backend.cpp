// The CPU backend.
#include "model/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "cpu/elementwise.h"
#include "cpu/matmul.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

int widest_head(const ModelConfig& c) {
    int w = 1;
    for (const LayerConfig& L : c.layers) w = std::max({w, L.head_dim_k, L.head_dim_v});
    return w;
}

int widest_group(const ModelConfig& c) {
    int g = 1;
    for (const LayerConfig& L : c.layers) g = std::max(g, L.n_head / std::max(1, L.n_head_kv));
    return g;
}

int widest_window(const ModelConfig& c) {
    int w = 0;
    for (const LayerConfig& L : c.layers) {
        if (L.attention == AttentionKind::kSliding) w = std::max(w, L.window);
    }
    return w;
}

int widest_rope(const ModelConfig& c) {
    int n = c.rope.n_dims;
    for (const LayerConfig& L : c.layers) n = std::max(n, L.rope.n_dims);
    return n;
}

}  // namespace

CpuBackend::CpuBackend(const Model& model, ThreadPool& pool, const CpuBackendOptions& o)
    : model_(model),
      c_(model.config()),
      pool_(pool),
      attention_(pool.size(), o.n_ctx, widest_head(model.config()), widest_group(model.config()),
                 widest_window(model.config())),
      rope_cache_(pool.size(), std::vector<float>(widest_rope(model.config()) + 2)) {
    n_ctx_ = o.n_ctx;
    n_seq_ = o.n_seq;
    kv_.resize(c_.n_layer);
    recurrent_.resize(c_.n_layer);
    seq_rows_.resize(o.n_seq);
    const ModelConfig::DeltaNet& d = c_.delta;
    delta_scratch_.resize(static_cast<size_t>(pool.size()) * std::max(1, d.head_dim));
    for (int il = 0; il < c_.n_layer; ++il) {
        const LayerConfig& L = c_.layers[il];
        ropes_.emplace_back(L.rope);
        if (L.attention == AttentionKind::kRecurrent) {
            RecurrentState& r = recurrent_[il];
            r.conv.assign(static_cast<size_t>(o.n_seq) * (d.conv_kernel - 1) * d.conv_width(), 0.0f);
            r.ssm.assign(static_cast<size_t>(o.n_seq) * d.value_width() * d.head_dim, 0.0f);
            r.conv_pos.assign(o.n_seq, 0);
            r.ssm_pos.assign(o.n_seq, 0);
            continue;
        }
        if (L.kv_layer != il) continue;
        const KvShape shape{1,           o.n_seq,      kv_cache_positions(L, o.n_ctx, o.max_batch),
                            L.n_head_kv, L.head_dim_k, L.head_dim_v,
                            L.values_in_keys};
        kv_[il] = std::make_unique<KvCache>(shape, o.kv_type);
    }
    {
        // Per position of one sequence: what the caches of all layers hold for it (rings count
        // their slots, not the context).
        size_t per_position = 0, recurrent = 0;
        for (const RecurrentState& r : recurrent_) recurrent += (r.conv.size() + r.ssm.size()) * sizeof(float);
        if (recurrent > 0) {
            log_info("recurrent state: {:.2f} MiB for {} sequence(s)", static_cast<double>(recurrent) / (1 << 20),
                     o.n_seq);
        }
        for (const auto& kv : kv_) {
            if (!kv) continue;
            const KvShape& s = kv->shape();
            per_position += static_cast<size_t>(s.n_kv_head) * (s.head_dim_k + (s.values_in_keys ? 0 : s.head_dim_v)) *
                            kv->value_bytes();
        }
        log_info("kv cache: {:.2f} MiB for {} sequence(s) of {} positions ({} bytes per full-attention position)",
                 static_cast<double>(kv_bytes()) / (1 << 20), o.n_seq, o.n_ctx, per_position);
    }
    int64_t widest = std::max<int64_t>({c_.n_embd, int64_t{c_.n_head} * c_.head_dim_v, c_.n_ff,
                                        int64_t{c_.n_embd_per_layer} * c_.n_layer});
    activations_.reserve(o.max_batch, widest);
    matmul_jobs_.reserve(8);
    head_weights_.resize(c_.n_head);
    tokens_.reserve(o.max_batch);
    places_.reserve(o.max_batch);
    logit_rows_.reserve(o.max_batch);
    if (c_.is_moe()) {
        std::vector<MoeLayer> layers;
        moe_index_.assign(c_.n_layer, -1);
        for (int il = 0; il < c_.n_layer; ++il) {
            if (!c_.layers[il].moe) continue;
            moe_index_[il] = static_cast<int>(layers.size());
            layers.push_back(model.weights().layers[il].experts);
        }
        moe_ =
            std::make_unique<MoeExecutor>(std::move(layers), o.max_batch, c_.n_expert_used, pool);
        routing_ = {c_.n_expert,         c_.n_expert_used,   c_.gating, c_.expert_weights_norm,
                    c_.expert_weights_scale, c_.n_expert_groups, c_.n_group_used};
        scores_.resize(static_cast<size_t>(o.max_batch) * c_.n_expert);
        routes_.resize(static_cast<size_t>(o.max_batch) * c_.n_expert_used);
    }
}

size_t CpuBackend::kv_bytes() const {
    size_t n = 0;
    for (const auto& kv : kv_) n += kv ? kv->bytes() : 0;
    return n;
}

Act CpuBackend::allocate(int rows, int64_t cols) {
    const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    buffers_.push_back(std::unique_ptr<float[]>(new float[n]));
    return {buffers_.back().get(), rows, cols, cols};
}

void CpuBackend::set_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                           std::span<const int32_t> logit_rows) {
    for (const TokenPlace& p : places) {
        if (p.seq < 0 || p.seq >= n_seq_ || p.pos < 0 || p.pos >= n_ctx_) {
            fail(
                "token at sequence {} position {} is outside the KV cache ({} sequences x {} "
                "positions)",
                p.seq, p.pos, n_seq_, n_ctx_);
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

void CpuBackend::matmul_heads(const ExpertMatrix& w, int n_heads, Act in, int64_t in_head_stride, Act out,
                              int64_t out_head_stride) {
    const int64_t cols = w.matrix.cols;
    const FormatTraits& act = format_of(w.matrix.format->dot_type);
    if (cols % act.block_size != 0) fail("matmul_heads: heads of {} values for {} activations", cols, act.name);
    // The heads' inputs packed, converted once (blocks never straddle two heads), then one view
    // per head and one group of products for the pool.
    const int64_t width = cols * n_heads;
    if (in_head_stride == cols) {
        activations_.reset(in.data, static_cast<size_t>(in.stride), in.rows, width);
    } else {
        heads_in_.resize(static_cast<size_t>(in.rows) * width);
        for (int t = 0; t < in.rows; ++t) {
            for (int h = 0; h < n_heads; ++h) {
                std::memcpy(heads_in_.data() + t * width + h * cols, in.row(t) + h * in_head_stride,
                            sizeof(float) * cols);
            }
        }
        activations_.reset(heads_in_.data(), static_cast<size_t>(width), in.rows, width);
    }
    const ActivationRows& rows = activations_.get(act.type, &pool_);
    const size_t head_bytes = row_bytes(act, cols);
    head_rows_.resize(n_heads);
    matmul_jobs_.clear();
    for (int h = 0; h < n_heads; ++h) {
        head_rows_[h] = rows;
        head_rows_[h].cols = cols;
        head_rows_[h].data = rows.data + h * head_bytes;
        head_weights_[h] = w.expert(h);
        matmul_jobs_.push_back({&head_weights_[h], &head_rows_[h], out.data + h * out_head_stride,
                                static_cast<size_t>(out.stride)});
    }
    matmul_group(matmul_jobs_, pool_);
}

void CpuBackend::add_bias(Act x, const WeightVector& bias) {
    for (int t = 0; t < x.rows; ++t) add_into(x.row(t), bias.data, x.cols);
}

void CpuBackend::rope(int layer, Act x, int n_heads, int head_dim) {
    const Rope& r = ropes_[layer];
    for (int t = 0; t < x.rows; ++t) r.apply(x.row(t), n_heads, head_dim, places_[t].pos, rope_cache_[0].data());
}

void CpuBackend::store_kv(int layer, Act k, Act v) {
    KvCache& kv = *kv_[layer];
    for (int t = 0; t < k.rows; ++t) {
        const TokenPlace p = places_[t];
        kv.store_k(0, p.seq, p.pos, k.row(t));
        kv.store_v(0, p.seq, p.pos, v.row(t));
    }
}

void CpuBackend::attention(int layer, Act q, Act out, const WeightMatrix* reader) {
    (void)reader;  // each product converts its own input
    const LayerConfig& L = c_.layers[layer];
    const WeightVector& sinks = model_.weights().layers[layer].attn_sinks;
    Attention::Params params;
    params.n_head = L.n_head;
    params.scale = L.attn_scale;
    params.window = L.attention == AttentionKind::kSliding ? L.window : 0;
    params.sinks = sinks.empty() ? nullptr : sinks.data;
    if (q.stride != q.cols || out.stride != out.cols) fail("attention: rows must be packed");
    attention_.run(kv_cache(layer), 0, q.data, places_.data(), q.rows, params, out.data, pool_);
}

void CpuBackend::glu(GluKind kind, Act gate, Act up, Act out) {
    for (int t = 0; t < gate.rows; ++t)
        tandem::glu(kind, gate.row(t), up.row(t), gate.cols, out.row(t));
}

void CpuBackend::add(Act y, Act x) {
    for (int t = 0; t < y.rows; ++t) add_into(y.row(t), x.row(t), y.cols);
}

void CpuBackend::scale(Act x, float s) {
    for (int t = 0; t < x.rows; ++t) {
        float* p = x.row(t);
        for (int64_t i = 0; i < x.cols; ++i) p[i] *= s;
    }
}

void CpuBackend::mul(Act x, const WeightVector& w) {
    if (w.size != x.cols && w.size != 1) fail("mul: a vector of {} values for rows of {}", w.size, x.cols);
    for (int t = 0; t < x.rows; ++t) {
        float* p = x.row(t);
        if (w.size == 1) {
            for (int64_t i = 0; i < x.cols; ++i) p[i] *= w.data[0];
        } else {
            for (int64_t i = 0; i < x.cols; ++i) p[i] *= w.data[i];
        }
    }
}

void CpuBackend::softcap(Act x, float cap) {
    for (int t = 0; t < x.rows; ++t) tandem::softcap(x.row(t), x.cols, cap);
}

void CpuBackend::copy(Act src, Act dst) {
    for (int t = 0; t < src.rows; ++t) std::memmove(dst.row(t), src.row(t), sizeof(float) * src.cols);
}

void CpuBackend::sigmoid(Act x) {
    for (int t = 0; t < x.rows; ++t) {
        float* p = x.row(t);
        for (int64_t i = 0; i < x.cols; ++i) p[i] = 1.0f / (1.0f + std::exp(-p[i]));
    }
}

void CpuBackend::mul_sigmoid(Act x, Act gate) {
    if (gate.cols != x.cols && gate.cols != 1) fail("mul_sigmoid: a gate of {} columns for rows of {}", gate.cols, x.cols);
    for (int t = 0; t < x.rows; ++t) {
        float* p = x.row(t);
        const float* g = gate.row(t);
        if (gate.cols == 1) {
            const float s = 1.0f / (1.0f + std::exp(-g[0]));
            for (int64_t i = 0; i < x.cols; ++i) p[i] *= s;
        } else {
            for (int64_t i = 0; i < x.cols; ++i) p[i] *= 1.0f / (1.0f + std::exp(-g[i]));
        }
    }
}

void CpuBackend::l2_norm_heads(Act x, int head_dim, float eps) {
    for (int t = 0; t < x.rows; ++t) {
        for (int64_t h = 0; h < x.cols / head_dim; ++h) {
            float* p = x.row(t) + h * head_dim;
            double sum = 0.0;
            for (int i = 0; i < head_dim; ++i) sum += static_cast<double>(p[i] * p[i]);
            const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
            for (int i = 0; i < head_dim; ++i) p[i] *= scale;
        }
    }
}

void CpuBackend::ssm_decay(Act x, const WeightVector& bias, const WeightVector& a) {
    for (int t = 0; t < x.rows; ++t) {
        float* p = x.row(t);
        for (int64_t h = 0; h < x.cols; ++h) {
            const float y = p[h] + bias.data[h];
            const float softplus = y > 20.0f ? y : std::log(1.0f + std::exp(y));
            p[h] = softplus * a.data[h];
        }
    }
}

void CpuBackend::sequence_rows(const char* op, int layer, std::vector<int>& next_pos, float* state,
                               size_t state_size) {
    for (auto& rows : seq_rows_) rows.clear();
    for (int t = 0; t < static_cast<int>(places_.size()); ++t) {
        const TokenPlace p = places_[t];
        std::vector<int>& rows = seq_rows_[p.seq];
        if (rows.empty() && p.pos == 0) {
            // A new sequence: its state starts at zero.
            std::fill(state + static_cast<size_t>(p.seq) * state_size,
                      state + static_cast<size_t>(p.seq + 1) * state_size, 0.0f);
            next_pos[p.seq] = 0;
        }
        if (p.pos != next_pos[p.seq]) {
            fail("{}: layer {}: sequence {} continues at position {} but its recurrent state is at {} (a recurrent "
                 "state cannot be rewound)",
                 op, layer, p.seq, p.pos, next_pos[p.seq]);
        }
        ++next_pos[p.seq];
        rows.push_back(t);
    }
}

void CpuBackend::short_conv(int layer, Act x, Act out) {
    RecurrentState& r = recurrent_[layer];
    const int K = c_.delta.conv_kernel;
    const int64_t C = x.cols;
    const size_t state_size = static_cast<size_t>(K - 1) * C;
    sequence_rows("short_conv", layer, r.conv_pos, r.conv.data(), state_size);
    const float* w = model_.weights().layers[layer].ssm_conv.data;  // [C × K]
    // The channels are independent: the threads take ranges of them through every token.
    pool_.parallel_for(C, 256, [&](int64_t c0, int64_t c1, int) {
        const size_t run = sizeof(float) * static_cast<size_t>(c1 - c0);
        for (int s = 0; s < n_seq_; ++s) {
            // K-1 rows of C, oldest first
            float* state = r.conv.data() + static_cast<size_t>(s) * state_size;
            for (int t : seq_rows_[s]) {
                const float* u = x.row(t);
                float* y = out.row(t);
                for (int64_t c = c0; c < c1; ++c) {
                    float sum = 0.0f;
                    for (int i = 0; i < K - 1; ++i)
                        sum += state[static_cast<size_t>(i) * C + c] * w[c * K + i];
                    sum += u[c] * w[c * K + K - 1];
                    y[c] = sum / (1.0f + std::exp(-sum));
                }
                // The range's columns of the rows move up one, the token's values last.
                for (int i = 0; i + 1 < K - 1; ++i)
                    std::memcpy(state + static_cast<size_t>(i) * C + c0,
                                state + static_cast<size_t>(i + 1) * C + c0, run);
                if (K > 1) std::memcpy(state + static_cast<size_t>(K - 2) * C + c0, u + c0, run);
            }
        }
    });
}

void CpuBackend::delta_net(int layer, Act q, Act k, Act v, Act g, Act beta, Act out) {
    RecurrentState& r = recurrent_[layer];
    const ModelConfig::DeltaNet& d = c_.delta;
    const int S = d.head_dim, Hv = d.n_v_heads, Hk = d.n_k_heads;
    const size_t head_state = static_cast<size_t>(S) * S;
    const size_t state_size = head_state * Hv;
    sequence_rows("delta_net", layer, r.ssm_pos, r.ssm.data(), state_size);
    const float scale = 1.0f / std::sqrt(static_cast<float>(S));
    // A token's step of a head is the kernel variant's (kernel_table.h): its vectors for the
    // passes over the state, its f32 dot tiles for the state's rows times k and q.
    const DeltaRuleStepFn step = kernels().delta_rule_step;
    // One item per (sequence, value head), each through its sequence's tokens in order
    // (ggml_compute_forward_gated_delta_net).
    pool_.parallel_for(static_cast<int64_t>(n_seq_) * Hv, 1, [&](int64_t i0, int64_t i1, int worker) {
        float* delta = delta_scratch_.data() + static_cast<size_t>(worker) * S;
        for (int64_t item = i0; item < i1; ++item) {
            const int s = static_cast<int>(item / Hv), h = static_cast<int>(item % Hv), hk = h % Hk;
            if (seq_rows_[s].empty()) continue;
            float* M = r.ssm.data() + s * state_size + h * head_state;  // M[j·S + i] = S[i][j]
            for (int t : seq_rows_[s]) {
                step(M, S, q.row(t) + static_cast<int64_t>(hk) * S,
                     k.row(t) + static_cast<int64_t>(hk) * S,
                     v.row(t) + static_cast<int64_t>(h) * S, std::exp(g.row(t)[h]), beta.row(t)[h],
                     scale, out.row(t) + static_cast<int64_t>(h) * S, delta);
            }
        }
    });
}

void CpuBackend::moe(int layer, Act logits, Act in, Act out) {
    const int n = in.rows;
    if (moe_index_.empty() || moe_index_[layer] < 0) fail("moe: layer {} has no experts", layer);
    const WeightVector& bias = model_.weights().layers[layer].expert_bias;
    for (int t = 0; t < n; ++t) {
        float* scores = scores_.data() + static_cast<size_t>(t) * c_.n_expert;
        std::memcpy(scores, logits.row(t), sizeof(float) * c_.n_expert);
        route_experts(routing_, scores, routes_.data() + t * c_.n_expert_used, bias.empty() ? nullptr : bias.data);
    }
    if (in.stride != in.cols) fail("moe: rows must be packed");
    moe_->submit(moe_index_[layer], in.data, n, routes_.data());
    const float* result = moe_->wait();
    for (int t = 0; t < n; ++t)
        std::memcpy(out.row(t), result + t * in.cols, sizeof(float) * in.cols);
}

void CpuBackend::gather_logit_rows(Act x, Act out) {
    for (size_t i = 0; i < logit_rows_.size(); ++i) {
        std::memmove(out.row(static_cast<int>(i)), x.row(logit_rows_[i]), sizeof(float) * x.cols);
    }
}

void CpuBackend::check_sequence(const char* op, int seq, int n_positions) const {
    if (seq < 0 || seq >= n_seq_)
        fail("{}: sequence {} outside the cache's {} sequences", op, seq, n_seq_);
    if (n_positions < 0 || n_positions > n_ctx_)
        fail("{}: {} positions outside the context of {}", op, n_positions, n_ctx_);
}

// Every cache a layer owns holds the sequence's first positions in its first slots; a ring
// shorter than them holds its latest ones in all its slots, so it is copied whole.
size_t CpuBackend::sequence_state_bytes(int n_positions) const {
    size_t n = 0;
    for (const auto& kv : kv_) {
        if (kv) n += kv->sequence_bytes(std::min(n_positions, kv->shape().n_ctx));
    }
    for (const RecurrentState& r : recurrent_)
        n += (r.conv.size() + r.ssm.size()) / n_seq_ * sizeof(float);
    return n;
}

void CpuBackend::save_sequence(int seq, int n_positions, uint8_t* out) {
    check_sequence("save_sequence", seq, n_positions);
    for (int il = 0; il < c_.n_layer; ++il) {
        if (const RecurrentState& r = recurrent_[il]; !r.conv_pos.empty()) {
            // A recurrent state stands at one position: it can only be saved there.
            if (r.conv_pos[seq] != n_positions || r.ssm_pos[seq] != n_positions) {
                fail(
                    "save_sequence: layer {}: sequence {}'s recurrent state is at position {}, not "
                    "{}",
                    il, seq, r.conv_pos[seq], n_positions);
            }
            const size_t conv = r.conv.size() / n_seq_, ssm = r.ssm.size() / n_seq_;
            std::memcpy(out, r.conv.data() + seq * conv, conv * sizeof(float));
            out += conv * sizeof(float);
            std::memcpy(out, r.ssm.data() + seq * ssm, ssm * sizeof(float));
            out += ssm * sizeof(float);
        }
        if (const KvCache* kv = kv_[il].get()) {
            const int slots = std::min(n_positions, kv->shape().n_ctx);
            kv->save_sequence(seq, slots, out);
            out += kv->sequence_bytes(slots);
        }
    }
}

void CpuBackend::load_sequence(int seq, int n_positions, const uint8_t* in) {
    check_sequence("load_sequence", seq, n_positions);
    for (int il = 0; il < c_.n_layer; ++il) {
        if (RecurrentState& r = recurrent_[il]; !r.conv_pos.empty()) {
            const size_t conv = r.conv.size() / n_seq_, ssm = r.ssm.size() / n_seq_;
            std::memcpy(r.conv.data() + seq * conv, in, conv * sizeof(float));
            in += conv * sizeof(float);
            std::memcpy(r.ssm.data() + seq * ssm, in, ssm * sizeof(float));
            in += ssm * sizeof(float);
            r.conv_pos[seq] = r.ssm_pos[seq] = n_positions;
        }
        if (KvCache* kv = kv_[il].get()) {
            const int slots = std::min(n_positions, kv->shape().n_ctx);
            kv->load_sequence(seq, slots, in);
            in += kv->sequence_bytes(slots);
        }
    }
}

}  // namespace tandem
