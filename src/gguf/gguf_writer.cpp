// Writes GGUF files.
#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "formats/format_table.h"

namespace tandem {

GgufWriter::GgufWriter(uint32_t alignment, uint32_t version)
    : alignment_(alignment), version_(version) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        fail("gguf writer: alignment {} is not a power of two", alignment);
    }
    if (alignment != kGgufDefaultAlignment) set<uint32_t>("general.alignment", alignment);
}

void GgufWriter::append_raw(std::string& out, const void* p, size_t n) {
    out.append(static_cast<const char*>(p), n);
}

void GgufWriter::append_string(std::string& out, std::string_view s) {
    append_u64(out, s.size());
    out.append(s.data(), s.size());
}

std::string& GgufWriter::begin_kv(std::string_view key, GgufValueType type) {
    for (const std::string& k : keys_) {
        if (k == key) fail("gguf writer: metadata key '{}' set twice", key);
    }
    keys_.emplace_back(key);
    std::string out;
    append_string(out, key);
    append_u32(out, static_cast<uint32_t>(type));
    kvs_.push_back(std::move(out));
    return kvs_.back();
}

void GgufWriter::set_string(std::string_view key, std::string_view value) {
    std::string& out = begin_kv(key, GgufValueType::kString);
    append_string(out, value);
}

void GgufWriter::set_array(std::string_view key, const std::vector<bool>& values) {
    std::string& out = begin_kv(key, GgufValueType::kArray);
    append_u32(out, static_cast<uint32_t>(GgufValueType::kBool));
    append_u64(out, values.size());
    for (bool b : values) out.push_back(b ? 1 : 0);
}

void GgufWriter::set_string_array(std::string_view key, const std::vector<std::string>& values) {
    std::string& out = begin_kv(key, GgufValueType::kArray);
    append_u32(out, static_cast<uint32_t>(GgufValueType::kString));
    append_u64(out, values.size());
    for (const std::string& s : values) append_string(out, s);
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne,
                            Fill fill) {
    const FormatTraits& f = format_of(type);
    if (name.empty() || name.size() > kGgufMaxNameBytes) {
        fail("gguf writer: tensor name '{}' must have 1 to {} bytes", name, kGgufMaxNameBytes);
    }
    if (ne.empty() || ne.size() > kGgufMaxDims) {
        fail("gguf writer: tensor '{}' has {} dimensions", name, ne.size());
    }
    for (const PendingTensor& t : tensors_) {
        if (t.name == name) fail("gguf writer: tensor '{}' added twice", name);
    }
    if (ne[0] % f.block_size != 0) {
        fail("gguf writer: tensor '{}': row length {} is not a multiple of the {} block size {}",
             name, ne[0], f.name, f.block_size);
    }
    int64_t elements = 1;
    for (int64_t n : ne) elements *= n;
    uint64_t n_bytes = static_cast<uint64_t>(elements / f.block_size) * f.block_bytes;
    uint64_t offset = (data_bytes_ + alignment_ - 1) / alignment_ * alignment_;
    data_bytes_ = offset + n_bytes;
    tensors_.push_back({std::string(name), type, std::move(ne), n_bytes, offset, std::move(fill)});
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne,
                            std::vector<uint8_t> bytes) {
    auto shared = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    std::string copy(name);
    add_tensor(name, type, std::move(ne), [shared, copy](uint8_t* dst, size_t n) {
        if (shared->size() != n) {
            fail("gguf writer: tensor '{}' has {} bytes of data, its shape needs {}", copy,
                 shared->size(), n);
        }
        std::memcpy(dst, shared->data(), n);
    });
}

GgufWriter GgufWriter::part(size_t begin, size_t end, bool with_metadata) const {
    if (begin > end || end > tensors_.size()) {
        fail("gguf writer: tensors [{}, {}) of {} do not make a part", begin, end, tensors_.size());
    }
    GgufWriter out(alignment_, version_);  // sets general.alignment itself when not the default
    if (with_metadata) {
        for (size_t i = 0; i < keys_.size(); ++i) {
            if (keys_[i] == "general.alignment") continue;
            out.keys_.push_back(keys_[i]);
            out.kvs_.push_back(kvs_[i]);
        }
    }
    for (size_t i = begin; i < end; ++i) {
        const PendingTensor& t = tensors_[i];
        out.add_tensor(t.name, t.type, t.ne, t.fill);
    }
    return out;
}

std::string GgufWriter::header_bytes() const {
    std::string out;
    append_u32(out, kGgufMagic);
    append_u32(out, version_);
    append_u64(out, tensors_.size());
    append_u64(out, kvs_.size());
    for (const std::string& kv : kvs_) out += kv;
    for (const PendingTensor& t : tensors_) {
        append_string(out, t.name);
        append_u32(out, static_cast<uint32_t>(t.ne.size()));
        for (int64_t n : t.ne) append_u64(out, static_cast<uint64_t>(n));
        append_u32(out, type_id(t.type));
        append_u64(out, t.offset);
    }
    size_t padded = (out.size() + alignment_ - 1) / alignment_ * alignment_;
    out.resize(padded, '\0');
    return out;
}

void GgufWriter::emit(const std::function<void(const void*, size_t)>& sink) const {
    std::string header = header_bytes();
    sink(header.data(), header.size());
    uint64_t written = 0;
    std::vector<uint8_t> buffer;
    static const char kZeros[256] = {};
    for (const PendingTensor& t : tensors_) {
        while (written < t.offset) {
            size_t pad = static_cast<size_t>(std::min<uint64_t>(t.offset - written, sizeof kZeros));
            sink(kZeros, pad);
            written += pad;
        }
        buffer.assign(t.n_bytes, 0);
        t.fill(buffer.data(), buffer.size());
        sink(buffer.data(), buffer.size());
        written += t.n_bytes;
    }
}

void GgufWriter::write(const std::string& path) const {
    std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) fail("{}: cannot create: {}", tmp, std::strerror(errno));
    try {
        emit([&](const void* p, size_t n) {
            if (n != 0 && std::fwrite(p, 1, n, f) != n) {
                fail("{}: write failed: {}", tmp, std::strerror(errno));
            }
        });
    } catch (...) {
        std::fclose(f);
        std::remove(tmp.c_str());
        throw;
    }
    if (std::fclose(f) != 0) {
        std::remove(tmp.c_str());
        fail("{}: write failed: {}", tmp, std::strerror(errno));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        std::remove(tmp.c_str());
        fail("{}: cannot rename into place: {}", path, std::strerror(err));
    }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out;
    emit([&](const void* p, size_t n) {
        const uint8_t* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
    });
    return out;
}

}  // namespace tandem
