// The frame of the x86 SIMD tiles for the 256-value super-block formats against q8_K
// activations: the k-quants and iq4_xs (simd_kquants.cpp), the lattice i-quants and the ternary
// formats (simd_iquants.cpp). A format's tile supplies super_block<R, kMatvec>(), which adds R
// rows' super-block i against the columns into the rows' float sums; SuperBlockTile runs it
// over k:
// - the matvec (C = 1) reads the q8_K row in place (RawColumns), one weight row at a time;
// - the small matmul copies the columns side by side per chunk of k that stays in L1 (the
//   tile's Cols: one base address for all columns) and runs R rows at a time over it; when k
//   takes several chunks, blocks of kRowBlock rows carry their float sums from chunk to chunk
//   (continued, never partial sums added: a column's result must not depend on its tile).
#pragma once

#include "kernels/variant/simd.h"
#include "kernels/variant/tile.h"

namespace tandem::TANDEM_VARIANT_NS::simd {

constexpr int kQ8KBytes = 292;  // q8_K: float d, int8 qs[256], int16 bsums[16]

// The columns of a super-block, straight from the q8_K rows (the matvec: column 0).
struct RawColumns {
    const uint8_t* y;  // q8_K block i of column 0
    const uint8_t* q(int) const { return y + 4; }
    __m256 dy(int) const { return _mm256_set1_ps(load_f32(y)); }
    __m256i bsums(int) const {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 260));
    }
    // The ternary formats' bias term: -1 times the pairs of bsums, as the start of the sums.
    __m256i start(int c) const { return _mm256_madd_epi16(bsums(c), _mm256_set1_epi16(-1)); }
};

// A row's super-block prefetch: the matvec streams one row; a tile's rows, the same lines
// `ahead` bytes on (prefetch_ahead).
template <bool kMatvec>
TANDEM_ALWAYS_INLINE void prefetch_super_block(const uint8_t* block, int bytes, size_t ahead) {
    if constexpr (kMatvec) {
        prefetch_stream(block, bytes);
    } else {
        for (int line = 0; line < bytes; line += 64) prefetch_l2(block + ahead + line);
    }
}

// Tile (derived from SuperBlockTile<Tile, C>) supplies
// - kBytes (per super-block) and kRows (rows per small-matmul tile);
// - Sums: one row's float sums over the C columns: static Sums zero(), float result(int c);
// - Cols: the small matmul's super-block of the C columns: void prepare(y, c) copies column c's
//   q8_K block y;
// - template <int R, bool kMatvec, typename Columns>
//   static void super_block(int64_t i, const uint8_t* const* rows, size_t ahead,
//                           const Columns& cols, Sums (&f)[R]),
//   Columns being RawColumns (the matvec) or Cols.
// (Tile's members are named inside the functions only: at class scope Tile is incomplete.)
template <typename Tile, int C>
struct SuperBlockTile {
    // Rows per block when k takes several chunks: their float sums wait in memory between
    // chunks, and the block's weights stay in L2.
    static constexpr int kRowBlock = 128;

    static void run(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                    size_t a_stride, float* out, size_t out_stride) {
        if constexpr (C == 1) {
            for (int r = 0; r < n_rows; ++r) out[r] = matvec_row(k, w + r * w_stride, a);
        } else {
            tiles(k, w, w_stride, n_rows, a, a_stride, out, out_stride);
        }
    }

    static float matvec_row(int64_t k, const uint8_t* row, const uint8_t* a) {
        using Sums = typename Tile::Sums;
        Sums f[1] = {Sums::zero()};
        for (int64_t i = 0; i < k / 256; ++i)
            Tile::template super_block<1, true>(i, &row, 0, RawColumns{a + i * kQ8KBytes}, f);
        return f[0].result(0);
    }

    static void tiles(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
                      size_t a_stride, float* out, size_t out_stride) {
        using Sums = typename Tile::Sums;
        using Cols = typename Tile::Cols;
        using Carry = ChunkCarry<Sums>;
        constexpr int64_t kChunk = kSuperBlockChunkBytes / sizeof(Cols);
        static_assert(kChunk >= 1);
        constexpr int R = Tile::kRows;
        const size_t ahead = prefetch_ahead(R, w_stride);
        Cols cols[kChunk];
        Sums carried[kRowBlock];
        run_chunks<kRowBlock>(
            n_rows, k / 256, even_chunk(k / 256, kChunk), carried,
            [&](int64_t i0, int64_t n) {
                for (int64_t i = 0; i < n; ++i) {
                    for (int c = 0; c < C; ++c)
                        cols[i].prepare(a + c * a_stride + (i0 + i) * kQ8KBytes, c);
                }
            },
            [&](int rb, int count, int64_t i0, int64_t n, const Carry& carry) {
                for_row_groups<R>(w + rb * w_stride + i0 * Tile::kBytes, w_stride, count,
                                  [&](const uint8_t* const* rows, int n_valid, int r0) {
                                      Carry c = carry;
                                      if (c.acc != nullptr) c.acc += r0;
                                      tile<R>(rows, n_valid, ahead, cols, n, c, out + rb + r0,
                                              out_stride);
                                  });
            });
    }

    // R rows side by side over a chunk's n super-blocks, each row's steps decoded once for all
    // C columns. The float sums start from the carry (in) or zero, and end in it (out) or as
    // results in out.
    template <int R, typename Cols, typename Sums>
    static void tile(const uint8_t* const* rows, int n_valid, size_t ahead, const Cols* cols,
                     int64_t n, const ChunkCarry<Sums>& carry, float* out, size_t out_stride) {
        Sums f[R];
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) f[r] = carry.in && r < n_valid ? carry.acc[r] : Sums::zero();
        for (int64_t i = 0; i < n; ++i)
            Tile::template super_block<R, false>(i, rows, ahead, cols[i], f);
        TANDEM_UNROLL
        for (int r = 0; r < R; ++r) {
            if (r >= n_valid) break;
            if (carry.out) {
                carry.acc[r] = f[r];
                continue;
            }
            TANDEM_UNROLL
            for (int c = 0; c < C; ++c) out[c * out_stride + r] = f[r].result(c);
        }
    }
};

}  // namespace tandem::TANDEM_VARIANT_NS::simd
