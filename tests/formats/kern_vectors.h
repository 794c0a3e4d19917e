// Test vectors written by the oracle kit's `kern vectors` (ggml's own quantize, dequantize,
// activation quantizer and vec_dot per type), produced once and shared by tests. ctest runs
// every test in its own process, so the files are kept under the build directory, keyed by
// the arguments, the kit's binaries and the CPU, and made under a file lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::testing {

// One line of DIR/manifest.tsv.
struct KernType {
    std::string name;
    uint32_t id = 0;
    int64_t block_size = 0;
    size_t block_bytes = 0;
    int64_t n = 0;     // values per row
    int64_t rows = 0;  // weight rows
    size_t row_size = 0;
    std::string dot_type;
    size_t dot_row_size = 0;
    std::string cpu_variant;
    bool has_generic = false;
};

class KernVectors {
  public:
    // `kern [-v VARIANT] vectors -o DIR ARGS`, run on first use for each (variant, args) and
    // kept (in the process and on disk). Call only when the oracle kit is available.
    static const KernVectors& get(const std::string& variant, const std::string& args);

    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    const std::vector<KernType>& types() const { return types_; }
    const KernType* find(const std::string& name) const;

    // The raw file TYPE.SUFFIX, e.g. ("q4_K", "q.bin"); empty when it does not exist.
    std::vector<uint8_t> bytes(const std::string& type, const std::string& suffix) const;
    std::vector<float> floats(const std::string& type, const std::string& suffix) const;
    std::vector<double> doubles(const std::string& type, const std::string& suffix) const;

  private:
    std::string dir_;
    std::vector<KernType> types_;
    std::string error_;
};

}  // namespace tandem::testing
