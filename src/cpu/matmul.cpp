// Matrix times activation rows over any weight format.
#include "cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "base/error.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

// Work items per thread and product: the last item is the only imbalance, and every item is a
// fresh run of rows for the prefetchers.
constexpr int64_t kItemsPerThread = 4;
// Weight bytes a tile with many columns keeps in L2 while it runs through the column groups.
constexpr size_t kBlockBytes = 64 << 10;
// Products in one group (matmul_group keeps its bookkeeping on the stack).
constexpr size_t kMaxJobs = 512;  // MLA's per-head products: one job per head

void check(const WeightMatrix& w, const ActivationRows& a) {
    if (a.format != w.format->dot_type || a.cols != w.cols) {
        fail("matmul: activation is {} x {} values, the {} weight needs {} x {}",
             format_of(a.format).name, a.cols, w.format->name, format_of(w.format->dot_type).name,
             w.cols);
    }
    if (kernels().dot[type_id(w.format->type)] == nullptr) {
        fail("no {} kernel for weights of type {}", kernels().name, w.format->name);
    }
}

}  // namespace

void matmul_rows(const WeightMatrix& w, const ActivationRows& a, int64_t r0, int64_t r1, float* y,
                 size_t y_stride) {
    DotTileFn dot = kernels().dot[type_id(w.format->type)];
    // One column group reads the rows once; more columns run over row blocks that stay in L2.
    const int64_t block =
        a.n_rows <= kMaxTileCols
            ? r1 - r0
            : std::max<int64_t>(16, static_cast<int64_t>(kBlockBytes / w.row_bytes));
    for (int64_t b0 = r0; b0 < r1; b0 += block) {
        const int64_t b1 = std::min(r1, b0 + block);
        for (int c0 = 0; c0 < a.n_rows; c0 += kMaxTileCols) {
            const int n_cols = std::min(kMaxTileCols, a.n_rows - c0);
            dot(w.cols, w.row(b0), w.row_bytes, static_cast<int>(b1 - b0), a.row(c0), a.row_bytes,
                n_cols, y + c0 * y_stride + b0, y_stride);
        }
    }
    if (w.scale != 1.0f) {
        for (int c = 0; c < a.n_rows; ++c) {
            float* out = y + c * y_stride;
            for (int64_t r = r0; r < r1; ++r) out[r] *= w.scale;
        }
    }
}

int64_t matmul_chunk_rows(int64_t rows, int n_threads) {
    // Multiples of 16 rows: f32 outputs of two items never share a 64-byte line.
    const int64_t chunk = rows / (kItemsPerThread * static_cast<int64_t>(n_threads));
    return std::max<int64_t>(16, (chunk + 15) / 16 * 16);
}

void matmul_group(std::span<const MatmulJob> jobs, ThreadPool& pool) {
    if (jobs.size() > kMaxJobs) fail("matmul: more than {} products in one group", kMaxJobs);
    int64_t chunk[kMaxJobs], first_item[kMaxJobs + 1];
    first_item[0] = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
        check(*jobs[j].w, *jobs[j].a);
        chunk[j] = matmul_chunk_rows(jobs[j].w->rows, pool.size());
        first_item[j + 1] = first_item[j] + (jobs[j].w->rows + chunk[j] - 1) / chunk[j];
    }
    const int64_t n_items = first_item[jobs.size()];
    auto item = [&](int64_t i) {
        const size_t j = static_cast<size_t>(std::upper_bound(first_item + 1, first_item + jobs.size() + 1, i) -
                                             (first_item + 1));
        const MatmulJob& job = jobs[j];
        const int64_t r0 = (i - first_item[j]) * chunk[j];
        matmul_rows(*job.w, *job.a, r0, std::min(job.w->rows, r0 + chunk[j]), job.y, job.y_stride);
    };
    if (pool.size() == 1 || n_items == 1) {
        for (int64_t i = 0; i < n_items; ++i) item(i);
        return;
    }
    std::atomic<int64_t> next{0};
    pool.run([&](int) {
        for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) item(i);
    });
}

void matmul(const WeightMatrix& w, const ActivationRows& a, float* y, size_t y_stride,
            ThreadPool& pool) {
    const MatmulJob job{&w, &a, y, y_stride};
    matmul_group(std::span<const MatmulJob>(&job, 1), pool);
}

}  // namespace tandem
