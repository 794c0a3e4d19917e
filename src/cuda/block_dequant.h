// Dequantization of 8 values at a time of every GGUF weight format, for CUDA device code (the
// matrix kernels read blocks in place) and host C++ alike; bit-identical to src/formats/.
//
// Per format T, BlockFormat<T> has kValues (values per block; 8 for the float formats), kBytes
// and chunk8(block, chunk, out, tables), which writes values [8 chunk, 8 chunk + 8) of the block.
// Loads assume only the alignment the block size guarantees (rows at multiples of the row size
// from a 256-aligned base); each format's comment names the widths it uses.
//
// Float order: the same operations in the same order as formats/, each rounded on its own;
// device code uses __fmul_rn / __fadd_rn, which nvcc never fuses into an FMA. (Every product
// here is exact anyway, an fp16 or E8M0/UE4M3 scale times integers of at most 13 bits in all,
// so a fused x * d + m would round the same; the test cannot tell them apart.) Device builds
// must keep denormals (no -ftz=true, so no --use_fast_math): E8M0 exponents 0 and 1 give
// subnormal scales. A NaN scale gives a NaN with another payload on the GPU (its canonical
// NaN), which the host's NaN propagation does not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "cuda/block_dequant_common.h"
#include "cuda/block_dequant_float.h"
#include "cuda/block_dequant_iq.h"
#include "cuda/block_dequant_k.h"
#include "cuda/block_dequant_legacy.h"
#include "cuda/block_dequant_lowbit.h"
#include "formats/iq_tables.h"

namespace tandem::gpu {

// Every weight format (kind kFloat or kQuantized in formats/format_table.cpp), in id order.
inline constexpr GgmlType kGpuWeightFormats[] = {
    GgmlType::kF32,   GgmlType::kF16,    GgmlType::kQ4_0,    GgmlType::kQ4_1,   GgmlType::kQ5_0,
    GgmlType::kQ5_1,  GgmlType::kQ8_0,   GgmlType::kQ2_K,    GgmlType::kQ3_K,   GgmlType::kQ4_K,
    GgmlType::kQ5_K,  GgmlType::kQ6_K,   GgmlType::kIQ2_XXS, GgmlType::kIQ2_XS, GgmlType::kIQ3_XXS,
    GgmlType::kIQ1_S, GgmlType::kIQ4_NL, GgmlType::kIQ3_S,   GgmlType::kIQ2_S,  GgmlType::kIQ4_XS,
    GgmlType::kF64,   GgmlType::kIQ1_M,  GgmlType::kBF16,    GgmlType::kTQ1_0,  GgmlType::kTQ2_0,
    GgmlType::kMXFP4, GgmlType::kNVFP4,  GgmlType::kQ1_0,    GgmlType::kQ2_0,
};
inline constexpr size_t kGpuWeightFormatCount = sizeof kGpuWeightFormats / sizeof(GgmlType);

// A weight format as a type, for generic code: f(FormatTag<T>{}) per format.
template <GgmlType T>
struct FormatTag {
    static constexpr GgmlType kType = T;
    using Format = BlockFormat<T>;
};

// Calls f(FormatTag<T>{}) for every T of kGpuWeightFormats (e.g. to instantiate a kernel per
// format and pick it by type at run time).
template <typename F>
constexpr void for_each_weight_format(F&& f) {
    [&]<size_t... I>(std::index_sequence<I...>) {
        (f(FormatTag<kGpuWeightFormats[I]>{}), ...);
    }
    (std::make_index_sequence<kGpuWeightFormatCount>{});
}

// n_blocks consecutive blocks of format T, chunk by chunk.
template <GgmlType T>
TANDEM_HD void dequantize_blocks(const uint8_t* blocks, float* out, int64_t n_blocks,
                                 const DequantTables& tables) {
    using F = BlockFormat<T>;
    for (int64_t b = 0; b < n_blocks; ++b) {
        for (int c = 0; c < F::kValues / 8; ++c) {
            F::chunk8(blocks + b * F::kBytes, c, out + b * F::kValues + 8 * c, tables);
        }
    }
}

// ---------------------------------------------------------------- host side
// Plain (host) functions. They are not hidden from nvcc's device pass, which parses the host
// code of a .cu file too: a .cu file's host code may call them.

// The host's lookup tables (formats/iq_tables.h).
inline DequantTables host_dequant_tables() {
    const auto bytes = [](const auto& points) {
        return reinterpret_cast<const uint8_t*>(points.p);
    };
    return {bytes(kIq2xxsPoints), bytes(kIq2xsPoints), bytes(kIq2sPoints),
            bytes(kIq3xxsPoints), bytes(kIq3sPoints),  bytes(kIq1sPointsEighths)};
}

// One table of DequantTables: its host copy, its size, and where a DequantTables points to it.
// A device copy of every part, pointed to by the members, makes the device's DequantTables:
//   for (const DequantTablePart& part : dequant_table_parts()) {
//       cudaMemcpy(dev, part.host, part.bytes, cudaMemcpyHostToDevice);
//       device_tables.*part.member = dev;  dev += part.bytes (rounded up to 8)
//   }
struct DequantTablePart {
    using Member = const uint8_t* DequantTables::*;
    const uint8_t* host;
    size_t bytes;
    Member member;
};
inline std::span<const DequantTablePart> dequant_table_parts() {
    static const DequantTables host = host_dequant_tables();
    static const DequantTablePart kParts[] = {
        {host.iq2xxs_grid, sizeof kIq2xxsPoints.p, &DequantTables::iq2xxs_grid},
        {host.iq2xs_grid, sizeof kIq2xsPoints.p, &DequantTables::iq2xs_grid},
        {host.iq2s_grid, sizeof kIq2sPoints.p, &DequantTables::iq2s_grid},
        {host.iq3xxs_grid, sizeof kIq3xxsPoints.p, &DequantTables::iq3xxs_grid},
        {host.iq3s_grid, sizeof kIq3sPoints.p, &DequantTables::iq3s_grid},
        {host.iq1s_grid, sizeof kIq1sPointsEighths.p, &DequantTables::iq1s_grid},
    };
    static_assert(sizeof kParts / sizeof kParts[0] == sizeof(DequantTables) / sizeof(void*),
                  "a DequantTables member without a part");
    return kParts;
}

// Dequantizes a row of n values of `type` through chunk8 (tests and host use). False for a
// type that is not a weight format, or n not a multiple of its kValues.
inline bool dequantize_row_by_chunks(GgmlType type, const uint8_t* row, float* out, int64_t n,
                                     const DequantTables& tables) {
    bool done = false;
    for_each_weight_format([&](auto tag) {
        using F = typename decltype(tag)::Format;
        if (tag.kType != type || n % F::kValues != 0) return;
        dequantize_blocks<decltype(tag)::kType>(row, out, n / F::kValues, tables);
        done = true;
    });
    return done;
}

}  // namespace tandem::gpu
