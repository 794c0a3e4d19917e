// A weight matrix read in place from host memory: rows of `cols` values in one ggml format,
// `row_bytes` apart, times an optional second-level scale (NVFP4 `.scale` tensors).
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

}  // namespace tandem
