// GGUF metadata value types.
#include "gguf/gguf_types.h"

namespace tandem {

std::string_view gguf_type_name(GgufValueType type) {
    switch (type) {
        case GgufValueType::kU8: return "u8";
        case GgufValueType::kI8: return "i8";
        case GgufValueType::kU16: return "u16";
        case GgufValueType::kI16: return "i16";
        case GgufValueType::kU32: return "u32";
        case GgufValueType::kI32: return "i32";
        case GgufValueType::kF32: return "f32";
        case GgufValueType::kBool: return "bool";
        case GgufValueType::kString: return "string";
        case GgufValueType::kArray: return "array";
        case GgufValueType::kU64: return "u64";
        case GgufValueType::kI64: return "i64";
        case GgufValueType::kF64: return "f64";
    }
    return "unknown";
}

size_t gguf_scalar_size(GgufValueType type) {
    switch (type) {
        case GgufValueType::kU8:
        case GgufValueType::kI8:
        case GgufValueType::kBool: return 1;
        case GgufValueType::kU16:
        case GgufValueType::kI16: return 2;
        case GgufValueType::kU32:
        case GgufValueType::kI32:
        case GgufValueType::kF32: return 4;
        case GgufValueType::kU64:
        case GgufValueType::kI64:
        case GgufValueType::kF64: return 8;
        case GgufValueType::kString:
        case GgufValueType::kArray: return 0;
    }
    return 0;
}

}  // namespace tandem
