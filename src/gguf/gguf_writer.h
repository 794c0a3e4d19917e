// Writes GGUF files: metadata of every value type, then tensors at aligned offsets. Tensor data
// is produced by a callback when the file is written, so multi-gigabyte models stream to disk.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/ggml_type.h"
#include "gguf/gguf_types.h"

namespace tandem {

class GgufWriter {
public:
    explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment, uint32_t version = 3);

    // Scalars: T is one of u8..i64, float, double, bool.
    template <typename T>
    void set(std::string_view key, T value) {
        std::string& out = begin_kv(key, GgufTypeOf<T>::value);
        append_raw(out, &value, sizeof(T));
    }
    void set_string(std::string_view key, std::string_view value);
    template <typename T>
    void set_array(std::string_view key, std::span<const T> values) {
        std::string& out = begin_kv(key, GgufValueType::kArray);
        append_u32(out, static_cast<uint32_t>(GgufTypeOf<T>::value));
        append_u64(out, values.size());
        if (!values.empty()) append_raw(out, values.data(), values.size() * sizeof(T));
    }
    void set_array(std::string_view key, const std::vector<bool>& values);
    void set_string_array(std::string_view key, const std::vector<std::string>& values);

    using Fill = std::function<void(uint8_t* dst, size_t n_bytes)>;
    // ne[0] is the row length (a multiple of the type's block size).
    void add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne, Fill fill);
    void add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne,
                    std::vector<uint8_t> bytes);

    // Writes to `path` through a temporary file renamed into place, so a failed write leaves no
    // half-written model behind. Throws Error naming the path.
    void write(const std::string& path) const;
    // The whole file in memory (for tests).
    std::vector<uint8_t> to_bytes() const;

    size_t tensor_count() const { return tensors_.size(); }
    uint64_t tensor_bytes(size_t i) const { return tensors_.at(i).n_bytes; }

    // A writer with this one's alignment, version and (when `with_metadata`) metadata, and its
    // tensors [begin, end) in order: one part of a split model (gguf_split.h).
    GgufWriter part(size_t begin, size_t end, bool with_metadata) const;

private:
    struct PendingTensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> ne;
        uint64_t n_bytes;
        uint64_t offset;  // relative to the data section
        Fill fill;
    };
    std::string& begin_kv(std::string_view key, GgufValueType type);
    static void append_raw(std::string& out, const void* p, size_t n);
    static void append_u32(std::string& out, uint32_t v) { append_raw(out, &v, 4); }
    static void append_u64(std::string& out, uint64_t v) { append_raw(out, &v, 8); }
    static void append_string(std::string& out, std::string_view s);
    std::string header_bytes() const;
    void emit(const std::function<void(const void*, size_t)>& sink) const;

    uint32_t alignment_;
    uint32_t version_;
    std::vector<std::string> keys_;
    std::vector<std::string> kvs_;  // serialized key + type + value
    std::vector<PendingTensor> tensors_;
    uint64_t data_bytes_ = 0;
};

}  // namespace tandem
