// Splits a DotTileFn call into register tiles: columns in groups of up to kMaxTileCols (each
// group size its own instantiation, so accumulators stay in registers) and rows in groups of
// the tile's row count. A short last row group repeats its last row and drops those results.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.h"

namespace tandem::TANDEM_VARIANT_NS {

// (std::min would be an inline function shared with code built for other variants.)
constexpr int min_int(int a, int b) { return a < b ? a : b; }

template <typename Tile, int R>
void for_row_groups(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
    for (int r0 = 0; r0 < n_rows; r0 += R) {
        const int n_valid = min_int(R, n_rows - r0);
        const uint8_t* rows[R];
        for (int i = 0; i < R; ++i) rows[i] = w + static_cast<size_t>(r0 + min_int(i, n_valid - 1)) * w_stride;
        Tile::run(k, rows, n_valid, a, a_stride, out + r0, out_stride);
    }
}

// Tile<T, R, C>::run(k, rows[R], n_valid, a, a_stride, out, out_stride) computes
// out[c * out_stride + r] for r < n_valid, c < C; kRows(C) gives R.
template <template <typename, int, int> class Tile, typename T, int (*kRows)(int)>
void for_tiles(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
               size_t a_stride, int n_cols, float* out, size_t out_stride) {
    for (int c0 = 0; c0 < n_cols; c0 += kMaxTileCols) {
        const uint8_t* ac = a + static_cast<size_t>(c0) * a_stride;
        float* oc = out + static_cast<size_t>(c0) * out_stride;
        switch (min_int(kMaxTileCols, n_cols - c0)) {
#define TANDEM_TILE_CASE(C)                                                                      \
    case C:                                                                                      \
        for_row_groups<Tile<T, kRows(C), C>, kRows(C)>(k, w, w_stride, n_rows, ac, a_stride, oc, \
                                                       out_stride);                              \
        break;
            TANDEM_TILE_CASE(1)
            TANDEM_TILE_CASE(2)
            TANDEM_TILE_CASE(3)
            TANDEM_TILE_CASE(4)
            TANDEM_TILE_CASE(5)
            TANDEM_TILE_CASE(6)
            TANDEM_TILE_CASE(7)
            TANDEM_TILE_CASE(8)
#undef TANDEM_TILE_CASE
        }
    }
}
static_assert(kMaxTileCols == 8, "for_tiles instantiates column counts 1..8");

}  // namespace tandem::TANDEM_VARIANT_NS
