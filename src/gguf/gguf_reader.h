// A validating GGUF reader: the whole file is checked when opened, then metadata and tensors
// are views into the memory mapping (or the file's bytes read into memory). Nothing is read
// outside them, and every problem is an Error naming the file, the field or tensor, and the byte
// offset. The parts of a split model joined (gguf_split.h) read as one file whose tensors lie in
// several.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/background_page_in.h"
#include "base/error.h"
#include "base/file_image.h"
#include "base/resident_memory.h"
#include "formats/format_table.h"
#include "gguf/gguf_types.h"

namespace tandem {

// One metadata value. Scalars and arrays of scalars point at their little-endian bytes in the
// mapping; strings are views. Arrays of strings keep one view per element.
struct GgufValue {
    GgufValueType type = GgufValueType::kU8;
    GgufValueType elem_type = GgufValueType::kU8;  // for arrays
    uint64_t count = 1;                             // elements, for arrays
    const uint8_t* data = nullptr;                  // scalar or array payload
    std::string_view string;                        // for strings
    std::vector<std::string_view> strings;          // for arrays of strings

    // Reads scalar element i (0 for a scalar) as T; T must match the stored type.
    template <typename T>
    T scalar_at(uint64_t i) const {
        T v;
        std::memcpy(&v, data + i * sizeof(T), sizeof(T));
        return v;
    }
    bool is_integer() const;
    // Any integer or bool scalar as int64 (u64 above INT64_MAX is refused by the caller).
    std::optional<int64_t> as_int64() const;
    // Element i of an integer array as int64.
    int64_t int_at(uint64_t i) const;
    // f32 or f64 scalar as double.
    std::optional<double> as_double() const;
    // Element i of a float array as double.
    double double_at(uint64_t i) const;
};

struct GgufKeyValue {
    std::string_view key;
    GgufValue value;
    uint64_t offset;  // where the key starts in the file
};

struct GgufTensor {
    std::string_view name;
    GgmlType type;
    const FormatTraits* format;
    int n_dims;
    std::array<int64_t, kGgufMaxDims> ne;  // ne[0] is the row length; unused dims are 1
    uint64_t offset;                       // absolute offset of the data in its part's file
    uint64_t n_bytes;
    const uint8_t* data;                   // view into the mapping of its part
    uint32_t part = 0;                     // the part holding it (0 unless split)

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    size_t row_bytes() const { return tandem::row_bytes(*format, ne[0]); }
    // "[2048, 768, 128]"
    std::string shape_string() const;
};

// One file of a model: the whole model, or one part of a split model.
struct GgufPart {
    std::string path;
    const uint8_t* data;    // the file's bytes (mapped or read into memory)
    uint64_t size;          // bytes of the file
    size_t n_tensors;       // tensors it holds
    uint64_t tensor_bytes;  // bytes of those tensors
    bool mapped;            // memory-mapped in place (false: read into host memory, or a buffer)
};

class GgufFile {
public:
    // Maps and validates the file; throws Error on the first problem.
    static std::unique_ptr<GgufFile> open(const std::string& path);
    // Validates a mapped or read file and keeps it.
    static std::unique_ptr<GgufFile> open(std::unique_ptr<FileImage> image);
    // Joins the parts of a split model in order: the metadata of parts[0], the tensors of all
    // (each keeping a view into its own part). Throws Error when a tensor is in two parts. The
    // split keys themselves are checked by open_gguf_model (gguf_split.h).
    static std::unique_ptr<GgufFile> join(std::vector<std::unique_ptr<GgufFile>> parts);
    // Validates a buffer (kept alive by the caller); `name` stands for the path in messages.
    static std::unique_ptr<GgufFile> parse(const std::string& name, const uint8_t* data,
                                           size_t size);

    // The file opened; for a split model its first part, which holds the metadata.
    const std::string& path() const { return name_; }
    // The files holding the model: one, or every part of a split model in order. Their bytes
    // are where tensors point (for registering host memory with a GPU, locking, paging in).
    const std::vector<GgufPart>& parts() const { return parts_; }
    // Keeps `lock` (an mlock over the parts' bytes) for as long as the file lives.
    void hold_lock(std::unique_ptr<MemoryLock> lock) { lock_ = std::move(lock); }
    bool locked() const { return lock_ != nullptr; }
    // Keeps `page_in` (a thread paging the parts in) running until the file is destroyed.
    void hold_page_in(std::unique_ptr<BackgroundPageIn> page_in) { page_in_ = std::move(page_in); }
    const BackgroundPageIn* background_page_in() const { return page_in_.get(); }
    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }
    uint64_t file_size() const { return size_; }  // of path()

    const std::vector<GgufKeyValue>& metadata() const { return kvs_; }
    const GgufValue* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed access: the stored type must be exactly T's GGUF type.
    template <typename T>
    T get(std::string_view key) const {
        const GgufValue& v = require(key, GgufTypeOf<T>::value);
        if constexpr (std::is_same_v<T, std::string_view>) {
            return v.string;
        } else {
            return v.template scalar_at<T>(0);
        }
    }
    std::string get_string(std::string_view key) const { return std::string(get<std::string_view>(key)); }
    template <typename T>
    T get_or(std::string_view key, T fallback) const {
        return has(key) ? get<T>(key) : fallback;
    }
    // Any integer type whose value fits in [lo, hi] (hyperparameters are stored as u32 or i32
    // depending on the converter).
    int64_t get_int(std::string_view key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
    std::optional<int64_t> find_int(std::string_view key, int64_t lo = INT64_MIN,
                                    int64_t hi = INT64_MAX) const;
    // f32 or f64.
    double get_float(std::string_view key) const;
    std::optional<double> find_float(std::string_view key) const;
    // Arrays: the element type must be exactly T's.
    template <typename T>
    std::vector<T> get_array(std::string_view key) const {
        const GgufValue& v = require_array(key, GgufTypeOf<T>::value);
        std::vector<T> out(v.count);
        for (uint64_t i = 0; i < v.count; ++i) out[i] = v.template scalar_at<T>(i);
        return out;
    }
    const std::vector<std::string_view>& get_string_array(std::string_view key) const;
    // An array of integers of any integer element type.
    std::vector<int64_t> get_int_array(std::string_view key) const;
    // An array of f32 or f64.
    std::vector<double> get_float_array(std::string_view key) const;

    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* find_tensor(std::string_view name) const;

    // The architecture name (general.architecture), or "" when missing.
    std::string_view architecture() const;

private:
    GgufFile() = default;
    void parse_all();
    const GgufValue& require(std::string_view key, GgufValueType type) const;
    const GgufValue& require_array(std::string_view key, GgufValueType elem_type) const;

    std::string name_;
    std::unique_ptr<FileImage> image_;
    std::vector<std::unique_ptr<GgufFile>> other_parts_;  // parts 1.. of a split model
    std::vector<GgufPart> parts_;
    std::unique_ptr<MemoryLock> lock_;  // released before the parts are unmapped
    // Declared after the parts: stopped and joined before they are unmapped.
    std::unique_ptr<BackgroundPageIn> page_in_;
    const uint8_t* base_ = nullptr;
    uint64_t size_ = 0;
    uint32_t version_ = 0;
    uint32_t alignment_ = kGgufDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<GgufKeyValue> kvs_;
    std::unordered_map<std::string_view, size_t> kv_index_;
    std::vector<GgufTensor> tensors_;
    std::unordered_map<std::string_view, size_t> tensor_index_;
};

// A value rendered for people: numbers, quoted strings, arrays with at most `max_items`
// elements shown and the rest summarised ("[1, 2, 3, ... 151936 items]").
std::string gguf_value_to_string(const GgufValue& value, size_t max_items = 8);

}  // namespace tandem
