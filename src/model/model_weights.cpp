// Binds the weights of a decoder model to the tensors of its GGUF file.
#include "model/model_weights.h"

#include <set>

#include "base/error.h"
#include "base/log.h"
#include "gguf/gguf_reader.h"
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

    // A [cols → rows] matrix, with its NVFP4 `.scale` when present.
    WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows, bool required = true) {
        WeightMatrix m;
        const GgufTensor* t = find(name, {cols, rows}, required);
        if (t == nullptr) return m;
        m.format = t->format;
        m.data = t->data;
        m.cols = cols;
        m.rows = rows;
        m.row_bytes = t->row_bytes();
        std::vector<float> s = scale_values(name, 1);
        if (!s.empty()) m.scale = s[0];
        return m;
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

    // Tensors the model did not use (other than scales, checked elsewhere).
    std::vector<std::string> unused() const {
        std::vector<std::string> out;
        for (const GgufTensor& t : f_.tensors()) {
            std::string name(t.name);
            if (used_.count(name) != 0) continue;
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
};

}  // namespace

ModelWeights bind_model_weights(const GgufFile& file, const ModelConfig& c) {
    check_scale_tensors(file, c.n_expert);
    ModelWeights w;
    Binder b(file, w);
    const int64_t E = c.n_embd, V = c.n_vocab;
    const int64_t Q = int64_t{c.n_head} * c.head_dim_k, K = int64_t{c.n_head_kv} * c.head_dim_k,
                  Vd = int64_t{c.n_head_kv} * c.head_dim_v, O = int64_t{c.n_head} * c.head_dim_v;

    w.token_embd = b.matrix(tn::global(tn::kTokenEmbd), E, V);
    w.output_norm = b.vector(tn::global(tn::kOutputNorm), E);
    w.output = b.matrix(tn::global(tn::kOutput), E, V, /*required=*/false);
    if (w.output.empty()) w.output = w.token_embd;  // tied head
    w.rope_freqs = b.vector("rope_freqs.weight", c.rope.n_dims / 2, /*required=*/false);

    w.layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
        LayerWeights& L = w.layers[il];
        L.attn_norm = b.vector(tn::layer(il, tn::kAttnNorm), E);
        L.wq = b.matrix(tn::layer(il, tn::kAttnQ), E, Q);
        L.wk = b.matrix(tn::layer(il, tn::kAttnK), E, K);
        L.wv = b.matrix(tn::layer(il, tn::kAttnV), E, Vd);
        L.wo = b.matrix(tn::layer(il, tn::kAttnOutput), O, E);
        L.bq = b.vector(tn::layer(il, tn::kAttnQ, "bias"), Q, false);
        L.bk = b.vector(tn::layer(il, tn::kAttnK, "bias"), K, false);
        L.bv = b.vector(tn::layer(il, tn::kAttnV, "bias"), Vd, false);
        L.bo = b.vector(tn::layer(il, tn::kAttnOutput, "bias"), E, false);
        if (c.qk_norm) {
            L.q_norm = b.vector(tn::layer(il, tn::kAttnQNorm), c.head_dim_k);
            L.k_norm = b.vector(tn::layer(il, tn::kAttnKNorm), c.head_dim_k);
        }
        L.ffn_norm = b.vector(tn::layer(il, tn::kFfnNorm), E);
        if (!c.is_moe()) {
            L.ffn_gate = b.matrix(tn::layer(il, tn::kFfnGate), E, c.n_ff);
            L.ffn_up = b.matrix(tn::layer(il, tn::kFfnUp), E, c.n_ff);
            L.ffn_down = b.matrix(tn::layer(il, tn::kFfnDown), c.n_ff, E);
            continue;
        }
        const int64_t F = c.n_ff_exp;
        const int X = c.n_expert;
        L.router = b.matrix(tn::layer(il, tn::kFfnRouter), E, X);
        MoeLayer& m = L.experts;
        m.n_expert = X;
        m.n_embd = E;
        m.n_ff = F;
        m.activation = c.activation;
        const std::string fused = tn::layer(il, tn::kFfnGateUpExps);
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
            m.gate = b.experts(tn::layer(il, tn::kFfnGateExps), E, F, X);
            m.up = b.experts(tn::layer(il, tn::kFfnUpExps), E, F, X);
        }
        m.down = b.experts(tn::layer(il, tn::kFfnDownExps), F, E, X);
    }

    std::vector<std::string> unused = b.unused();
    if (!unused.empty()) {
        log_warn("{}: ignoring {} tensors this architecture does not use (first: {})", file.path(),
                 unused.size(), unused.front());
    }
    return w;
}

}  // namespace tandem
