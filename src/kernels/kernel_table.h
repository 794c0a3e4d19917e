// The CPU kernel contract: one table per instruction-set variant, chosen once at start-up.
// Each variant is the same kernel sources compiled with that variant's flags into its own
// namespace; nothing built with variant flags runs before the variant is chosen (DESIGN.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/cpu_features.h"
#include "formats/ggml_type.h"

namespace tandem {

// A dot-product tile: n_rows consecutive weight rows (w, w + w_stride, ...) of k values in the
// weight format, times n_cols activation rows (a, a + a_stride, ...) of k values in the weight
// format's dot type, gives out[c * out_stride + r] for r < n_rows, c < n_cols.
// n_cols is 1 (the matvec tile) up to kMaxTileCols (the small-matmul tile: each weight block is
// loaded once for all columns). k is a multiple of the weight format's block size.
using DotTileFn = void (*)(int64_t k, const uint8_t* w, size_t w_stride, int n_rows,
                           const uint8_t* a, size_t a_stride, int n_cols, float* out,
                           size_t out_stride);

// Converts one f32 activation row of k values into an activation format (q8_0, q8_1, q8_K,
// f16, bf16 or f32), bit-identical to the format table's reference quantizer.
using ActQuantizeFn = void (*)(const float* x, void* dst, int64_t k);

// One token of the gated delta rule for one head (qwen3.5's linear attention, as ggml's
// gated_delta_net computes it): the head's state M (S × S floats, M[j·S + i] = state[i][j])
// decays by `decay`; delta[j] = (v[j] - Σ_i M[j·S + i] k[i]) · beta; M[j·S + i] += k[i] · delta[j];
// out[j] = (Σ_i M[j·S + i] q[i]) · scale. The sums are the variant's f32 dot tiles (as
// ggml_vec_dot_f32); the element-wise passes over M take the variant's vectors (and its fused
// multiply-add, as ggml_vec_mad_f32). delta: S floats of scratch.
using DeltaRuleStepFn = void (*)(float* M, int S, const float* q, const float* k, const float* v,
                                 float decay, float beta, float scale, float* out, float* delta);

constexpr int kMaxTileCols = 8;

// How far ahead of its reads a streaming matvec prefetches each line (why: variant/tile.h); the
// benchmark's STREAM-style read prefetches the same way.
constexpr int kStreamAhead = 6144;

struct KernelTable {
    std::string_view name;
    DotTileFn dot[kGgmlTypeIdLimit];           // by weight type id; nullptr: not a weight type
    ActQuantizeFn quantize[kGgmlTypeIdLimit];  // by activation type id
    DeltaRuleStepFn delta_rule_step;
};

struct KernelVariant {
    std::string_view name;
    std::string_view description;
    // 0 when the CPU (or the OS register state) lacks something the variant needs; higher is
    // better among the variants that can run.
    int (*score)(const CpuFeatures& cpu);
    const KernelTable* (*table)();
};

// Every variant built into this binary, best last.
std::span<const KernelVariant> kernel_variants();

// The variant in use: the best-scoring one, or TANDEM_CPU_VARIANT=name (an Error when the CPU
// cannot run it or the name is unknown). Chosen and logged on first call.
const KernelVariant& chosen_kernel_variant();
inline const KernelTable& kernels() {
    return *chosen_kernel_variant().table();
}

// The variant of that name, or nullptr.
const KernelVariant* find_kernel_variant(std::string_view name);

}  // namespace tandem
