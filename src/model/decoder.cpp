// The forward pass of the decoder architectures.
#include "model/decoder.h"

#include "base/error.h"

namespace tandem {

Decoder::Decoder(const Model& model, Ops& ops, int max_batch)
    : c_(model.config()), ops_(ops), w_(ops.weights()), max_batch_(max_batch) {
    const int T = max_batch;
    x_ = ops.allocate(T, c_.n_embd);
    h_ = ops.allocate(T, c_.n_embd);
    q_ = ops.allocate(T, int64_t{c_.n_head} * c_.head_dim_k);
    k_ = ops.allocate(T, int64_t{c_.n_head_kv} * c_.head_dim_k);
    v_ = ops.allocate(T, int64_t{c_.n_head_kv} * c_.head_dim_v);
    attn_ = ops.allocate(T, int64_t{c_.n_head} * c_.head_dim_v);
    o_ = ops.allocate(T, c_.n_embd);
    if (!c_.is_moe()) {
        gate_ = ops.allocate(T, c_.n_ff);
        up_ = ops.allocate(T, c_.n_ff);
    }
    out_x_ = ops.allocate(T, c_.n_embd);
    logits_ = ops.allocate(T, c_.n_vocab);
    logit_rows_.reserve(T);
}

int Decoder::eval(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                  std::span<const uint8_t> want_logits, float* logits) {
    const int m = run_batch(tokens, places, want_logits);
    if (m > 0) ops_.read(logits_.first_rows(m), logits);
    return m;
}

int Decoder::eval_argmax(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                         std::span<const uint8_t> want_logits, int32_t* ids) {
    const int m = run_batch(tokens, places, want_logits);
    if (m > 0) ops_.argmax(logits_.first_rows(m), ids);
    return m;
}

int Decoder::run_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                       std::span<const uint8_t> want_logits) {
    const int n = static_cast<int>(tokens.size());
    if (n <= 0 || n > max_batch_) fail("batch of {} tokens (1..{} allowed)", n, max_batch_);
    if (places.size() != tokens.size() || want_logits.size() != tokens.size()) {
        fail("batch: tokens, places and logit flags differ in length");
    }
    for (int t = 0; t < n; ++t) {
        if (tokens[t] < 0 || tokens[t] >= c_.n_vocab)
            fail("token id {} outside the vocabulary (0..{})", tokens[t], c_.n_vocab - 1);
    }
    logit_rows_.clear();
    for (int t = 0; t < n; ++t) {
        if (want_logits[t]) logit_rows_.push_back(t);
    }
    const int m = static_cast<int>(logit_rows_.size());
    ops_.set_batch(tokens, places, logit_rows_);
    // Passes of the same size issue the same operations (the places live in the backend).
    const uint64_t key = (static_cast<uint64_t>(n) << 32) | static_cast<uint32_t>(m);
    ops_.run(key, [&] { forward(n, m); });
    return m;
}

void Decoder::forward(int n, int m) {
    ops_.embed(w_.token_embd, x_.first_rows(n));
    for (int il = 0; il < c_.n_layer; ++il) layer(il, n);
    if (m == 0) return;
    // Final norm and output head, only for the rows that want logits.
    Act out_x = out_x_.first_rows(m);
    ops_.gather_logit_rows(x_.first_rows(n), out_x);
    ops_.rms_norm(out_x, w_.output_norm, c_.rms_eps, out_x);
    ops_.matmul(out_x, {{&w_.output, logits_.first_rows(m)}});
}

void Decoder::layer(int il, int n) {
    const LayerWeights& L = w_.layers[il];
    const int dk = c_.head_dim_k;
    Act x = x_.first_rows(n);
    Act h = h_.first_rows(n);
    Act q = q_.first_rows(n);
    Act k = k_.first_rows(n);
    Act v = v_.first_rows(n);
    Act attn = attn_.first_rows(n);
    Act o = o_.first_rows(n);

    // Attention block.
    ops_.rms_norm(x, L.attn_norm, c_.rms_eps, h);
    ops_.matmul(h, {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}});
    if (!L.bq.empty()) ops_.add_bias(q, L.bq);
    if (!L.bk.empty()) ops_.add_bias(k, L.bk);
    if (!L.bv.empty()) ops_.add_bias(v, L.bv);
    if (c_.qk_norm) {
        ops_.rms_norm_heads(q, dk, L.q_norm, c_.rms_eps);
        ops_.rms_norm_heads(k, dk, L.k_norm, c_.rms_eps);
    }
    ops_.rope(q, c_.n_head, dk);
    ops_.rope(k, c_.n_head_kv, dk);
    ops_.store_kv(il, k, v);
    ops_.attention(il, q, attn);
    ops_.matmul(attn, {{&L.wo, o}});
    if (!L.bo.empty()) ops_.add_bias(o, L.bo);
    ops_.add(x, o);

    // FFN block: routed experts or a dense SiLU-gated FFN.
    ops_.rms_norm(x, L.ffn_norm, c_.rms_eps, h);
    if (c_.is_moe()) {
        ops_.moe(il, h, o);
    } else {
        Act gate = gate_.first_rows(n);
        Act up = up_.first_rows(n);
        ops_.matmul(h, {{&L.ffn_gate, gate}, {&L.ffn_up, up}});
        ops_.glu(c_.activation, gate, up, gate);
        ops_.matmul(gate, {{&L.ffn_down, o}});
    }
    ops_.add(x, o);
}

}  // namespace tandem
