// A validating GGUF reader (spec: ggml/docs/gguf.md).
#include "gguf/gguf_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace tandem {
namespace {

// Bounds-checked little-endian reads over the mapping. Every failure names the file, what was
// being read and its offset.
class Cursor {
public:
    Cursor(const std::string& file, const uint8_t* base, uint64_t size)
        : file_(file), base_(base), size_(size) {}

    uint64_t offset() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    void need(uint64_t bytes, std::string_view what) const {
        if (bytes > remaining()) {
            fail("{}: {} at offset {} needs {} bytes but the file ends after {}", file_, what,
                 pos_, bytes, remaining());
        }
    }
    template <typename T>
    T read(std::string_view what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    const uint8_t* take(uint64_t bytes, std::string_view what) {
        need(bytes, what);
        const uint8_t* p = base_ + pos_;
        pos_ += bytes;
        return p;
    }
    std::string_view read_string(std::string_view what) {
        uint64_t start = pos_;
        uint64_t len = read<uint64_t>(what);
        if (len > remaining()) {
            fail("{}: {} at offset {}: string length {} runs past the end of the file ({} bytes "
                 "left)",
                 file_, what, start, len, remaining());
        }
        const uint8_t* p = take(len, what);
        return {reinterpret_cast<const char*>(p), static_cast<size_t>(len)};
    }

private:
    const std::string& file_;
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
};

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kF64); }

// Smallest number of bytes one element of this type can take (string: its u64 length).
uint64_t min_element_bytes(GgufValueType t) {
    if (t == GgufValueType::kString) return 8;
    return gguf_scalar_size(t);
}

std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 80)) {
        unsigned char u = static_cast<unsigned char>(c);
        out += (u >= 0x20 && u < 0x7f) ? c : '?';
    }
    if (s.size() > 80) out += "...";
    return out;
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
    return open(FileImage::map(path));
}

std::unique_ptr<GgufFile> GgufFile::open(std::unique_ptr<FileImage> image) {
    std::unique_ptr<GgufFile> file(new GgufFile());
    file->name_ = image->path();
    file->base_ = image->data();
    file->size_ = image->size();
    file->image_ = std::move(image);
    file->parse_all();
    return file;
}

std::unique_ptr<GgufFile> GgufFile::join(std::vector<std::unique_ptr<GgufFile>> parts) {
    if (parts.empty()) fail("gguf: no parts to join");
    std::unique_ptr<GgufFile> file = std::move(parts[0]);
    if (!file->other_parts_.empty()) fail("{}: already joined", file->name_);
    for (size_t i = 1; i < parts.size(); ++i) {
        std::unique_ptr<GgufFile>& part = parts[i];
        if (!part->other_parts_.empty()) fail("{}: already joined", part->name_);
        for (const GgufTensor& t : part->tensors_) {
            auto it = file->tensor_index_.find(t.name);
            if (it != file->tensor_index_.end()) {
                const GgufPart& owner = file->parts_[file->tensors_[it->second].part];
                fail("{}: tensor '{}' is also in {}: a tensor in two parts", part->name_,
                     printable(t.name), owner.path);
            }
            GgufTensor joined = t;
            joined.part = static_cast<uint32_t>(i);
            file->tensor_index_.emplace(joined.name, file->tensors_.size());
            file->tensors_.push_back(joined);
        }
        file->parts_.push_back(part->parts_.front());
        file->other_parts_.push_back(std::move(part));
    }
    return file;
}

std::unique_ptr<GgufFile> GgufFile::parse(const std::string& name, const uint8_t* data,
                                          size_t size) {
    std::unique_ptr<GgufFile> file(new GgufFile());
    file->name_ = name;
    file->base_ = data;
    file->size_ = size;
    file->parse_all();
    return file;
}

void GgufFile::parse_all() {
    static const uint8_t kEmpty[1] = {0};
    Cursor cur(name_, base_ != nullptr ? base_ : kEmpty, base_ != nullptr ? size_ : 0);

    // Header: magic, version, tensor count, metadata count.
    if (size_ < 4) fail("{}: not a GGUF file: {} bytes, too short for the magic", name_, size_);
    uint32_t magic = cur.read<uint32_t>("magic");
    if (magic != kGgufMagic) {
        fail("{}: not a GGUF file: magic at offset 0 is 0x{:08x}, expected 0x{:08x} (\"GGUF\")",
             name_, magic, kGgufMagic);
    }
    version_ = cur.read<uint32_t>("version");
    if (version_ == 1) fail("{}: GGUF version 1 at offset 4 is not supported (only 2 and 3)", name_);
    if (version_ != 2 && version_ != 3) {
        fail("{}: unsupported GGUF version {} at offset 4 (only 2 and 3; a big-endian file reads "
             "as a huge version)",
             name_, version_);
    }
    uint64_t n_tensors = cur.read<uint64_t>("tensor count");
    uint64_t n_kv = cur.read<uint64_t>("metadata count");
    // Every key-value takes at least 8 (key length) + 4 (type) + 1 bytes; every tensor info
    // at least 8 + 4 + 8 + 4 + 8. Counts that cannot fit are refused before any allocation.
    if (n_kv > cur.remaining() / 13) {
        fail("{}: metadata count {} at offset 16 cannot fit in the {} bytes that follow", name_,
             n_kv, cur.remaining());
    }
    if (n_tensors > cur.remaining() / 32) {
        fail("{}: tensor count {} at offset 8 cannot fit in the {} bytes that follow", name_,
             n_tensors, cur.remaining());
    }

    // Metadata.
    kvs_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
        uint64_t kv_offset = cur.offset();
        std::string what = fmt::format("metadata key #{}", i);
        std::string_view key = cur.read_string(what);
        if (key.empty()) fail("{}: {} at offset {} is empty", name_, what, kv_offset);
        if (kv_index_.count(key) != 0) {
            fail("{}: duplicate metadata key '{}' at offset {}", name_, printable(key), kv_offset);
        }
        std::string where = fmt::format("metadata '{}'", printable(key));
        uint64_t type_offset = cur.offset();
        uint32_t raw_type = cur.read<uint32_t>(where + " type");
        if (!valid_value_type(raw_type)) {
            fail("{}: {} at offset {}: unknown value type {}", name_, where, type_offset, raw_type);
        }
        GgufValue value;
        value.type = static_cast<GgufValueType>(raw_type);
        if (value.type == GgufValueType::kString) {
            value.string = cur.read_string(where);
        } else if (value.type == GgufValueType::kArray) {
            uint64_t elem_offset = cur.offset();
            uint32_t raw_elem = cur.read<uint32_t>(where + " element type");
            if (!valid_value_type(raw_elem)) {
                fail("{}: {} at offset {}: unknown array element type {}", name_, where,
                     elem_offset, raw_elem);
            }
            value.elem_type = static_cast<GgufValueType>(raw_elem);
            if (value.elem_type == GgufValueType::kArray) {
                fail("{}: {} at offset {}: arrays of arrays are not supported", name_, where,
                     elem_offset);
            }
            uint64_t count_offset = cur.offset();
            value.count = cur.read<uint64_t>(where + " array length");
            if (value.count > cur.remaining() / min_element_bytes(value.elem_type)) {
                fail("{}: {} at offset {}: array of {} {} elements cannot fit in the {} bytes "
                     "left",
                     name_, where, count_offset, value.count, gguf_type_name(value.elem_type),
                     cur.remaining());
            }
            if (value.elem_type == GgufValueType::kString) {
                value.strings.reserve(value.count);
                for (uint64_t j = 0; j < value.count; ++j) {
                    value.strings.push_back(cur.read_string(fmt::format("{}[{}]", where, j)));
                }
            } else {
                value.data = cur.take(value.count * gguf_scalar_size(value.elem_type), where);
            }
        } else {
            value.data = cur.take(gguf_scalar_size(value.type), where);
            if (value.type == GgufValueType::kBool && value.data[0] > 1) {
                fail("{}: {} at offset {}: bool value {} is neither 0 nor 1", name_, where,
                     type_offset + 4, value.data[0]);
            }
        }
        kv_index_.emplace(key, kvs_.size());
        kvs_.push_back({key, std::move(value), kv_offset});
    }

    // general.alignment: u32, a power of two.
    if (const GgufValue* a = find("general.alignment")) {
        const GgufKeyValue& kv = kvs_[kv_index_.at("general.alignment")];
        if (a->type != GgufValueType::kU32) {
            fail("{}: general.alignment at offset {} has type {}, expected u32", name_, kv.offset,
                 gguf_type_name(a->type));
        }
        alignment_ = a->scalar_at<uint32_t>(0);
        if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0) {
            fail("{}: general.alignment at offset {} is {}, not a power of two", name_, kv.offset,
                 alignment_);
        }
    }

    // Tensor infos.
    tensors_.reserve(n_tensors);
    std::vector<uint64_t> relative_offsets;
    relative_offsets.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        uint64_t info_offset = cur.offset();
        std::string what = fmt::format("tensor #{} name", i);
        std::string_view name = cur.read_string(what);
        if (name.empty()) fail("{}: {} at offset {} is empty", name_, what, info_offset);
        if (name.size() > kGgufMaxNameBytes) {
            fail("{}: tensor '{}' at offset {}: name is {} bytes, the limit is {}", name_,
                 printable(name), info_offset, name.size(), kGgufMaxNameBytes);
        }
        if (tensor_index_.count(name) != 0) {
            fail("{}: duplicate tensor '{}' at offset {}", name_, printable(name), info_offset);
        }
        std::string where = fmt::format("tensor '{}'", printable(name));
        uint64_t dims_offset = cur.offset();
        uint32_t n_dims = cur.read<uint32_t>(where + " dimension count");
        if (n_dims < 1 || n_dims > kGgufMaxDims) {
            fail("{}: {} at offset {}: {} dimensions, expected 1 to {}", name_, where, dims_offset,
                 n_dims, kGgufMaxDims);
        }
        GgufTensor t{};
        t.name = name;
        t.n_dims = static_cast<int>(n_dims);
        t.ne = {1, 1, 1, 1};
        for (uint32_t d = 0; d < n_dims; ++d) {
            uint64_t ne_offset = cur.offset();
            uint64_t ne = cur.read<uint64_t>(where + " dimension");
            if (ne > static_cast<uint64_t>(INT64_MAX)) {
                fail("{}: {} at offset {}: dimension {} is {}, too large", name_, where, ne_offset,
                     d, ne);
            }
            t.ne[d] = static_cast<int64_t>(ne);
        }
        uint64_t type_offset = cur.offset();
        uint32_t raw_type = cur.read<uint32_t>(where + " type");
        t.format = find_format(raw_type);
        if (t.format == nullptr) {
            fail("{}: {} at offset {}: unknown ggml type id {}", name_, where, type_offset,
                 raw_type);
        }
        t.type = t.format->type;
        if (t.ne[0] % t.format->block_size != 0) {
            fail("{}: {} at offset {}: row length {} is not a multiple of the {} block size {}",
                 name_, where, dims_offset, t.ne[0], t.format->name, t.format->block_size);
        }
        // Size in bytes, refusing overflow: rows * row_bytes must stay below 2^63.
        constexpr uint64_t kLimit = static_cast<uint64_t>(INT64_MAX);
        uint64_t elements = 1;
        for (int d = 0; d < kGgufMaxDims; ++d) {
            uint64_t ne = static_cast<uint64_t>(t.ne[d]);
            if (ne != 0 && elements > kLimit / ne) {
                fail("{}: {} at offset {}: element count overflows", name_, where, dims_offset);
            }
            elements *= ne;
        }
        uint64_t blocks = elements / static_cast<uint64_t>(t.format->block_size);
        if (blocks != 0 && t.format->block_bytes > kLimit / blocks) {
            fail("{}: {} at offset {}: byte size overflows", name_, where, dims_offset);
        }
        t.n_bytes = blocks * t.format->block_bytes;
        uint64_t off_offset = cur.offset();
        uint64_t rel = cur.read<uint64_t>(where + " offset");
        if (rel % alignment_ != 0) {
            fail("{}: {} at offset {}: data offset {} is not a multiple of the alignment {}",
                 name_, where, off_offset, rel, alignment_);
        }
        relative_offsets.push_back(rel);
        tensor_index_.emplace(name, tensors_.size());
        tensors_.push_back(t);
    }

    // Data section: aligned start; every tensor inside it, none overlapping.
    uint64_t info_end = cur.offset();
    data_offset_ = (info_end + alignment_ - 1) / alignment_ * alignment_;
    if (data_offset_ < info_end) fail("{}: data section offset overflows", name_);
    if (!tensors_.empty() && data_offset_ > size_) {
        fail("{}: data section at offset {} starts past the end of the file ({} bytes)", name_,
             data_offset_, size_);
    }
    uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
    uint64_t tensor_bytes = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        GgufTensor& t = tensors_[i];
        uint64_t rel = relative_offsets[i];
        if (rel > data_size || t.n_bytes > data_size - rel) {
            fail("{}: tensor '{}' at data offset {} with {} bytes runs past the end of the file "
                 "(data section holds {} bytes from offset {})",
                 name_, printable(t.name), rel, t.n_bytes, data_size, data_offset_);
        }
        t.offset = data_offset_ + rel;
        t.data = base_ + t.offset;
        tensor_bytes += t.n_bytes;
    }
    std::vector<size_t> order(tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
        const GgufTensor& prev = tensors_[order[k - 1]];
        const GgufTensor& next = tensors_[order[k]];
        if (prev.offset + prev.n_bytes > next.offset && next.n_bytes != 0 && prev.n_bytes != 0) {
            fail("{}: tensor '{}' at offset {} overlaps tensor '{}' (offset {}, {} bytes)", name_,
                 printable(next.name), next.offset, printable(prev.name), prev.offset,
                 prev.n_bytes);
        }
    }
    parts_ = {GgufPart{name_, base_, size_, tensors_.size(), tensor_bytes, image_ && image_->mapped()}};
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string_view GgufFile::architecture() const {
    const GgufValue* v = find("general.architecture");
    return v != nullptr && v->type == GgufValueType::kString ? v->string : std::string_view();
}

const GgufValue& GgufFile::require(std::string_view key, GgufValueType type) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("{}: missing metadata key '{}'", name_, key);
    if (v->type != type) {
        fail("{}: metadata key '{}' has type {}, expected {}", name_, key, gguf_type_name(v->type),
             gguf_type_name(type));
    }
    return *v;
}

const GgufValue& GgufFile::require_array(std::string_view key, GgufValueType elem_type) const {
    const GgufValue& v = require(key, GgufValueType::kArray);
    if (v.elem_type != elem_type) {
        fail("{}: metadata key '{}' is an array of {}, expected an array of {}", name_, key,
             gguf_type_name(v.elem_type), gguf_type_name(elem_type));
    }
    return v;
}

std::optional<int64_t> GgufFile::find_int(std::string_view key, int64_t lo, int64_t hi) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::nullopt;
    std::optional<int64_t> x = v->as_int64();
    if (!x) {
        fail("{}: metadata key '{}' has type {}, expected an integer", name_, key,
             gguf_type_name(v->type));
    }
    if (*x < lo || *x > hi) {
        fail("{}: metadata key '{}' is {}, outside the valid range [{}, {}]", name_, key, *x, lo,
             hi);
    }
    return x;
}

int64_t GgufFile::get_int(std::string_view key, int64_t lo, int64_t hi) const {
    std::optional<int64_t> x = find_int(key, lo, hi);
    if (!x) fail("{}: missing metadata key '{}'", name_, key);
    return *x;
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::nullopt;
    std::optional<double> x = v->as_double();
    if (!x) {
        fail("{}: metadata key '{}' has type {}, expected f32 or f64", name_, key,
             gguf_type_name(v->type));
    }
    if (!std::isfinite(*x)) fail("{}: metadata key '{}' is not finite", name_, key);
    return x;
}

double GgufFile::get_float(std::string_view key) const {
    std::optional<double> x = find_float(key);
    if (!x) fail("{}: missing metadata key '{}'", name_, key);
    return *x;
}

const std::vector<std::string_view>& GgufFile::get_string_array(std::string_view key) const {
    return require_array(key, GgufValueType::kString).strings;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
    const GgufValue& v = require(key, GgufValueType::kArray);
    GgufValue probe;
    probe.type = v.elem_type;
    if (!probe.is_integer()) {
        fail("{}: metadata key '{}' is an array of {}, expected integers", name_, key,
             gguf_type_name(v.elem_type));
    }
    std::vector<int64_t> out(v.count);
    for (uint64_t i = 0; i < v.count; ++i) out[i] = v.int_at(i);
    return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
    const GgufValue& v = require(key, GgufValueType::kArray);
    if (v.elem_type != GgufValueType::kF32 && v.elem_type != GgufValueType::kF64) {
        fail("{}: metadata key '{}' is an array of {}, expected f32 or f64", name_, key,
             gguf_type_name(v.elem_type));
    }
    std::vector<double> out(v.count);
    for (uint64_t i = 0; i < v.count; ++i) out[i] = v.double_at(i);
    return out;
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufValueType::kU8:
        case GgufValueType::kI8:
        case GgufValueType::kU16:
        case GgufValueType::kI16:
        case GgufValueType::kU32:
        case GgufValueType::kI32:
        case GgufValueType::kU64:
        case GgufValueType::kI64:
        case GgufValueType::kBool: return true;
        default: return false;
    }
}

namespace {
int64_t read_int(GgufValueType type, const uint8_t* p) {
    auto get = [p](auto v) {
        std::memcpy(&v, p, sizeof(v));
        return v;
    };
    switch (type) {
        case GgufValueType::kU8: return get(uint8_t{});
        case GgufValueType::kI8: return get(int8_t{});
        case GgufValueType::kU16: return get(uint16_t{});
        case GgufValueType::kI16: return get(int16_t{});
        case GgufValueType::kU32: return get(uint32_t{});
        case GgufValueType::kI32: return get(int32_t{});
        case GgufValueType::kBool: return get(uint8_t{});
        case GgufValueType::kI64: return get(int64_t{});
        case GgufValueType::kU64: {
            uint64_t v = get(uint64_t{});
            return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
        }
        default: return 0;
    }
}
double read_double(GgufValueType type, const uint8_t* p) {
    if (type == GgufValueType::kF32) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
    }
    double v;
    std::memcpy(&v, p, 8);
    return v;
}
}  // namespace

std::optional<int64_t> GgufValue::as_int64() const {
    if (!is_integer()) return std::nullopt;
    return read_int(type, data);
}

int64_t GgufValue::int_at(uint64_t i) const {
    return read_int(elem_type, data + i * gguf_scalar_size(elem_type));
}

std::optional<double> GgufValue::as_double() const {
    if (type != GgufValueType::kF32 && type != GgufValueType::kF64) return std::nullopt;
    return read_double(type, data);
}

double GgufValue::double_at(uint64_t i) const {
    return read_double(elem_type, data + i * gguf_scalar_size(elem_type));
}

std::string GgufTensor::shape_string() const {
    std::string s = "[";
    for (int d = 0; d < n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", ne[d]);
    return s + "]";
}

namespace {
std::string quoted(std::string_view s, size_t max_chars) {
    std::string out = "\"";
    size_t n = 0;
    for (char c : s) {
        if (n++ >= max_chars) {
            out += "...";
            break;
        }
        unsigned char u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (u < 0x20) {
            out += fmt::format("\\x{:02x}", u);
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string scalar_string(GgufValueType type, const uint8_t* p) {
    switch (type) {
        case GgufValueType::kF32:
        case GgufValueType::kF64: return fmt::format("{}", read_double(type, p));
        case GgufValueType::kBool: return p[0] ? "true" : "false";
        case GgufValueType::kU64: {
            uint64_t v;
            std::memcpy(&v, p, 8);
            return fmt::format("{}", v);
        }
        default: return fmt::format("{}", read_int(type, p));
    }
}
}  // namespace

std::string gguf_value_to_string(const GgufValue& value, size_t max_items) {
    if (value.type == GgufValueType::kString) return quoted(value.string, 200);
    if (value.type != GgufValueType::kArray) return scalar_string(value.type, value.data);
    std::string out = "[";
    uint64_t shown = std::min<uint64_t>(value.count, max_items);
    for (uint64_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        if (value.elem_type == GgufValueType::kString) {
            out += quoted(value.strings[i], 40);
        } else {
            out += scalar_string(value.elem_type,
                                 value.data + i * gguf_scalar_size(value.elem_type));
        }
    }
    if (shown < value.count) out += fmt::format(", ... {} items", value.count);
    return out + "]";
}

}  // namespace tandem
