// A loaded model.
#include "model/model.h"

#include <map>

#include <fmt/format.h>

#include "base/error.h"

namespace tandem {

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
    auto m = std::make_unique<Model>();
    m->file_ = open_gguf_model(path, options);
    m->config_ = load_model_config(*m->file_);
    m->weights_ = bind_model_weights(*m->file_, m->config_);
    if (m->config_.n_vocab <= 0) m->config_.n_vocab = static_cast<int>(m->weights_.token_embd.rows);
    if (!m->weights_.rope_freqs.empty()) {
        m->config_.rope.freq_factors = m->weights_.rope_freqs.data;
        for (LayerConfig& L : m->config_.layers) {
            if (!L.rope_freq_factors) continue;
            if (L.rope.n_dims / 2 > m->weights_.rope_freqs.size) {
                fail("{}: rope_freqs.weight has {} values, a layer rotates {} pairs", path, m->weights_.rope_freqs.size,
                     L.rope.n_dims / 2);
            }
            L.rope.freq_factors = m->weights_.rope_freqs.data;
        }
    }
    return m;
}

std::string Model::describe_types() const {
    // Count tensor types per role, from the bound weights.
    std::map<std::string, std::map<std::string, int>> roles;
    auto add = [&](const char* role, const WeightMatrix& w) {
        if (!w.empty()) roles[role][std::string(w.format->name)]++;
    };
    add("embd", weights_.token_embd);
    add("output", weights_.output);
    for (const LayerWeights& L : weights_.layers) {
        add("attn", L.wq);
        add("attn", L.wk);
        add("attn", L.wv);
        add("attn", L.wo);
        add("ffn", L.ffn_gate);
        add("ffn", L.ffn_up);
        add("ffn", L.ffn_down);
        add("router", L.router);
        if (L.experts.n_expert > 0) {
            add("experts", L.experts.gate.matrix);
            add("experts", L.experts.up.matrix);
            add("experts", L.experts.down.matrix);
        }
    }
    std::string out;
    for (const auto& [role, types] : roles) {
        std::string list;
        for (const auto& [type, n] : types) list += (list.empty() ? "" : "+") + type;
        out += (out.empty() ? "" : ", ") + role + " " + list;
    }
    return out;
}

}  // namespace tandem
