// Copies metadata values and tensors from a parsed GGUF file into a writer.
#include "gguf/gguf_copy.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_split.h"

namespace tandem {
namespace {

template <typename T>
void copy_array(GgufWriter& w, std::string_view key, const GgufValue& v) {
    std::vector<T> items(v.count);
    for (uint64_t i = 0; i < v.count; ++i) items[i] = v.template scalar_at<T>(i);
    w.set_array<T>(key, items);
}

template <typename T>
void copy_scalar(GgufWriter& w, std::string_view key, const GgufValue& v) {
    w.set<T>(key, v.template scalar_at<T>(0));
}

}  // namespace

void copy_value(GgufWriter& w, std::string_view key, const GgufValue& v) {
    using V = GgufValueType;
    switch (v.type) {
        case V::kU8: return copy_scalar<uint8_t>(w, key, v);
        case V::kI8: return copy_scalar<int8_t>(w, key, v);
        case V::kU16: return copy_scalar<uint16_t>(w, key, v);
        case V::kI16: return copy_scalar<int16_t>(w, key, v);
        case V::kU32: return copy_scalar<uint32_t>(w, key, v);
        case V::kI32: return copy_scalar<int32_t>(w, key, v);
        case V::kU64: return copy_scalar<uint64_t>(w, key, v);
        case V::kI64: return copy_scalar<int64_t>(w, key, v);
        case V::kF32: return copy_scalar<float>(w, key, v);
        case V::kF64: return copy_scalar<double>(w, key, v);
        case V::kBool: return w.set<bool>(key, v.data[0] != 0);
        case V::kString: return w.set_string(key, v.string);
        case V::kArray: break;
    }
    switch (v.elem_type) {
        case V::kU8: return copy_array<uint8_t>(w, key, v);
        case V::kI8: return copy_array<int8_t>(w, key, v);
        case V::kU16: return copy_array<uint16_t>(w, key, v);
        case V::kI16: return copy_array<int16_t>(w, key, v);
        case V::kU32: return copy_array<uint32_t>(w, key, v);
        case V::kI32: return copy_array<int32_t>(w, key, v);
        case V::kU64: return copy_array<uint64_t>(w, key, v);
        case V::kI64: return copy_array<int64_t>(w, key, v);
        case V::kF32: return copy_array<float>(w, key, v);
        case V::kF64: return copy_array<double>(w, key, v);
        case V::kBool: {
            std::vector<bool> items(v.count);
            for (uint64_t i = 0; i < v.count; ++i) items[i] = v.data[i] != 0;
            return w.set_array(key, items);
        }
        case V::kString: {
            std::vector<std::string> items(v.strings.begin(), v.strings.end());
            return w.set_string_array(key, items);
        }
        case V::kArray: break;
    }
    fail("gguf copy: key '{}' has an array of arrays", key);
}

GgufWriter copy_gguf(const GgufFile& file, const GgufEdit& edit) {
    GgufWriter w(file.alignment(), file.version());
    // The parts of a split model joined are copied as one whole model, without the split keys.
    const bool joined = file.parts().size() > 1;
    for (const GgufKeyValue& kv : file.metadata()) {
        if (kv.key == "general.alignment" || !edit.keep_key(kv.key)) continue;
        if (joined && (kv.key == split_keys::kNo || kv.key == split_keys::kCount ||
                       kv.key == split_keys::kTensorsCount)) {
            continue;
        }
        copy_value(w, kv.key, kv.value);
    }
    edit.add_keys(w);
    for (const GgufTensor& t : file.tensors()) {
        if (!edit.keep_tensor(t)) continue;
        const uint8_t* data = t.data;
        std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
        w.add_tensor(t.name, t.type, ne, [data](uint8_t* dst, size_t n) { std::memcpy(dst, data, n); });
    }
    return w;
}

}  // namespace tandem
