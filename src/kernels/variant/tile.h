// Splits a DotTileFn call into register tiles: columns in groups of up to kMaxTileCols (each
// group size its own instantiation, so accumulators stay in registers) and, within a tile
// type, rows in groups of R. A short last row group repeats its last row and drops the results.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.h"

namespace tandem::TANDEM_VARIANT_NS {

// Fully unrolls a loop over tile rows or columns, so that accumulators indexed by it stay in
// registers (GCC's -O2 does not peel such loops by itself; clang reads the same pragma).
#define TANDEM_UNROLL _Pragma("GCC unroll 16")

// (std::min would be an inline function shared with code built for other variants.)
constexpr int min_int(int a, int b) {
    return a < b ? a : b;
}
constexpr int64_t min_i64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

// Weights stream from DRAM in matvecs: the hardware prefetchers follow one row read front to
// back, but start late on each new 4 KiB page and, with 16 cores reading, do not run far enough
// ahead; they do not follow several rows read side by side. So the matvec reads one row at a
// time; the quantized formats' matvecs prefetch (into L2) every line kStreamAhead bytes ahead
// (prefetch_stream), the float matvecs nothing (simd_float.cpp), NEON's the next page's first
// line as they enter a page (prefetch_next_page); multi-row tiles prefetch the same bytes
// kPrefetchRows rows further on at every step.
// Measured on Zen 5, one thread, from DRAM: q8_0 with 4 rows side by side 20 GB/s, one row
// 32 GB/s, + next page 35 GB/s; f32 one row + a prefetch per line 33 GB/s but 25 % slower from
// L2 (load slots: its decode is free), one per page 32 GB/s at full L2 speed.
// Sapphire Rapids, 16 threads, 512 MiB (STREAM-style read 82-100 GB/s): a prefetch per line
// 3-6 KiB ahead instead of one per page took 0.62-0.90x the time for the k-quants, q4_0, q5_0,
// q8_0, iq4_nl, iq4_xs (75 -> 90-130 % of the STREAM read), the same or less for the
// compute-bound i-quants; f32 and bf16 from L2 1.2-2x the time. The distance is in bytes, but
// what counts is time: at 2 threads on Zen 5 (30 GB/s a thread against 6 on Sapphire Rapids)
// 3 KiB ahead was too close (q6_K 1.3x the time), 6-8 KiB neutral to 0.88x (q8_0, its decode
// the cheapest: 1.1x). (NEON keeps one per page: not measured there.)
// (Forced inline: GCC 12 may judge a not yet inlined prefetch_l2 free of side effects, as if
// it computed nothing, and delete its calls. It did so in the k-quant tiles.)
constexpr int kPrefetchRows = 4;  // (kStreamAhead: kernels/kernel_table.h)
__attribute__((always_inline)) inline void prefetch_l2(const uint8_t* p) {
    __builtin_prefetch(p, 0, 2);
}
// For a row read front to back in steps of step_bytes: each line once, as the step that reads
// kStreamAhead bytes before it starts.
__attribute__((always_inline)) inline void prefetch_stream(const uint8_t* p, int step_bytes) {
    const uint8_t* ahead = p + kStreamAhead;
    const uintptr_t first_line = -reinterpret_cast<uintptr_t>(ahead) & 63;
    for (uintptr_t o = first_line; o < static_cast<uintptr_t>(step_bytes); o += 64)
        prefetch_l2(ahead + o);
}
// For a row read front to back in steps of step_bytes.
__attribute__((always_inline)) inline void prefetch_next_page(const uint8_t* p, int step_bytes) {
    if ((reinterpret_cast<uintptr_t>(p) & 4095) < static_cast<uintptr_t>(step_bytes))
        prefetch_l2(p + 4096);
}
inline size_t prefetch_ahead(int rows_per_group, size_t w_stride) {
    return static_cast<size_t>(rows_per_group > kPrefetchRows ? rows_per_group : kPrefetchRows) *
           w_stride;
}

// Bytes of prepared column data per chunk of k, which stays in L1 while the rows run over it.
// - The super-block tiles (k-quants, i-quants, ternary): 32 KiB, so K = 4096 takes two even
//   chunks at C = 8 (20 KiB each) where 40 KiB took one. C = 8 took 0.73-0.98x the time on
//   Zen 3 (32 KiB L1; tq2_0 0.73-0.76, tq1_0 0.92, the k-quants 0.97-0.98, one and two
//   threads) and 0.83-1.01x on Sapphire Rapids (48 KiB L1; 16 threads: tq2_0 0.83, tq1_0
//   0.90, q6_K 0.94, the other k-quants 0.97-0.98, iq2_xxs and iq1_s level).
// - The 32-value block tiles (legacy_unit_lanes.h): 40 KiB, K = 4096 one chunk at C = 8 with
//   AVX-512 (two chunks of 32 KiB: 5-12% slower on Zen 5; 28 KiB on Zen 3: q8_0 1.15x). 20 KiB
//   pays where two threads share a core's L1 (the lent Sapphire Rapids' virtual CPUs); with a
//   core to itself a thread took 1.14-1.22x the time for q4_0, q8_0, q5_1 there (q1_0 0.93x)
//   and 1.03-1.14x on Zen 3 (kernels README, "Chunk size").
constexpr int64_t kSuperBlockChunkBytes = 32768;
constexpr int64_t kUnitLaneChunkBytes = 40960;
// The chunk for n items (super-blocks, groups) when at most max_chunk fit: the fewest chunks,
// as even as they go. A short last chunk costs almost as much to prepare and carry as a whole
// one: two even chunks made C = 8 0.89-0.94x the time for q1_0 and q5_1 on Zen 3. (Not inside
// run_chunks: NEON's step tiles need chunks of whole groups of steps.)
inline int64_t even_chunk(int64_t n, int64_t max_chunk) {
    const int64_t parts = (n + max_chunk - 1) / max_chunk;
    return parts > 0 ? (n + parts - 1) / parts : max_chunk;
}

// Accumulators of a block of rows carried from one chunk of k to the next: loaded before a
// chunk (in), stored after it instead of the results (out). Acc: one row's accumulators.
template <typename Acc>
struct ChunkCarry {
    Acc* acc = nullptr;  // [kRowBlock], offset to the tile's first row
    bool in = false, out = false;
    // k in one chunk (run_chunks passes no carry then): each row is read front to back.
    bool whole_k() const { return acc == nullptr; }
};
// The chunk loop of the tiles that prepare their columns per chunk of k (n_items steps or
// groups of k, `chunk` of them at a time). When k fits one chunk: prepare(0, n_items), then
// rows(0, n_rows, 0, n_items, {}). Otherwise the rows go in blocks of kRowBlock, which stay in
// L2 while each chunk is prepared and run over them, their accumulators carried in `carried`
// (kRowBlock entries): chunks continue the sums rather than adding partial sums, so a column's
// result does not depend on how k is chunked for its tile.
template <int kRowBlock, typename Acc, typename Prepare, typename Rows>
void run_chunks(int n_rows, int64_t n_items, int64_t chunk, Acc* carried, Prepare&& prepare,
                Rows&& rows) {
    if (n_items <= chunk) {
        prepare(int64_t{0}, n_items);
        rows(0, n_rows, int64_t{0}, n_items, ChunkCarry<Acc>{});
        return;
    }
    for (int rb = 0; rb < n_rows; rb += kRowBlock) {
        for (int64_t i0 = 0; i0 < n_items; i0 += chunk) {
            const int64_t n = min_i64(chunk, n_items - i0);
            prepare(i0, n);
            rows(rb, min_int(kRowBlock, n_rows - rb), i0, n,
                 ChunkCarry<Acc>{carried, i0 > 0, i0 + n < n_items});
        }
    }
}

// fn(rows[R], n_valid, r0) for each group of R rows.
template <int R, typename Fn>
void for_row_groups(const uint8_t* w, size_t w_stride, int n_rows, Fn&& fn) {
    for (int r0 = 0; r0 < n_rows; r0 += R) {
        const int n_valid = min_int(R, n_rows - r0);
        const uint8_t* rows[R];
        for (int i = 0; i < R; ++i)
            rows[i] = w + static_cast<size_t>(r0 + min_int(i, n_valid - 1)) * w_stride;
        fn(rows, n_valid, r0);
    }
}

// Tile<T, C>::run(k, w, w_stride, n_rows, a, a_stride, out, out_stride) computes the DotTileFn
// for exactly C columns.
template <template <typename, int> class Tile, typename T>
void for_tiles(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
               size_t a_stride, int n_cols, float* out, size_t out_stride) {
    for (int c0 = 0; c0 < n_cols; c0 += kMaxTileCols) {
        const uint8_t* ac = a + static_cast<size_t>(c0) * a_stride;
        float* oc = out + static_cast<size_t>(c0) * out_stride;
        switch (min_int(kMaxTileCols, n_cols - c0)) {
#define TANDEM_TILE_CASE(C)                                                    \
    case C:                                                                    \
        Tile<T, C>::run(k, w, w_stride, n_rows, ac, a_stride, oc, out_stride); \
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
