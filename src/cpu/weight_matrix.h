// Weights as views: a matrix read in place (rows of `cols` values in one ggml format, `row_bytes`
// apart, times an optional second-level scale from NVFP4 `.scale` tensors) and a small f32
// vector (a norm, a bias). The memory belongs to whoever made the view: the model's mapping, or
// a backend's copy (device memory for the GPU backend).
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/format_table.h"

namespace tandem {

struct WeightMatrix {
    const FormatTraits* format = nullptr;
    const uint8_t* data = nullptr;
    int64_t cols = 0;       // values per row (the input width)
    int64_t rows = 0;       // output width
    size_t row_bytes = 0;   // stride between rows
    // Per-tensor second-level scale: y = (x · Wᵀ) · scale. 1 for everything but NVFP4 files.
    float scale = 1.0f;

    bool empty() const { return data == nullptr; }
    const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
    // Rows [first, first + count) as their own matrix (one expert of a stacked tensor).
    WeightMatrix slice_rows(int64_t first, int64_t count) const {
        WeightMatrix m = *this;
        m.data = row(first);
        m.rows = count;
        return m;
    }
};

// n f32 values: a norm's weights, a bias, rope frequency factors.
struct WeightVector {
    const float* data = nullptr;
    int64_t size = 0;

    bool empty() const { return data == nullptr; }
};

}  // namespace tandem
