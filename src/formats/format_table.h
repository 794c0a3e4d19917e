// The format table: everything code needs to know about a ggml type, indexed by its id.
// Code outside formats/ never switches on a type; it looks the type up here (DESIGN.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "formats/ggml_type.h"

namespace tandem {

enum class FormatKind {
    kFloat,       // F32, F16, BF16, F64: element = one value
    kQuantized,   // block formats used for weights
    kActivation,  // Q8_1, Q8_K: only as the activation side of a dot product
    kInteger,     // I8..I64: plain integers (not weights)
};

// src holds n / block_size blocks; n is a multiple of block_size.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
// Quantizes n floats (a multiple of block_size) into blocks. For the activation formats
// (q8_0, q8_1, q8_K) the bytes are identical to ggml's; for weight formats it is a simple,
// valid quantizer (used by `tandem synth`).
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// Scalar reference dot product of n weight values (weight format) with n activation values
// (stored in the format's dot_type). Integer products are summed exactly per block and the
// scaled block sums accumulated in double: the value every optimized kernel is checked against.
using RefDotFn = double (*)(int64_t n, const void* weights, const void* activation);
// Writes random but valid blocks (for formats without a simple quantizer, such as IQ*):
// `seed` selects the stream; values have roughly unit scale times `scale`.
using RandomBlocksFn = void (*)(void* dst, int64_t n_blocks, uint64_t seed, float scale);

struct FormatTraits {
    GgmlType type;
    std::string_view name;  // ggml's name, e.g. "q4_K"
    FormatKind kind;
    int64_t block_size;     // values per block
    size_t block_bytes;     // bytes per block
    GgmlType dot_type;      // activation format of its dot product (ggml's vec_dot_type)
    DequantizeRowFn dequantize_row;
    QuantizeRowFn quantize_row;       // nullptr where no simple quantizer exists
    RefDotFn ref_dot;                 // nullptr for formats that are never weights
    RandomBlocksFn random_blocks;     // nullptr for float and integer formats
};

// The entry for a known type (every GgmlType enumerator has one).
const FormatTraits& format_of(GgmlType type);
// The entry for a raw id from a file, or nullptr for an unknown id.
const FormatTraits* find_format(uint32_t id);
// Case-insensitive lookup by ggml name ("q4_k" finds Q4_K), or nullptr.
const FormatTraits* find_format(std::string_view name);
// Every known format, in id order.
std::span<const FormatTraits> all_formats();

// Bytes of a row of n values; n must be a multiple of the block size.
inline size_t row_bytes(const FormatTraits& f, int64_t n) {
    return static_cast<size_t>(n / f.block_size) * f.block_bytes;
}
inline size_t row_bytes(GgmlType type, int64_t n) { return row_bytes(format_of(type), n); }

}  // namespace tandem
