// Matrix times activation rows over any weight format, through the chosen kernel variant:
// y[t][r] = scale · Σ_k W[r][k] · x[t][k]. Threads split the weight rows; each thread reads its
// rows once for all the tokens (small-matmul tiles of up to kMaxTileCols tokens).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "cpu/activation_rows.h"
#include "cpu/weight_matrix.h"

namespace tandem {

// One product of a group: y (a.n_rows rows of y_stride floats) = a · wᵀ.
struct MatmulJob {
    const WeightMatrix* w = nullptr;
    const ActivationRows* a = nullptr;
    float* y = nullptr;
    size_t y_stride = 0;
};

// All rows, split over the pool. y has a.n_rows rows of y_stride floats.
void matmul(const WeightMatrix& w, const ActivationRows& a, float* y, size_t y_stride,
            ThreadPool& pool);

// Several products in one job of the pool (one start and one join for all of them, e.g. the
// q, k and v projections of one input).
void matmul_group(std::span<const MatmulJob> jobs, ThreadPool& pool);

// Rows [r0, r1) on the calling thread only: the building block of executors that schedule
// their own work.
void matmul_rows(const WeightMatrix& w, const ActivationRows& a, int64_t r0, int64_t r1, float* y,
                 size_t y_stride);

// Rows per work item so that every thread gets several items (balance) while each item still
// streams a long run of weight rows (every new run costs the prefetchers a restart).
int64_t matmul_chunk_rows(int64_t rows, int n_threads);

}  // namespace tandem
