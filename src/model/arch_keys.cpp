// Reading an architecture's GGUF keys with a record of what was read.
#include "model/arch_keys.h"

#include <algorithm>

#include "base/error.h"
#include "gguf/gguf_reader.h"

namespace tandem {

bool ArchKeys::has(std::string_view suffix) {
    const std::string k = key(suffix);
    read_.insert(k);
    return f_.has(k);
}

int64_t ArchKeys::get_int(std::string_view suffix, int64_t lo, int64_t hi) {
    const std::string k = key(suffix);
    read_.insert(k);
    return f_.get_int(k, lo, hi);
}

std::optional<int64_t> ArchKeys::find_int(std::string_view suffix, int64_t lo, int64_t hi) {
    const std::string k = key(suffix);
    read_.insert(k);
    return f_.find_int(k, lo, hi);
}

double ArchKeys::get_float(std::string_view suffix) {
    const std::string k = key(suffix);
    read_.insert(k);
    return f_.get_float(k);
}

std::optional<double> ArchKeys::find_float(std::string_view suffix) {
    const std::string k = key(suffix);
    read_.insert(k);
    return f_.find_float(k);
}

std::optional<bool> ArchKeys::find_bool(std::string_view suffix) {
    const std::string k = key(suffix);
    read_.insert(k);
    const GgufValue* v = f_.find(k);
    if (v == nullptr) return std::nullopt;
    std::optional<int64_t> x = v->as_int64();
    if (!x || *x < 0 || *x > 1) fail("{}: metadata key '{}' is not a bool", f_.path(), k);
    return *x != 0;
}

std::optional<std::string> ArchKeys::find_string(std::string_view suffix) {
    const std::string k = key(suffix);
    read_.insert(k);
    if (!f_.has(k)) return std::nullopt;
    return f_.get_string(k);
}

std::vector<int64_t> ArchKeys::per_layer(std::string_view suffix, int n_layer, int64_t lo, int64_t hi,
                                         std::optional<int64_t> fallback) {
    const std::string k = key(suffix);
    read_.insert(k);
    const GgufValue* v = f_.find(k);
    if (v == nullptr) {
        if (!fallback) fail("{}: missing metadata key '{}'", f_.path(), k);
        return std::vector<int64_t>(n_layer, *fallback);
    }
    if (v->type != GgufValueType::kArray) {
        return std::vector<int64_t>(n_layer, f_.get_int(k, lo, hi));
    }
    std::vector<int64_t> values = f_.get_int_array(k);
    const int expected = std::max(n_layer, n_layer_file_);
    if (static_cast<int>(values.size()) != expected) {
        fail("{}: metadata key '{}' has {} values, expected one per layer ({})", f_.path(), k, values.size(),
             expected);
    }
    values.resize(n_layer);
    for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] < lo || values[i] > hi) {
            fail("{}: metadata key '{}' [{}] is {}, outside the valid range [{}, {}]", f_.path(), k, i, values[i], lo,
                 hi);
        }
    }
    return values;
}

std::vector<int64_t> ArchKeys::per_layer_array(std::string_view suffix, int n, int64_t lo, int64_t hi) {
    const std::string k = key(suffix);
    read_.insert(k);
    if (!f_.has(k)) fail("{}: missing metadata key '{}'", f_.path(), k);
    std::vector<int64_t> values = f_.get_int_array(k);
    if (static_cast<int>(values.size()) != n) {
        fail("{}: metadata key '{}' has {} values, expected {}", f_.path(), k, values.size(), n);
    }
    for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] < lo || values[i] > hi) {
            fail("{}: metadata key '{}' [{}] is {}, outside the valid range [{}, {}]", f_.path(), k, i, values[i], lo,
                 hi);
        }
    }
    return values;
}

void ArchKeys::refuse_unknown() const {
    const std::string prefix = arch_ + ".";
    for (const GgufKeyValue& kv : f_.metadata()) {
        if (!kv.key.starts_with(prefix) || read_.count(std::string(kv.key)) != 0) continue;
        fail("{}: metadata key '{}' is not supported for architecture {} (Tandem does not know what it changes; "
             "llama.cpp may compute the model differently with it)",
             f_.path(), kv.key, arch_);
    }
}

}  // namespace tandem
