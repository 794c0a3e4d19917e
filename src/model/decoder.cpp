// The forward pass of the decoder architectures (facts from llama.cpp's src/models/*.cpp).
#include "model/decoder.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tandem {
namespace {

// The first n rows and `cols` columns of a buffer, packed (a layer narrower than the widest).
Act packed(Act buffer, int n, int64_t cols) { return {buffer.data, n, cols, cols}; }

}  // namespace

Decoder::Decoder(const Model& model, Ops& ops, int max_batch)
    : c_(model.config()), ops_(ops), w_(ops.weights()), max_batch_(max_batch) {
    const int T = max_batch;
    int64_t q = 0, k = 0, v = 0, attn = 0;
    bool dense = false, beside = false;
    for (const LayerConfig& L : c_.layers) {
        q = std::max(q, L.q_width());
        k = std::max(k, L.k_width());
        v = std::max(v, L.v_width());
        attn = std::max(attn, L.attn_width());
        dense = dense || L.dense_ffn || L.n_ff_shexp > 0;
        beside = beside || (L.moe && (L.dense_ffn || L.n_ff_shexp > 0));
    }
    x_ = ops.allocate(T, c_.n_embd);
    h_ = ops.allocate(T, c_.n_embd);
    q_ = ops.allocate(T, q);
    k_ = ops.allocate(T, k);
    v_ = ops.allocate(T, v);
    attn_ = ops.allocate(T, attn);
    o_ = ops.allocate(T, c_.n_embd);
    if (dense) {
        gate_ = ops.allocate(T, c_.n_ff);
        up_ = ops.allocate(T, c_.n_ff);
    }
    if (c_.is_moe()) {
        router_ = ops.allocate(T, c_.n_expert);
        if (c_.router_input == RouterInput::kScaledRmsNorm) r_ = ops.allocate(T, c_.n_embd);
        if (beside) e_ = ops.allocate(T, c_.n_embd);
    }
    if (c_.attn_output_gate) {
        qg_ = ops.allocate(T, 2 * q);
        ag_ = ops.allocate(T, q);
    }
    if (c_.shared_expert_gate) sg_ = ops.allocate(T, 1);
    bool recurrent = false;
    for (const LayerConfig& L : c_.layers) recurrent = recurrent || L.attention == AttentionKind::kRecurrent;
    if (recurrent) {
        const ModelConfig::DeltaNet& d = c_.delta;
        mixed_ = ops.allocate(T, d.conv_width());
        conv_ = ops.allocate(T, d.conv_width());
        z_ = ops.allocate(T, d.value_width());
        beta_ = ops.allocate(T, d.n_v_heads);
        decay_ = ops.allocate(T, d.n_v_heads);
        dn_ = ops.allocate(T, d.value_width());
    }
    if (c_.mla.kv_lora_rank > 0) {
        const ModelConfig::Latent& m = c_.mla;
        qa_ = ops.allocate(T, int64_t{c_.n_head} * (m.qk_nope + m.qk_rope));
        if (m.q_lora_rank > 0) ql_ = ops.allocate(T, m.q_lora_rank);
        av_ = ops.allocate(T, int64_t{c_.n_head} * m.v_head);
    }
    if (c_.n_embd_per_layer > 0) {
        const int64_t P = c_.n_embd_per_layer;
        pl_ = ops.allocate(T, P * c_.n_layer);
        pl_proj_ = ops.allocate(T, P * c_.n_layer);
        pl_gate_ = ops.allocate(T, P);
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
    residual_ = {};
    Act x = x_.first_rows(n);
    ops_.embed(w_.token_embd, x);
    if (c_.embed_scale != 1.0f) ops_.scale(x, c_.embed_scale);
    if (c_.n_embd_per_layer > 0) per_layer_inputs(n);
    for (int il = 0; il < c_.n_layer; ++il) layer(il, n);
    add_residual();
    if (m == 0) return;
    // Final norm and output head, only for the rows that want logits.
    Act out_x = out_x_.first_rows(m);
    Act logits = logits_.first_rows(m);
    ops_.gather_logit_rows(x, out_x);
    ops_.rms_norm(out_x, w_.output_norm, c_.rms_eps, out_x);
    ops_.matmul(out_x, {{&w_.output, logits}});
    if (c_.final_logit_softcap > 0.0f) ops_.softcap(logits, c_.final_logit_softcap);
}

void Decoder::per_layer_inputs(int n) {
    // Gemma: each layer's input is (its token embedding · √n_pl + the rms-normed projection of
    // the scaled embedding / √n_embd) / √2 (gemma4.cpp, project_per_layer_inputs).
    const int P = c_.n_embd_per_layer;
    Act pl = pl_.first_rows(n);
    Act proj = pl_proj_.first_rows(n);
    ops_.embed(w_.pl_token_embd, pl);
    ops_.scale(pl, std::sqrt(static_cast<float>(P)));
    ops_.matmul(x_.first_rows(n), {{&w_.pl_model_proj, proj}});
    ops_.scale(proj, 1.0f / std::sqrt(static_cast<float>(c_.n_embd)));
    ops_.rms_norm_heads(proj, P, w_.pl_proj_norm, c_.rms_eps);
    ops_.add(pl, proj);
    ops_.scale(pl, 1.0f / std::sqrt(2.0f));
}

void Decoder::layer(int il, int n) {
    const LayerWeights& L = w_.layers[il];
    const bool sandwich = c_.norm_placement == NormPlacement::kSandwich;
    Act x = x_.first_rows(n);
    Act o = o_.first_rows(n);

    // Attention block: x += [post_norm](attention(norm(x))).
    if (c_.layers[il].attention == AttentionKind::kRecurrent) {
        delta_net(il, n);
    } else if (c_.mla.kv_lora_rank > 0) {
        latent_attention(il, n);
    } else {
        attention(il, n);
    }
    if (sandwich) ops_.rms_norm(o, L.attn_post_norm, c_.rms_eps, o);
    residual_ = o;

    // FFN block: x += [post_norm](ffn(x)).
    ffn(il, n);
    if (sandwich) ops_.rms_norm(o, L.ffn_post_norm, c_.rms_eps, o);
    residual_ = o;

    // Gemma's per-layer input: x += post_norm(proj(gelu(gate(x)) · input of this layer)).
    if (c_.n_embd_per_layer > 0 || !L.out_scale.empty()) add_residual();
    if (c_.n_embd_per_layer > 0) {
        const int64_t P = c_.n_embd_per_layer;
        Act g = pl_gate_.first_rows(n);
        Act input{pl_.data + il * P, n, P, pl_.stride};
        ops_.matmul(x, {{&L.pl_gate, g}});
        ops_.glu(GluKind::kGelu, g, input, g);
        ops_.matmul(g, {{&L.pl_proj, o}});
        ops_.rms_norm(o, L.pl_post_norm, c_.rms_eps, o);
        ops_.add(x, o);
    }
    if (!L.out_scale.empty()) ops_.mul(x, L.out_scale);
}

void Decoder::add_residual() {
    if (residual_.data == nullptr) return;
    ops_.add(x_.first_rows(residual_.rows), residual_);
    residual_ = {};
}

void Decoder::norm_input(const WeightVector& w, Act out, const WeightMatrix* reader) {
    ops_.residual_norm(x_.first_rows(out.rows), residual_, w, c_.rms_eps, out, reader);
    residual_ = {};
}

void Decoder::attention(int il, int n) {
    const LayerConfig& lc = c_.layers[il];
    const LayerWeights& L = w_.layers[il];
    const int dk = lc.head_dim_k, dv = lc.head_dim_v;
    Act h = h_.first_rows(n);
    Act q = packed(q_, n, lc.q_width());
    Act k = packed(k_, n, lc.k_width());
    Act v = packed(v_, n, lc.v_width());
    Act attn = packed(attn_, n, lc.attn_width());
    // A layer that shares an earlier layer's KV cache computes only its queries.
    const bool own_kv = lc.kv_layer == il;

    norm_input(L.attn_norm, h, &L.wq);
    // With an output gate (qwen3.5), each head's query is followed by its gate in wq's rows.
    Act qg = c_.attn_output_gate ? packed(qg_, n, 2 * lc.q_width()) : q;
    if (!own_kv) {
        ops_.matmul(h, {{&L.wq, qg}});
    } else if (L.wv.empty()) {
        ops_.matmul(h, {{&L.wq, qg}, {&L.wk, k}});
        ops_.copy(k, v);  // Gemma-4 without attn_v: the values are the keys, before their norm
    } else {
        ops_.matmul(h, {{&L.wq, qg}, {&L.wk, k}, {&L.wv, v}});
    }
    Act gate;
    if (c_.attn_output_gate) {
        gate = packed(ag_, n, lc.q_width());
        ops_.copy(Act{qg.data, n * lc.n_head, dk, 2 * dk}, Act{q.data, n * lc.n_head, dk, dk});
        ops_.copy(Act{qg.data + dk, n * lc.n_head, dk, 2 * dk}, Act{gate.data, n * lc.n_head, dk, dk});
    }
    if (!L.bq.empty()) ops_.add_bias(q, L.bq);
    if (c_.qk_norm && own_kv && L.bk.empty() && L.bv.empty() && !c_.v_norm) {
        // Nothing between the norms, the rotations and the store: one step (one GPU kernel).
        ops_.norm_rope_store(il, q, lc.n_head, k, lc.n_head_kv, v, dk, L.q_norm, L.k_norm,
                             c_.rms_eps);
    } else {
        if (c_.qk_norm) {
            ops_.norm_rope_heads(il, q, lc.n_head, dk, L.q_norm, c_.rms_eps);
        } else {
            ops_.rope(il, q, lc.n_head, dk);
        }
        if (own_kv) {
            if (!L.bk.empty()) ops_.add_bias(k, L.bk);
            if (!L.bv.empty()) ops_.add_bias(v, L.bv);
            if (c_.v_norm) ops_.rms_norm_heads(v, dv, {}, c_.rms_eps);
            if (c_.qk_norm) {
                ops_.norm_rope_heads(il, k, lc.n_head_kv, dk, L.k_norm, c_.rms_eps);
            } else {
                ops_.rope(il, k, lc.n_head_kv, dk);
            }
            ops_.store_kv(il, k, v);
        }
    }
    ops_.attention(il, q, attn, c_.attn_output_gate ? nullptr : &L.wo);
    if (c_.attn_output_gate) ops_.mul_sigmoid(attn, gate);
    Act o = o_.first_rows(n);
    ops_.matmul(attn, {{&L.wo, o}});
    if (!L.bo.empty()) ops_.add_bias(o, L.bo);
}

void Decoder::delta_net(int il, int n) {
    // qwen3.5's linear attention (qwen35moe.cpp, build_layer_attn_linear): q, k and v through a
    // short causal convolution and SiLU, q and k L2-normed per head, the gated delta rule over
    // the sequence's state, then an RMS norm per head gated by SiLU(z), and the output
    // projection.
    const ModelConfig::DeltaNet& d = c_.delta;
    const LayerWeights& L = w_.layers[il];
    const int64_t C = d.conv_width(), Kw = d.key_width();
    Act h = h_.first_rows(n);
    Act mixed = mixed_.first_rows(n);
    Act conv = conv_.first_rows(n);
    Act z = z_.first_rows(n);
    Act beta = beta_.first_rows(n);
    Act decay = decay_.first_rows(n);
    Act out = dn_.first_rows(n);
    norm_input(L.attn_norm, h, &L.wqkv);
    ops_.matmul(h, {{&L.wqkv, mixed}, {&L.wqkv_gate, z}, {&L.ssm_beta, beta}, {&L.ssm_alpha, decay}});
    ops_.sigmoid(beta);
    ops_.ssm_decay(decay, L.ssm_dt, L.ssm_a);
    ops_.short_conv(il, mixed, conv);
    Act q{conv.data, n, Kw, C}, k{conv.data + Kw, n, Kw, C}, v{conv.data + 2 * Kw, n, d.value_width(), C};
    ops_.l2_norm_heads(q, d.head_dim, c_.rms_eps);
    ops_.l2_norm_heads(k, d.head_dim, c_.rms_eps);
    ops_.delta_net(il, q, k, v, decay, beta, out);
    ops_.rms_norm_heads(out, d.head_dim, L.ssm_norm, c_.rms_eps);
    ops_.glu(GluKind::kSilu, z, out, out);
    ops_.matmul(out, {{&L.ssm_out, o_.first_rows(n)}});
}

void Decoder::latent_attention(int il, int n) {
    // DeepSeek's MLA with the key's up-projection absorbed into the queries (deepseek2.cpp): each
    // head's query is [W_kb·q_nope (Lkv) | rope(q_pe) (R)], the one KV head's key is
    // [norm(latent) (Lkv) | rope(k_pe) (R)] and its value the latent; the heads' outputs go
    // through W_vb to Dv values each, then the output projection.
    const ModelConfig::Latent& m = c_.mla;
    const LayerConfig& lc = c_.layers[il];
    const LayerWeights& L = w_.layers[il];
    const int H = lc.n_head, qk = m.qk_nope + m.qk_rope, kd = m.kv_lora_rank + m.qk_rope;
    Act h = h_.first_rows(n);
    Act qa = packed(qa_, n, int64_t{H} * qk);
    Act kv = packed(k_, n, kd);
    Act q = packed(q_, n, int64_t{H} * kd);
    Act attn = packed(attn_, n, int64_t{H} * m.kv_lora_rank);
    Act av = packed(av_, n, int64_t{H} * m.v_head);

    norm_input(L.attn_norm, h, m.q_lora_rank > 0 ? &L.wq_a : &L.wq);
    if (m.q_lora_rank > 0) {
        Act ql = packed(ql_, n, m.q_lora_rank);
        ops_.matmul(h, {{&L.wq_a, ql}, {&L.wkv_a, kv}});
        ops_.rms_norm(ql, L.q_a_norm, c_.rms_eps, ql);
        ops_.matmul(ql, {{&L.wq_b, qa}});
    } else {
        ops_.matmul(h, {{&L.wq, qa}, {&L.wkv_a, kv}});
    }
    // Queries: the absorbed unrotated part, then the rotated part copied behind it and rotated.
    ops_.matmul_heads(L.wk_b, H, qa, qk, q, kd);
    const int R = m.qk_rope, Lkv = m.kv_lora_rank;
    ops_.copy(Act{qa.data + m.qk_nope, n * H, R, qk}, Act{q.data + Lkv, n * H, R, kd});
    ops_.rope(il, Act{q.data + Lkv, n, q.cols - Lkv, q.stride}, H, kd);
    // The key: the normed latent and the rotated key; the value is the latent.
    Act latent{kv.data, n, Lkv, kv.stride};
    ops_.rms_norm(latent, L.kv_a_norm, c_.rms_eps, latent);
    ops_.rope(il, Act{kv.data + Lkv, n, R, kv.stride}, 1, kd);
    ops_.store_kv(il, kv, latent);
    ops_.attention(il, q, attn, nullptr);
    ops_.matmul_heads(L.wv_b, H, attn, Lkv, av, m.v_head);
    ops_.matmul(av, {{&L.wo, o_.first_rows(n)}});
}

void Decoder::ffn(int il, int n) {
    const LayerConfig& lc = c_.layers[il];
    const LayerWeights& L = w_.layers[il];
    Act x = x_.first_rows(n);
    Act h = h_.first_rows(n);
    Act o = o_.first_rows(n);
    if (lc.moe && lc.dense_ffn) {
        // Gemma-4: a dense MLP and the routed experts side by side, each with its own norms.
        norm_input(L.ffn_norm, h, &L.ffn_gate);
        glu_ffn(L.ffn_gate, L.ffn_up, L.ffn_down, lc.n_ff, h, o);
        ops_.rms_norm(o, L.ffn_post_norm_1, c_.rms_eps, o);
        Act e = e_.first_rows(n);
        ops_.rms_norm(x, L.ffn_pre_norm_2, c_.rms_eps, h);
        experts(il, h, h, e);
        ops_.rms_norm(e, L.ffn_post_norm_2, c_.rms_eps, e);
        ops_.add(o, e);
        return;
    }
    norm_input(L.ffn_norm, h, lc.moe ? &L.experts.gate.matrix : &L.ffn_gate);
    if (!lc.moe) {
        glu_ffn(L.ffn_gate, L.ffn_up, L.ffn_down, lc.n_ff, h, o);
        return;
    }
    experts(il, h, h, o, lc.n_ff_shexp == 0 && ffn_output_feeds_next_norm(il));
    if (lc.n_ff_shexp > 0) {
        // Shared experts: a SiLU FFN beside the routed ones, added to their sum (qwen3.5: gated
        // by σ(gate_inp_shexp · h)).
        Act e = e_.first_rows(n);
        glu_ffn(L.shexp_gate, L.shexp_up, L.shexp_down, lc.n_ff_shexp, h, e);
        if (c_.shared_expert_gate) {
            Act sg = sg_.first_rows(n);
            ops_.matmul(h, {{&L.shexp_gate_inp, sg}});
            ops_.mul_sigmoid(e, sg);
        }
        ops_.add(o, e);
    }
}

void Decoder::glu_ffn(const WeightMatrix& gate_w, const WeightMatrix& up_w, const WeightMatrix& down_w, int width,
                      Act in, Act out) {
    const int n = in.rows;
    Act gate = packed(gate_, n, width);
    Act up = packed(up_, n, width);
    ops_.matmul(in, {{&gate_w, gate}, {&up_w, up}});
    ops_.glu(c_.activation, gate, up, gate);
    ops_.matmul(gate, {{&down_w, out}});
}

bool Decoder::ffn_output_feeds_next_norm(int il) const {
    // layer() adds the FFN's output where the next layer's attention block opens with
    // norm_input(); only these steps come between.
    return il + 1 < c_.n_layer && c_.norm_placement != NormPlacement::kSandwich &&
           c_.n_embd_per_layer == 0 && w_.layers[il].out_scale.empty();
}

void Decoder::experts(int il, Act router_in, Act in, Act out, bool into_residual) {
    const LayerWeights& L = w_.layers[il];
    const int n = in.rows;
    Act logits = router_.first_rows(n);
    if (c_.router_input == RouterInput::kScaledRmsNorm) {
        // Gemma-4: the router reads rms_norm(residual) / √n_embd · its own scale.
        Act r = r_.first_rows(n);
        ops_.rms_norm(x_.first_rows(n), {}, c_.rms_eps, r);
        ops_.scale(r, 1.0f / std::sqrt(static_cast<float>(c_.n_embd)));
        ops_.mul(r, L.router_scale);
        router_in = r;
    }
    ops_.matmul(router_in, {{&L.router, logits}});
    if (!L.router_bias.empty()) ops_.add_bias(logits, L.router_bias);
    if (into_residual) {
        ops_.moe_into_residual(il, logits, in, out);
    } else {
        ops_.moe(il, logits, in, out);
    }
}

}  // namespace tandem
