// Reading an architecture's GGUF keys ("{arch}.suffix") while remembering which were read, so
// that a strict architecture can refuse, by name, every key of its namespace it does not know
// (llama.cpp would apply it; ignoring it in silence could give wrong answers).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class GgufFile;

class ArchKeys {
  public:
    ArchKeys(const GgufFile& file, std::string arch) : f_(file), arch_(std::move(arch)) {}

    const GgufFile& file() const { return f_; }
    const std::string& arch() const { return arch_; }
    // "{arch}.suffix"
    std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }
    bool has(std::string_view suffix);

    int64_t get_int(std::string_view suffix, int64_t lo, int64_t hi);
    std::optional<int64_t> find_int(std::string_view suffix, int64_t lo, int64_t hi);
    double get_float(std::string_view suffix);
    std::optional<double> find_float(std::string_view suffix);
    std::optional<bool> find_bool(std::string_view suffix);
    std::optional<std::string> find_string(std::string_view suffix);
    // The file's block count, when it holds more layers than the model runs (nextn draft layers
    // after the n_layer of the trunk): per-layer arrays have this many entries.
    void set_layers_in_file(int n) { n_layer_file_ = n; }
    // llama.cpp's get_key_or_arr: a scalar for every layer or an array of one integer per layer
    // of the file (bools count as 0/1), of which the first n_layer are returned; `fallback` when
    // absent, or an Error when there is none.
    std::vector<int64_t> per_layer(std::string_view suffix, int n_layer, int64_t lo, int64_t hi,
                                   std::optional<int64_t> fallback);
    // An array of exactly n integers (llama.cpp's get_key_or_arr with a fixed count), required.
    std::vector<int64_t> per_layer_array(std::string_view suffix, int n, int64_t lo, int64_t hi);
    // A key that is known and has nothing to change here (its value is checked by the caller
    // where that matters).
    void accept(std::string_view suffix) { read_.insert(key(suffix)); }

    // Throws an Error naming the first key of the "{arch}." namespace that was neither read nor
    // accepted.
    void refuse_unknown() const;

  private:
    const GgufFile& f_;
    std::string arch_;
    std::set<std::string> read_;
    int n_layer_file_ = 0;
};

}  // namespace tandem
