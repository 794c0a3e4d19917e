// Activation rows converted into the formats that weights' dot products take (q8_0, q8_1,
// q8_K, f16, bf16, f32), each at most once per input: every matrix multiplied by the same input
// reuses the conversion (DESIGN.md: quantize an activation row once per format).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "formats/format_table.h"

namespace tandem {

// Rows of one activation format.
struct ActivationRows {
    GgmlType format = GgmlType::kF32;
    int64_t cols = 0;
    int n_rows = 0;
    size_t row_bytes = 0;
    const uint8_t* data = nullptr;
    const uint8_t* row(int r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

class ActivationSet {
public:
    // Sizes the buffers for up to max_rows rows of up to max_cols values (allocation happens
    // here, never on the hot path).
    void reserve(int max_rows, int64_t max_cols);

    // A new input: rows x[0..n_rows) with a stride of x_stride floats, `cols` values each.
    // Earlier conversions are forgotten.
    void reset(const float* x, size_t x_stride, int n_rows, int64_t cols);

    // The input in `format`, converted on first request (in parallel over rows when a pool is
    // given).
    const ActivationRows& get(GgmlType format, ThreadPool* pool = nullptr);

private:
    struct Slot {
        bool valid = false;
        GgmlType format = GgmlType::kF32;
        std::vector<uint8_t> buffer;
        ActivationRows rows;
    };
    std::array<Slot, 6> slots_;
    const float* x_ = nullptr;
    size_t x_stride_ = 0;
    int n_rows_ = 0;
    int64_t cols_ = 0;
    int max_rows_ = 0;
    int64_t max_cols_ = 0;
};

}  // namespace tandem
