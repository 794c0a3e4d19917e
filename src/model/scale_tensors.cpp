// The loader rules for NVFP4 second-level scale tensors.
#include "model/scale_tensors.h"

#include <string>

#include "base/error.h"
#include "gguf/gguf_reader.h"

namespace tandem {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_expert_tensor(std::string_view base) { return ends_with(base, "_exps"); }

}  // namespace

void check_scale_tensors(const GgufFile& file, int n_expert, std::span<const std::string_view> exempt) {
    for (const GgufTensor& t : file.tensors()) {
        bool skip = false;
        for (std::string_view e : exempt) skip = skip || ends_with(t.name, e);
        if (skip) continue;
        std::string_view suffix;
        if (ends_with(t.name, ".input_scale")) {
            suffix = ".input_scale";
        } else if (ends_with(t.name, ".scale")) {
            suffix = ".scale";
        } else {
            continue;
        }
        const std::string_view base = t.name.substr(0, t.name.size() - suffix.size());
        const std::string weight_name = std::string(base) + ".weight";
        const GgufTensor* weight = file.find_tensor(weight_name);
        if (weight == nullptr) {
            fail("{}: scale tensor '{}' has no weight '{}' next to it", file.path(), t.name, weight_name);
        }
        if (weight->type != GgmlType::kNVFP4) {
            fail("{}: scale tensor '{}' sits next to a {} weight; only NVFP4 weights take a second-level scale",
                 file.path(), t.name, weight->format->name);
        }
        if (ends_with(base, "ffn_gate_up_exps")) {
            fail("{}: scale tensor '{}': a per-expert scale on a merged gate_up NVFP4 tensor is not supported",
                 file.path(), t.name);
        }
        const bool experts = is_expert_tensor(base);
        const int64_t want = experts ? n_expert : 1;
        if (t.n_dims != 1 || t.ne[0] != want) {
            fail("{}: scale tensor '{}' has shape {}, expected [{}]", file.path(), t.name, t.shape_string(), want);
        }
        if (t.type != GgmlType::kF32) {
            fail("{}: scale tensor '{}' has type {}, expected f32", file.path(), t.name, t.format->name);
        }
    }
}

bool has_scale_tensor(const GgufFile& file, std::string_view weight_name) {
    std::string_view base = weight_name;
    if (ends_with(base, ".weight")) base = base.substr(0, base.size() - 7);
    return file.find_tensor(std::string(base) + ".scale") != nullptr;
}

}  // namespace tandem
