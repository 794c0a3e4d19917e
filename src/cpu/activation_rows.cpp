// Activation rows converted once per format.
#include "cpu/activation_rows.h"

#include "base/error.h"
#include "kernels/kernel_table.h"

namespace tandem {

void ActivationSet::reserve(int max_rows, int64_t max_cols) {
    max_rows_ = max_rows;
    max_cols_ = max_cols;
    // f32 is the widest activation format: 4 bytes per value (q8_K: 292 bytes per 256).
    size_t bytes = static_cast<size_t>(max_rows) * static_cast<size_t>(max_cols) * 4 + 64;
    for (Slot& s : slots_) {
        s.valid = false;
        if (s.buffer.size() < bytes) s.buffer.resize(bytes);
    }
}

void ActivationSet::reset(const float* x, size_t x_stride, int n_rows, int64_t cols) {
    if (n_rows > max_rows_ || cols > max_cols_) {
        fail("activation of {} x {} exceeds the reserved {} x {}", n_rows, cols, max_rows_, max_cols_);
    }
    x_ = x;
    x_stride_ = x_stride;
    n_rows_ = n_rows;
    cols_ = cols;
    for (Slot& s : slots_) s.valid = false;
}

const ActivationRows& ActivationSet::get(GgmlType format, ThreadPool* pool) {
    Slot* free_slot = nullptr;
    for (Slot& s : slots_) {
        if (s.valid && s.format == format) return s.rows;
        if (!s.valid && free_slot == nullptr) free_slot = &s;
    }
    if (free_slot == nullptr) fail("activation set: more than {} formats requested", slots_.size());
    const FormatTraits& f = format_of(format);
    if (cols_ % f.block_size != 0) {
        fail("an activation row of {} values cannot be converted to {} (block size {})", cols_,
             f.name, f.block_size);
    }
    ActQuantizeFn quantize = kernels().quantize[type_id(format)];
    if (quantize == nullptr) fail("no activation quantizer for {}", f.name);
    Slot& s = *free_slot;
    s.format = format;
    s.rows = {format, cols_, n_rows_, row_bytes(f, cols_), s.buffer.data()};
    auto convert = [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            quantize(x_ + r * x_stride_, s.buffer.data() + r * s.rows.row_bytes, cols_);
        }
    };
    if (pool != nullptr && n_rows_ > 1) {
        pool->parallel_for(n_rows_, 1, convert);
    } else {
        convert(0, n_rows_, 0);
    }
    s.valid = true;
    return s.rows;
}

}  // namespace tandem
