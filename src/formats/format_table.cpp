// The format table: one row per ggml type (sizes from ggml-common.h; dot types from ggml-cpu's
// type traits). Functions come from the per-family files of this folder.
#include "formats/format_table.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "base/error.h"
#include "formats/quants_float.h"
#include "formats/quants_iq.h"
#include "formats/quants_k.h"
#include "formats/quants_legacy.h"
#include "formats/quants_lowbit.h"

namespace tandem {
namespace {

using K = FormatKind;
using T = GgmlType;

// clang-format off
constexpr FormatTraits kFormats[] = {
    // type       name       kind            block bytes dot_type   dequantize          quantize            ref_dot            random_blocks
    {T::kF32,     "f32",     K::kFloat,        1,   4,   T::kF32,  dequantize_f32,     quantize_f32,       ref_dot_f32,       nullptr},
    {T::kF16,     "f16",     K::kFloat,        1,   2,   T::kF16,  dequantize_f16,     quantize_f16,       ref_dot_f16,       nullptr},
    {T::kQ4_0,    "q4_0",    K::kQuantized,   32,  18,   T::kQ8_0, dequantize_q4_0,    quantize_q4_0,      ref_dot_q4_0,      random_q4_0},
    {T::kQ4_1,    "q4_1",    K::kQuantized,   32,  20,   T::kQ8_1, dequantize_q4_1,    quantize_q4_1,      ref_dot_q4_1,      random_q4_1},
    {T::kQ5_0,    "q5_0",    K::kQuantized,   32,  22,   T::kQ8_0, dequantize_q5_0,    quantize_q5_0,      ref_dot_q5_0,      random_q5_0},
    {T::kQ5_1,    "q5_1",    K::kQuantized,   32,  24,   T::kQ8_1, dequantize_q5_1,    quantize_q5_1,      ref_dot_q5_1,      random_q5_1},
    {T::kQ8_0,    "q8_0",    K::kQuantized,   32,  34,   T::kQ8_0, dequantize_q8_0,    quantize_q8_0,      ref_dot_q8_0,      random_q8_0},
    {T::kQ8_1,    "q8_1",    K::kActivation,  32,  36,   T::kQ8_1, dequantize_q8_1,    quantize_q8_1,      nullptr,           nullptr},
    {T::kQ2_K,    "q2_K",    K::kQuantized,  256,  84,   T::kQ8_K, dequantize_q2_K,    quantize_q2_K,      ref_dot_q2_K,      random_q2_K},
    {T::kQ3_K,    "q3_K",    K::kQuantized,  256, 110,   T::kQ8_K, dequantize_q3_K,    quantize_q3_K,      ref_dot_q3_K,      random_q3_K},
    {T::kQ4_K,    "q4_K",    K::kQuantized,  256, 144,   T::kQ8_K, dequantize_q4_K,    quantize_q4_K,      ref_dot_q4_K,      random_q4_K},
    {T::kQ5_K,    "q5_K",    K::kQuantized,  256, 176,   T::kQ8_K, dequantize_q5_K,    quantize_q5_K,      ref_dot_q5_K,      random_q5_K},
    {T::kQ6_K,    "q6_K",    K::kQuantized,  256, 210,   T::kQ8_K, dequantize_q6_K,    quantize_q6_K,      ref_dot_q6_K,      random_q6_K},
    {T::kQ8_K,    "q8_K",    K::kActivation, 256, 292,   T::kQ8_K, dequantize_q8_K,    quantize_q8_K,      nullptr,           nullptr},
    {T::kIQ2_XXS, "iq2_xxs", K::kQuantized,  256,  66,   T::kQ8_K, dequantize_iq2_xxs, nullptr,            ref_dot_iq2_xxs,   random_iq2_xxs},
    {T::kIQ2_XS,  "iq2_xs",  K::kQuantized,  256,  74,   T::kQ8_K, dequantize_iq2_xs,  nullptr,            ref_dot_iq2_xs,    random_iq2_xs},
    {T::kIQ3_XXS, "iq3_xxs", K::kQuantized,  256,  98,   T::kQ8_K, dequantize_iq3_xxs, nullptr,            ref_dot_iq3_xxs,   random_iq3_xxs},
    {T::kIQ1_S,   "iq1_s",   K::kQuantized,  256,  50,   T::kQ8_K, dequantize_iq1_s,   nullptr,            ref_dot_iq1_s,     random_iq1_s},
    {T::kIQ4_NL,  "iq4_nl",  K::kQuantized,   32,  18,   T::kQ8_0, dequantize_iq4_nl,  quantize_iq4_nl,    ref_dot_iq4_nl,    random_iq4_nl},
    {T::kIQ3_S,   "iq3_s",   K::kQuantized,  256, 110,   T::kQ8_K, dequantize_iq3_s,   nullptr,            ref_dot_iq3_s,     random_iq3_s},
    {T::kIQ2_S,   "iq2_s",   K::kQuantized,  256,  82,   T::kQ8_K, dequantize_iq2_s,   nullptr,            ref_dot_iq2_s,     random_iq2_s},
    {T::kIQ4_XS,  "iq4_xs",  K::kQuantized,  256, 136,   T::kQ8_K, dequantize_iq4_xs,  quantize_iq4_xs,    ref_dot_iq4_xs,    random_iq4_xs},
    {T::kI8,      "i8",      K::kInteger,      1,   1,   T::kI8,   dequantize_i8,      nullptr,            nullptr,           nullptr},
    {T::kI16,     "i16",     K::kInteger,      1,   2,   T::kI16,  dequantize_i16,     nullptr,            nullptr,           nullptr},
    {T::kI32,     "i32",     K::kInteger,      1,   4,   T::kI32,  dequantize_i32,     nullptr,            nullptr,           nullptr},
    {T::kI64,     "i64",     K::kInteger,      1,   8,   T::kI64,  dequantize_i64,     nullptr,            nullptr,           nullptr},
    {T::kF64,     "f64",     K::kFloat,        1,   8,   T::kF64,  dequantize_f64,     nullptr,            nullptr,           nullptr},
    {T::kIQ1_M,   "iq1_m",   K::kQuantized,  256,  56,   T::kQ8_K, dequantize_iq1_m,   nullptr,            ref_dot_iq1_m,     random_iq1_m},
    {T::kBF16,    "bf16",    K::kFloat,        1,   2,   T::kBF16, dequantize_bf16,    quantize_bf16,      ref_dot_bf16,      nullptr},
    {T::kTQ1_0,   "tq1_0",   K::kQuantized,  256,  54,   T::kQ8_K, dequantize_tq1_0,   quantize_tq1_0,     ref_dot_tq1_0,     random_tq1_0},
    {T::kTQ2_0,   "tq2_0",   K::kQuantized,  256,  66,   T::kQ8_K, dequantize_tq2_0,   quantize_tq2_0,     ref_dot_tq2_0,     random_tq2_0},
    {T::kMXFP4,   "mxfp4",   K::kQuantized,   32,  17,   T::kQ8_0, dequantize_mxfp4,   quantize_mxfp4,     ref_dot_mxfp4,     random_mxfp4},
    {T::kNVFP4,   "nvfp4",   K::kQuantized,   64,  36,   T::kQ8_0, dequantize_nvfp4,   quantize_nvfp4,     ref_dot_nvfp4,     random_nvfp4},
    {T::kQ1_0,    "q1_0",    K::kQuantized,  128,  18,   T::kQ8_0, dequantize_q1_0,    quantize_q1_0,      ref_dot_q1_0,      random_q1_0},
    {T::kQ2_0,    "q2_0",    K::kQuantized,   64,  18,   T::kQ8_0, dequantize_q2_0,    quantize_q2_0,      ref_dot_q2_0,      random_q2_0},
};
// clang-format on

constexpr size_t kFormatCount = sizeof(kFormats) / sizeof(kFormats[0]);

// id -> index into kFormats, or -1 for a hole.
constexpr std::array<int, kGgmlTypeIdLimit> make_index() {
    std::array<int, kGgmlTypeIdLimit> index{};
    for (auto& i : index) i = -1;
    for (size_t i = 0; i < kFormatCount; ++i) index[type_id(kFormats[i].type)] = static_cast<int>(i);
    return index;
}
constexpr std::array<int, kGgmlTypeIdLimit> kIndex = make_index();

}  // namespace

const FormatTraits* find_format(uint32_t id) {
    if (id >= kGgmlTypeIdLimit || kIndex[id] < 0) return nullptr;
    return &kFormats[kIndex[id]];
}

const FormatTraits& format_of(GgmlType type) {
    const FormatTraits* f = find_format(type_id(type));
    if (f == nullptr) fail("unknown ggml type id {}", type_id(type));
    return *f;
}

const FormatTraits* find_format(std::string_view name) {
    for (const FormatTraits& f : kFormats) {
        if (f.name.size() != name.size()) continue;
        if (std::equal(name.begin(), name.end(), f.name.begin(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) ==
                       std::tolower(static_cast<unsigned char>(b));
            })) {
            return &f;
        }
    }
    return nullptr;
}

std::span<const FormatTraits> all_formats() { return {kFormats, kFormatCount}; }

}  // namespace tandem
