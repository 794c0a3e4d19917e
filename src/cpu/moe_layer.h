// The routed experts of one MoE layer as the executor sees them: stacked expert tensors read in
// place, with optional per-expert second-level scales (NVFP4) and biases.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/elementwise.h"
#include "cpu/weight_matrix.h"

namespace tandem {

// One projection of every expert: expert e's `matrix.rows` rows start at
// matrix.data + e * expert_stride. A fused gate_up tensor gives two of these over the same
// bytes (gate: rows [0, F), up: rows [F, 2F) of each expert).
struct ExpertMatrix {
    WeightMatrix matrix;        // expert 0; matrix.scale is unused (see scales)
    size_t expert_stride = 0;   // bytes between experts
    const float* scales = nullptr;  // [n_expert] second-level scales, or nullptr
    const float* bias = nullptr;    // [n_expert][matrix.rows], or nullptr
    int64_t bias_stride = 0;        // floats between experts' bias rows

    WeightMatrix expert(int e) const {
        WeightMatrix m = matrix;
        m.data = matrix.data + static_cast<size_t>(e) * expert_stride;
        m.scale = scales != nullptr ? scales[e] : 1.0f;
        return m;
    }
    const float* expert_bias(int e) const { return bias == nullptr ? nullptr : bias + e * bias_stride; }
};

struct MoeLayer {
    int n_expert = 0;
    int64_t n_embd = 0;  // hidden width: gate/up columns, down rows
    int64_t n_ff = 0;    // expert FFN width: gate/up rows, down columns
    ExpertMatrix gate, up, down;
    GluKind activation = GluKind::kSilu;
};

// One routed expert of one token: expert id (-1: taken elsewhere, skipped) and its weight.
struct Route {
    int32_t expert = -1;
    float weight = 0.0f;
};

}  // namespace tandem
