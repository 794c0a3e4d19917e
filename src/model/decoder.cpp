// The forward pass of the decoder architectures.
#include "model/decoder.h"

#include "base/error.h"

namespace tandem {

Decoder::Decoder(const Model& model, Ops& ops, int max_batch)
    : model_(model), c_(model.config()), ops_(ops), max_batch_(max_batch) {
    const size_t T = static_cast<size_t>(max_batch);
    x_.resize(T * c_.n_embd);
    h_.resize(T * c_.n_embd);
    q_.resize(T * c_.n_head * c_.head_dim_k);
    k_.resize(T * c_.n_head_kv * c_.head_dim_k);
    v_.resize(T * c_.n_head_kv * c_.head_dim_v);
    attn_.resize(T * c_.n_head * c_.head_dim_v);
    o_.resize(T * c_.n_embd);
    if (!c_.is_moe()) {
        gate_.resize(T * c_.n_ff);
        up_.resize(T * c_.n_ff);
    }
    out_x_.resize(T * c_.n_embd);
}

Act Decoder::buffer(std::vector<float>& storage, int rows, int64_t cols) {
    return {storage.data(), rows, cols, cols};
}

int Decoder::eval(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                  std::span<const uint8_t> want_logits, float* logits) {
    const int n = static_cast<int>(tokens.size());
    if (n <= 0 || n > max_batch_) fail("batch of {} tokens (1..{} allowed)", n, max_batch_);
    if (places.size() != tokens.size() || want_logits.size() != tokens.size()) {
        fail("batch: tokens, places and logit flags differ in length");
    }
    for (int t = 0; t < n; ++t) {
        if (tokens[t] < 0 || tokens[t] >= c_.n_vocab) fail("token id {} outside the vocabulary (0..{})", tokens[t], c_.n_vocab - 1);
    }
    const ModelWeights& w = model_.weights();
    places_ = places.data();

    ops_.embed(w.token_embd, tokens.data(), buffer(x_, n, c_.n_embd));
    for (int il = 0; il < c_.n_layer; ++il) layer(il, n);

    // Final norm and output head, only for the rows that want logits.
    std::vector<int> rows;
    for (int t = 0; t < n; ++t) {
        if (want_logits[t]) rows.push_back(t);
    }
    if (rows.empty()) return 0;
    const int m = static_cast<int>(rows.size());
    Act out_x = buffer(out_x_, m, c_.n_embd);
    ops_.gather_rows(buffer(x_, n, c_.n_embd), rows, out_x);
    ops_.rms_norm(out_x, w.output_norm, c_.rms_eps, out_x);
    ops_.matmul(out_x, {{&w.output, Act{logits, m, c_.n_vocab, c_.n_vocab}}});
    return m;
}

void Decoder::layer(int il, int n) {
    const LayerWeights& L = model_.weights().layers[il];
    const int dk = c_.head_dim_k, dv = c_.head_dim_v;
    Act x = buffer(x_, n, c_.n_embd);
    Act h = buffer(h_, n, c_.n_embd);
    Act q = buffer(q_, n, int64_t{c_.n_head} * dk);
    Act k = buffer(k_, n, int64_t{c_.n_head_kv} * dk);
    Act v = buffer(v_, n, int64_t{c_.n_head_kv} * dv);
    Act attn = buffer(attn_, n, int64_t{c_.n_head} * dv);
    Act o = buffer(o_, n, c_.n_embd);

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
    ops_.rope(q, c_.n_head, dk, places_);
    ops_.rope(k, c_.n_head_kv, dk, places_);
    ops_.store_kv(il, k, v, places_);
    ops_.attention(il, q, places_, attn);
    ops_.matmul(attn, {{&L.wo, o}});
    if (!L.bo.empty()) ops_.add_bias(o, L.bo);
    ops_.add(x, o);

    // FFN block: routed experts or a dense SiLU-gated FFN.
    ops_.rms_norm(x, L.ffn_norm, c_.rms_eps, h);
    if (c_.is_moe()) {
        ops_.moe(il, h, o);
    } else {
        Act gate = buffer(gate_, n, c_.n_ff);
        Act up = buffer(up_, n, c_.n_ff);
        ops_.matmul(h, {{&L.ffn_gate, gate}, {&L.ffn_up, up}});
        ops_.glu(c_.activation, gate, up, gate);
        ops_.matmul(gate, {{&L.ffn_down, o}});
    }
    ops_.add(x, o);
}

}  // namespace tandem
