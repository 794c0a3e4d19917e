// GGUF metadata value types and the tensor-info record (the GGUF spec, ggml/docs/gguf.md).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "formats/ggml_type.h"

namespace tandem {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr size_t kGgufMaxNameBytes = 63;       // ggml's GGML_MAX_NAME (64) less the NUL
constexpr int kGgufMaxDims = 4;

enum class GgufValueType : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
};

// Name of a value type ("u32", "string", ...), or "unknown".
std::string_view gguf_type_name(GgufValueType type);
// Bytes of one scalar of this type; 0 for string and array.
size_t gguf_scalar_size(GgufValueType type);

// Maps a C++ type to the GGUF value type that stores it.
template <typename T>
struct GgufTypeOf;
template <> struct GgufTypeOf<uint8_t> { static constexpr GgufValueType value = GgufValueType::kU8; };
template <> struct GgufTypeOf<int8_t> { static constexpr GgufValueType value = GgufValueType::kI8; };
template <> struct GgufTypeOf<uint16_t> { static constexpr GgufValueType value = GgufValueType::kU16; };
template <> struct GgufTypeOf<int16_t> { static constexpr GgufValueType value = GgufValueType::kI16; };
template <> struct GgufTypeOf<uint32_t> { static constexpr GgufValueType value = GgufValueType::kU32; };
template <> struct GgufTypeOf<int32_t> { static constexpr GgufValueType value = GgufValueType::kI32; };
template <> struct GgufTypeOf<float> { static constexpr GgufValueType value = GgufValueType::kF32; };
template <> struct GgufTypeOf<bool> { static constexpr GgufValueType value = GgufValueType::kBool; };
template <> struct GgufTypeOf<std::string_view> { static constexpr GgufValueType value = GgufValueType::kString; };
template <> struct GgufTypeOf<uint64_t> { static constexpr GgufValueType value = GgufValueType::kU64; };
template <> struct GgufTypeOf<int64_t> { static constexpr GgufValueType value = GgufValueType::kI64; };
template <> struct GgufTypeOf<double> { static constexpr GgufValueType value = GgufValueType::kF64; };

}  // namespace tandem
