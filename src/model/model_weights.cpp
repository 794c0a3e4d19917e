// Binds the weights of a decoder model to the tensors of its GGUF file.
#include "model/model_weights.h"

#include <set>

#include "base/error.h"
#include "base/log.h"
#include "gguf/gguf_reader.h"
#include "model/architectures.h"
#include "model/scale_tensors.h"
#include "model/tensor_names.h"

namespace tandem {
namespace {

namespace tn = tensor_names;

std::string shape_text(const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

// Looks tensors up by name, checks their shapes and types, and remembers which were used.
class Binder {
public:
    Binder(const GgufFile& file, ModelWeights& weights) : f_(file), w_(weights) {}

    const GgufTensor* find(const std::string& name, const std::vector<int64_t>& shape, bool required) {
        const GgufTensor* t = f_.find_tensor(name);
        if (t == nullptr) {
            if (required) fail("{}: missing tensor '{}' (expected shape {})", f_.path(), name, shape_text(shape));
            return nullptr;
        }
        bool ok = t->n_dims <= static_cast<int>(shape.size());
        for (size_t d = 0; ok && d < 4; ++d) ok = t->ne[d] == (d < shape.size() ? shape[d] : 1);
        if (!ok) fail("{}: tensor '{}' has shape {}, expected {}", f_.path(), name, t->shape_string(), shape_text(shape));
        if (t->format->kind != FormatKind::kFloat && t->format->kind != FormatKind::kQuantized) {
            fail("{}: tensor '{}' has type {}, which cannot hold weights", f_.path(), name, t->format->name);
        }
        used_.insert(std::string(t->name));
        return t;
    }

    // A [cols → rows] matrix, with its NVFP4 `.scale` when present (unless `.scale` is a
    // parameter of its own, as Gemma-4's router scale).
    WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows, bool required = true,
                        bool second_level_scale = true) {
        WeightMatrix m;
        const GgufTensor* t = find(name, {cols, rows}, required);
        if (t == nullptr) return m;
        m.format = t->format;
        m.data = t->data;
        m.cols = cols;
        m.rows = rows;
        m.row_bytes = t->row_bytes();
        if (second_level_scale) {
            std::vector<float> s = scale_values(name, 1);
            if (!s.empty()) m.scale = s[0];
        }
        return m;
    }

    // A [rows × cols] tensor of small values, copied to f32 (row-major).
    WeightVector vector_2d(const std::string& name, int64_t cols, int64_t rows) {
        const GgufTensor* t = find(name, {cols, rows}, true);
        return {keep(to_f32(*t)), cols * rows};
    }

    // A small vector, copied to f32 from any float or quantized type.
    WeightVector vector(const std::string& name, int64_t n, bool required = true) {
        const GgufTensor* t = find(name, {n}, required);
        if (t == nullptr) return {};
        return {keep(to_f32(*t)), n};
    }

    // A stacked expert tensor {cols, rows, n_expert} plus its optional per-expert scales and
    // biases (`.bias` of shape {rows, n_expert}).
    ExpertMatrix experts(const std::string& name, int64_t cols, int64_t rows, int n_expert, bool required = true) {
        ExpertMatrix e;
        const GgufTensor* t = find(name, {cols, rows, n_expert}, required);
        if (t == nullptr) return e;
        e.matrix = {t->format, t->data, cols, rows, t->row_bytes(), 1.0f};
        e.expert_stride = t->row_bytes() * static_cast<size_t>(rows);
        std::vector<float> s = scale_values(name, n_expert);
        if (!s.empty()) e.scales = keep(std::move(s));
        const std::string bias_name = name.substr(0, name.size() - 7) + ".bias";
        std::vector<float> b = find(bias_name, {rows, n_expert}, false) ? to_f32(*f_.find_tensor(bias_name))
                                                                        : std::vector<float>();
        if (!b.empty()) {
            e.bias = keep(std::move(b));
            e.bias_stride = rows;
        }
        return e;
    }

    // Tensors whose names start with `prefix` are known and not run (nextn draft layers).
    void skip(std::string prefix) { skipped_.push_back(std::move(prefix)); }

    // Tensors the model did not use (other than scales, checked elsewhere).
    std::vector<std::string> unused() const {
        std::vector<std::string> out;
        for (const GgufTensor& t : f_.tensors()) {
            std::string name(t.name);
            if (used_.count(name) != 0) continue;
            bool skipped = false;
            for (const std::string& p : skipped_) skipped = skipped || name.starts_with(p);
            if (skipped) continue;
            if (name.ends_with(".scale") || name.ends_with(".input_scale")) continue;
            out.push_back(name);
        }
        return out;
    }

private:
    std::vector<float> scale_values(const std::string& weight_name, int64_t n) {
        if (!weight_name.ends_with(".weight")) return {};
        const std::string name = weight_name.substr(0, weight_name.size() - 7) + ".scale";
        const GgufTensor* t = f_.find_tensor(name);
        if (t == nullptr) return {};
        used_.insert(name);
        std::vector<float> v = to_f32(*t);
        if (static_cast<int64_t>(v.size()) != n) {
            fail("{}: scale tensor '{}' has {} values, expected {}", f_.path(), name, v.size(), n);
        }
        return v;
    }

    static std::vector<float> to_f32(const GgufTensor& t) {
        std::vector<float> v(static_cast<size_t>(t.n_elements()));
        t.format->dequantize_row(t.data, v.data(), t.n_elements());
        return v;
    }

    const float* keep(std::vector<float> v) {
        w_.owned.push_back(std::make_unique<std::vector<float>>(std::move(v)));
        return w_.owned.back()->data();
    }

    const GgufFile& f_;
    ModelWeights& w_;
    std::set<std::string> used_;
    std::vector<std::string> skipped_;
};

// A gated delta-net layer (qwen3.5's linear attention).
void bind_delta_net(Binder& b, const ModelConfig& c, int il, LayerWeights& Lw) {
    const ModelConfig::DeltaNet& d = c.delta;
    const int64_t E = c.n_embd, C = d.conv_width(), Hv = d.n_v_heads;
    auto layer = [il](std::string_view base, std::string_view kind = "weight") { return tn::layer(il, base, kind); };
    Lw.wqkv = b.matrix(layer(tn::kAttnQkv), E, C);
    Lw.wqkv_gate = b.matrix(layer(tn::kAttnGate), E, d.value_width());
    Lw.ssm_conv = b.vector_2d(layer(tn::kSsmConv1d), d.conv_kernel, C);
    Lw.ssm_dt = b.vector(layer(tn::kSsmDt, "bias"), Hv);
    Lw.ssm_a = b.vector("blk." + std::to_string(il) + "." + std::string(tn::kSsmA), Hv);
    Lw.ssm_beta = b.matrix(layer(tn::kSsmBeta), E, Hv);
    Lw.ssm_alpha = b.matrix(layer(tn::kSsmAlpha), E, Hv);
    Lw.ssm_norm = b.vector(layer(tn::kSsmNorm), d.head_dim);
    Lw.ssm_out = b.matrix(layer(tn::kSsmOut), d.value_width(), E);
}

// Multi-head latent attention of layer il (DeepSeek-V2/V3 as llama.cpp's converter writes it:
// the key's and value's up-projections split per head into attn_k_b and attn_v_b).
void bind_latent_attention(Binder& b, const ModelConfig& c, int il, LayerWeights& Lw) {
    const ModelConfig::Latent& m = c.mla;
    const int64_t E = c.n_embd, H = c.layers[il].n_head;
    auto layer = [il](std::string_view base, std::string_view kind = "weight") { return tn::layer(il, base, kind); };
    const int64_t q_width = H * (m.qk_nope + m.qk_rope);
    if (m.q_lora_rank > 0) {
        Lw.wq_a = b.matrix(layer(tn::kAttnQA), E, m.q_lora_rank);
        Lw.q_a_norm = b.vector(layer(tn::kAttnQANorm), m.q_lora_rank);
        Lw.wq_b = b.matrix(layer(tn::kAttnQB), m.q_lora_rank, q_width);
    } else {
        Lw.wq = b.matrix(layer(tn::kAttnQ), E, q_width);
    }
    Lw.wkv_a = b.matrix(layer(tn::kAttnKvAMqa), E, m.kv_lora_rank + m.qk_rope);
    Lw.kv_a_norm = b.vector(layer(tn::kAttnKvANorm), m.kv_lora_rank);
    Lw.wk_b = b.experts(layer(tn::kAttnKB), m.qk_nope, m.kv_lora_rank, static_cast<int>(H));
    Lw.wv_b = b.experts(layer(tn::kAttnVB), m.kv_lora_rank, m.v_head, static_cast<int>(H));
    Lw.wo = b.matrix(layer(tn::kAttnOutput), H * m.v_head, E);
}

// The routed experts of layer il: router (with its optional bias and Gemma-4's input scale and
// norms) and the stacked expert tensors.
void bind_experts(Binder& b, const GgufFile& file, const ModelConfig& c, int il, LayerWeights& Lw) {
    const int64_t E = c.n_embd, F = c.layers[il].n_ff_exp;
    const int X = c.n_expert;
    auto layer = [il](std::string_view base, std::string_view kind = "weight") { return tn::layer(il, base, kind); };
    const bool scaled_router = c.router_input == RouterInput::kScaledRmsNorm;
    Lw.router = b.matrix(layer(tn::kFfnRouter), E, X, true, /*second_level_scale=*/!scaled_router);
    Lw.router_bias = b.vector(layer(tn::kFfnRouter, "bias"), X, c.biases);
    Lw.expert_bias = b.vector(layer(tn::kFfnExpProbsB, "bias"), X, /*required=*/false);
    if (scaled_router) {
        Lw.router_scale = b.vector(layer(tn::kFfnRouter, "scale"), E);
        Lw.ffn_pre_norm_2 = b.vector(layer(tn::kFfnPreNorm2), E);
        Lw.ffn_post_norm_1 = b.vector(layer(tn::kFfnPostNorm1), E);
        Lw.ffn_post_norm_2 = b.vector(layer(tn::kFfnPostNorm2), E);
    }
    MoeLayer& m = Lw.experts;
    m.n_expert = X;
    m.n_embd = E;
    m.n_ff = F;
    m.activation = c.expert_activation;
    const std::string fused = layer(tn::kFfnGateUpExps);
    if (file.find_tensor(fused) != nullptr) {
        // One tensor per expert with 2F rows: gate rows [0, F), then up rows [F, 2F).
        ExpertMatrix gate_up = b.experts(fused, E, 2 * F, X);
        m.gate = gate_up;
        m.gate.matrix.rows = F;
        m.up = gate_up;
        m.up.matrix.rows = F;
        m.up.matrix.data += static_cast<size_t>(F) * gate_up.matrix.row_bytes;
        if (gate_up.bias != nullptr) m.up.bias = gate_up.bias + F;
    } else {
        m.gate = b.experts(layer(tn::kFfnGateExps), E, F, X);
        m.up = b.experts(layer(tn::kFfnUpExps), E, F, X);
    }
    m.down = b.experts(layer(tn::kFfnDownExps), F, E, X);
    if (c.biases && (m.gate.bias == nullptr || m.up.bias == nullptr || m.down.bias == nullptr)) {
        fail("{}: layer {}: {} needs the biases of every expert projection ('{}' and the like)", file.path(), il,
             c.arch, layer(tn::kFfnGateExps, "bias"));
    }
}

}  // namespace

ModelWeights bind_model_weights(const GgufFile& file, const ModelConfig& c) {
    const ArchitectureTraits& traits = *find_architecture(c.arch);
    // Gemma-4's router scale ({n_embd}) and per-expert scale (on experts of any type) are
    // parameters of the model, not NVFP4 second-level scales.
    static constexpr std::string_view kGemmaScales[] = {"ffn_gate_inp.scale", "ffn_down_exps.scale"};
    check_scale_tensors(file, c.n_expert,
                        c.router_input == RouterInput::kScaledRmsNorm ? std::span<const std::string_view>(kGemmaScales)
                                                                      : std::span<const std::string_view>());
    ModelWeights w;
    Binder b(file, w);
    const int64_t E = c.n_embd, V = c.n_vocab, P = c.n_embd_per_layer, L = c.n_layer;

    w.token_embd = b.matrix(tn::global(tn::kTokenEmbd), E, V);
    w.output_norm = b.vector(tn::global(tn::kOutputNorm), E);
    w.output = b.matrix(tn::global(tn::kOutput), E, V, /*required=*/false);
    if (w.output.empty()) w.output = w.token_embd;  // tied head
    w.rope_freqs = b.vector(tn::global(tn::kRopeFreqs), c.rope.n_dims / 2, /*required=*/false);
    if (P > 0) {
        w.pl_token_embd = b.matrix(tn::global(tn::kPerLayerTokenEmbd), P * L, V);
        w.pl_model_proj = b.matrix(tn::global(tn::kPerLayerModelProj), E, P * L);
        w.pl_proj_norm = b.vector(tn::global(tn::kPerLayerProjNorm), P);
    }

    w.layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
        const LayerConfig& lc = c.layers[il];
        LayerWeights& Lw = w.layers[il];
        const int64_t Q = lc.q_width(), K = lc.k_width(), Vd = lc.v_width(), O = lc.attn_width();
        const bool own_kv = lc.kv_layer == il;
        auto layer = [il](std::string_view base, std::string_view kind = "weight") { return tn::layer(il, base, kind); };
        Lw.attn_norm = b.vector(layer(tn::kAttnNorm), E);
        if (lc.attention == AttentionKind::kRecurrent) {
            bind_delta_net(b, c, il, Lw);
        } else if (c.mla.kv_lora_rank > 0) {
            bind_latent_attention(b, c, il, Lw);
        } else {
            // With an output gate, each head's query is followed by its gate.
            Lw.wq = b.matrix(layer(tn::kAttnQ), E, c.attn_output_gate ? 2 * Q : Q);
            Lw.wk = b.matrix(layer(tn::kAttnK), E, K, own_kv);
            Lw.wv = b.matrix(layer(tn::kAttnV), E, Vd, own_kv && !c.values_may_be_keys);
            Lw.wo = b.matrix(layer(tn::kAttnOutput), O, E);
            Lw.bq = b.vector(layer(tn::kAttnQ, "bias"), Q, c.biases);
            Lw.bk = b.vector(layer(tn::kAttnK, "bias"), K, c.biases && own_kv);
            Lw.bv = b.vector(layer(tn::kAttnV, "bias"), Vd, c.biases && own_kv);
            Lw.bo = b.vector(layer(tn::kAttnOutput, "bias"), E, c.biases);
        }
        if (c.qk_norm && lc.attention != AttentionKind::kRecurrent) {
            Lw.q_norm = b.vector(layer(tn::kAttnQNorm), lc.head_dim_k);
            Lw.k_norm = b.vector(layer(tn::kAttnKNorm), lc.head_dim_k, own_kv);
        }
        if (c.attn_sinks) Lw.attn_sinks = b.vector(layer(tn::kAttnSinks), lc.n_head);
        const bool sandwich = c.norm_placement == NormPlacement::kSandwich;
        if (sandwich) Lw.attn_post_norm = b.vector(layer(tn::kAttnPostNorm), E);
        Lw.ffn_norm = b.vector(layer(traits.ffn_norm), E);
        if (sandwich) Lw.ffn_post_norm = b.vector(layer(tn::kFfnPostNorm), E);
        if (lc.dense_ffn) {
            Lw.ffn_gate = b.matrix(layer(tn::kFfnGate), E, lc.n_ff);
            Lw.ffn_up = b.matrix(layer(tn::kFfnUp), E, lc.n_ff);
            Lw.ffn_down = b.matrix(layer(tn::kFfnDown), lc.n_ff, E);
        }
        if (lc.moe) bind_experts(b, file, c, il, Lw);
        if (lc.n_ff_shexp > 0) {
            if (c.shared_expert_gate) Lw.shexp_gate_inp = b.matrix(layer(tn::kFfnGateInpShexp), E, 1);
            Lw.shexp_gate = b.matrix(layer(tn::kFfnGateShexp), E, lc.n_ff_shexp);
            Lw.shexp_up = b.matrix(layer(tn::kFfnUpShexp), E, lc.n_ff_shexp);
            Lw.shexp_down = b.matrix(layer(tn::kFfnDownShexp), lc.n_ff_shexp, E);
        }
        if (P > 0) {
            Lw.pl_gate = b.matrix(layer(tn::kPerLayerInpGate), E, P);
            Lw.pl_proj = b.matrix(layer(tn::kPerLayerProj), P, E);
            Lw.pl_post_norm = b.vector(layer(tn::kPerLayerPostNorm), E);
        }
        Lw.out_scale = b.vector(layer(tn::kLayerOutScale), 1, /*required=*/false);
    }

    // nextn draft layers: known, not run.
    for (int il = c.n_layer; il < c.n_layer + c.n_layer_nextn; ++il) b.skip("blk." + std::to_string(il) + ".");
    std::vector<std::string> unused = b.unused();
    if (!unused.empty() && traits.strict) {
        fail("{}: tensor '{}' is not part of a {} model as Tandem reads it ({} such tensors)", file.path(),
             unused.front(), c.arch, unused.size());
    }
    if (!unused.empty()) {
        log_warn("{}: ignoring {} tensors this architecture does not use (first: {})", file.path(),
                 unused.size(), unused.front());
    }
    return w;
}

}  // namespace tandem
