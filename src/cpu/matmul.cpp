// Matrix times activation rows over any weight format.
#include "cpu/matmul.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/kernel_table.h"

namespace tandem {

void matmul_rows(const WeightMatrix& w, const ActivationRows& a, int64_t r0, int64_t r1, float* y,
                 size_t y_stride) {
    DotTileFn dot = kernels().dot[type_id(w.format->type)];
    for (int c0 = 0; c0 < a.n_rows; c0 += kMaxTileCols) {
        int n_cols = std::min(kMaxTileCols, a.n_rows - c0);
        dot(w.cols, w.row(r0), w.row_bytes, static_cast<int>(r1 - r0), a.row(c0), a.row_bytes,
            n_cols, y + c0 * y_stride + r0, y_stride);
    }
    if (w.scale != 1.0f) {
        for (int c = 0; c < a.n_rows; ++c) {
            float* out = y + c * y_stride;
            for (int64_t r = r0; r < r1; ++r) out[r] *= w.scale;
        }
    }
}

int64_t matmul_chunk_rows(int64_t rows, int n_threads) {
    int64_t chunk = rows / (4 * static_cast<int64_t>(n_threads));
    return std::clamp<int64_t>(chunk, 4, 64);
}

void matmul(const WeightMatrix& w, const ActivationRows& a, float* y, size_t y_stride,
            ThreadPool& pool) {
    if (a.format != w.format->dot_type || a.cols != w.cols) {
        fail("matmul: activation is {} x {} values, the {} weight needs {} x {}",
             format_of(a.format).name, a.cols, w.format->name, format_of(w.format->dot_type).name,
             w.cols);
    }
    if (kernels().dot[type_id(w.format->type)] == nullptr) {
        fail("no {} kernel for weights of type {}", kernels().name, w.format->name);
    }
    const int64_t chunk = matmul_chunk_rows(w.rows, pool.size());
    pool.parallel_for(w.rows, chunk, [&](int64_t r0, int64_t r1, int) {
        matmul_rows(w, a, r0, r1, y, y_stride);
    });
}

}  // namespace tandem
