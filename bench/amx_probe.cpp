// tandem_amx_probe: does an AMX kernel pay at decode batch sizes? (issue 4: "AMX where it pays
// off; measure, leave it out if it does not".)
//
// It times q8_0 weights x C q8_0 activation columns (C = 1..16) two ways on the same data and
// threads: the chosen kernel variant's dot tile (C > 8 in tiles of 8, as the engine calls it),
// and an AMX int8 tile kernel written here: per 32-value block, 16 weight rows (A) times the
// block of 16 columns packed for tdpbssd (B) gives 16 x 16 exact int32 sums, stored and scaled
// by the row and column scales into 16 float accumulators (one per row, a lane per column).
// The AMX kernel costs the same for every C <= 16; the VNNI tiles grow with C. Weights are
// read in place (no repacking), with the matrix in L2 (compute) and far larger than the LLC
// (memory). The outputs of the two are compared.
//
//   tandem_amx_probe [--threads N] [--seconds S] [--mib M]
// (GCC 12's AVX-512 headers warn about their own "undefined" vectors: bug 105593.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "formats/format_table.h"
#include "kernels/kernel_table.h"

namespace {

using namespace tandem;

constexpr int kBlock = 32, kBlockBytes = 34;  // q8_0: fp16 d, int8 qs[32]
constexpr int kTileRows = 16, kTileCols = 16;

struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
// tmm0, tmm1: C (16 x 16 int32); tmm2, tmm3: A (16 rows x 32 int8); tmm4, tmm5: B (8 rows of
// 16 columns x 4 int8). Two of each so two blocks are in flight.
void configure_tiles() {
    TileConfig c;
    for (int t : {0, 1}) c.rows[t] = 16, c.colsb[t] = 64;
    for (int t : {2, 3}) c.rows[t] = 16, c.colsb[t] = kBlock;
    for (int t : {4, 5}) c.rows[t] = kBlock / 4, c.colsb[t] = 64;
    _tile_loadconfig(&c);
}

// The activation columns per block as tdpbssd's B: row kk of block b holds, per column n, its
// values 4kk..4kk+3; then the columns' scales per block. Columns past C are zero.
struct PackedColumns {
    std::vector<int8_t> q;  // blocks x 8 x 64
    std::vector<float> d;   // blocks x 16
};
PackedColumns pack_columns(const uint8_t* a, size_t a_stride, int cols, int64_t k) {
    const int64_t nb = k / kBlock;
    PackedColumns p{std::vector<int8_t>(nb * 512), std::vector<float>(nb * 16)};
    for (int n = 0; n < cols; ++n) {
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* blk = a + n * a_stride + b * kBlockBytes;
            uint16_t h;
            std::memcpy(&h, blk, 2);
            p.d[b * 16 + n] = _cvtsh_ss(h);
            for (int i = 0; i < kBlock; ++i)
                p.q[b * 512 + (i / 4) * 64 + n * 4 + i % 4] = static_cast<int8_t>(blk[2 + i]);
        }
    }
    return p;
}

// acc[r] += (block sums of row r, a lane per column) * d_w[r] * d_a.
inline void scale_block(const int32_t (&sums)[16][16], const uint8_t* w, size_t w_stride,
                        int64_t b, const float* d_cols, __m512 (&acc)[16]) {
    const __m512 da = _mm512_loadu_ps(d_cols + b * 16);
    for (int r = 0; r < kTileRows; ++r) {
        uint16_t h;
        std::memcpy(&h, w + r * w_stride + b * kBlockBytes, 2);
        const __m512 s = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(h)), da);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[r])), s, acc[r]);
    }
}

// 16 rows x the packed columns; out[c * out_stride + r] for c < cols. nb even.
void amx_rows16(const uint8_t* w, size_t w_stride, int64_t nb, const PackedColumns& a, int cols,
                float* out, size_t out_stride) {
    __m512 acc[16];
    for (auto& x : acc) x = _mm512_setzero_ps();
    alignas(64) int32_t s0[16][16], s1[16][16];
    for (int64_t b = 0; b < nb; b += 2) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_loadd(2, w + b * kBlockBytes + 2, w_stride);
        _tile_loadd(4, a.q.data() + b * 512, 64);
        _tile_loadd(3, w + (b + 1) * kBlockBytes + 2, w_stride);
        _tile_loadd(5, a.q.data() + (b + 1) * 512, 64);
        _tile_dpbssd(0, 2, 4);
        _tile_dpbssd(1, 3, 5);
        _tile_stored(0, s0, 64);
        _tile_stored(1, s1, 64);
        scale_block(s0, w, w_stride, b, a.d.data(), acc);
        scale_block(s1, w, w_stride, b + 1, a.d.data(), acc);
    }
    alignas(64) float lanes[16];
    for (int r = 0; r < kTileRows; ++r) {
        _mm512_store_ps(lanes, acc[r]);
        for (int c = 0; c < cols; ++c) out[c * out_stride + r] = lanes[c];
    }
}

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Median seconds per pass over about `seconds`.
template <typename Pass>
double time_pass(Pass&& pass, double seconds) {
    std::vector<double> t;
    pass();  // warm-up
    const double start = now();
    while (now() - start < seconds || t.size() < 5) {
        const double t0 = now();
        pass();
        t.push_back(now() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

struct Options {
    int threads = 0;
    double seconds = 0.5;
    double mib = 1024;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "tandem_amx_probe: %s: missing value\n", arg.c_str());
            std::exit(2);
        }
        const char* v = argv[++i];
        if (arg == "--threads") {
            o.threads = std::atoi(v);
        } else if (arg == "--seconds") {
            o.seconds = std::atof(v);
        } else if (arg == "--mib") {
            o.mib = std::atof(v);
        } else {
            std::fprintf(stderr, "tandem_amx_probe: unknown option %s\n", arg.c_str());
            std::exit(2);
        }
    }
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const CpuFeatures& cpu = cpu_features();
    if (!cpu.amx_int8 || !request_amx_permission()) {
        std::printf("tandem_amx_probe: this CPU or OS does not offer AMX-INT8; nothing to measure\n");
        return 0;
    }
    ThreadPool pool(o.threads > 0 ? o.threads : cpu.physical_cores);
    const KernelTable& kt = kernels();
    const DotTileFn dot = kt.dot[static_cast<uint32_t>(GgmlType::kQ8_0)];
    const FormatTraits& f = format_of(GgmlType::kQ8_0);
    constexpr int64_t k = 4096;
    const size_t rs = row_bytes(f, k);
    const int64_t nb = k / kBlock;

    // 16 columns of activations, quantized by the variant.
    std::vector<uint8_t> act(rs * kTileCols);
    for (int c = 0; c < kTileCols; ++c) {
        std::vector<float> x(k);
        for (int64_t i = 0; i < k; ++i) x[i] = std::sin(0.37f * i + c) * (1 + c % 3);
        kt.quantize[static_cast<uint32_t>(GgmlType::kQ8_0)](x.data(), act.data() + c * rs, k);
    }

    std::printf("tandem_amx_probe: q8_0, K=%ld, %d threads, variant %s for the VNNI tiles\n",
                static_cast<long>(k), pool.size(), std::string(chosen_kernel_variant().name).c_str());
    std::printf("%-6s %3s | %12s %12s | %8s | %s\n", "case", "C", "vnni ns/row", "amx ns/row",
                "amx gain", "max |amx - vnni| / max |vnni|");

    const double l2_bytes = 1.0 * 1048576 * pool.size();  // 1 MiB per thread
    for (const auto& [label, target] : {std::pair<const char*, double>{"L2", l2_bytes},
                                        {"DRAM", o.mib * 1048576}}) {
        const int64_t rows = std::max<int64_t>(16 * pool.size(),
                                               static_cast<int64_t>(target / rs) / 16 * 16);
        std::vector<uint8_t> w(rs * rows);
        {
            std::vector<float> x(k);
            for (int64_t r = 0; r < 16; ++r) {
                for (int64_t i = 0; i < k; ++i) x[i] = std::cos(0.11f * i * (r + 1));
                f.quantize_row(x.data(), w.data() + r * rs, k);
            }
            for (int64_t r = 16; r < rows; ++r) std::memcpy(&w[r * rs], &w[(r % 16) * rs], rs);
        }
        std::vector<float> out_vnni(rows * kTileCols), out_amx(rows * kTileCols);
        const int64_t groups = rows / 16;
        for (int cols : {1, 2, 4, 8, 16}) {
            const PackedColumns packed = pack_columns(act.data(), rs, cols, k);
            const auto slice = [&](int worker, int64_t& g0, int64_t& g1) {
                g0 = groups * worker / pool.size();
                g1 = groups * (worker + 1) / pool.size();
            };
            const double t_vnni = time_pass(
                [&] {
                    pool.run([&](int worker) {
                        int64_t g0, g1;
                        slice(worker, g0, g1);
                        for (int c0 = 0; c0 < cols; c0 += kMaxTileCols) {
                            dot(k, &w[g0 * 16 * rs], rs, static_cast<int>((g1 - g0) * 16),
                                &act[c0 * rs], rs, std::min(kMaxTileCols, cols - c0),
                                &out_vnni[c0 * rows + g0 * 16], rows);
                        }
                    });
                },
                o.seconds);
            const double t_amx = time_pass(
                [&] {
                    pool.run([&](int worker) {
                        int64_t g0, g1;
                        slice(worker, g0, g1);
                        configure_tiles();
                        for (int64_t g = g0; g < g1; ++g) {
                            amx_rows16(&w[g * 16 * rs], rs, nb, packed, cols,
                                       &out_amx[g * 16], rows);
                        }
                        _tile_release();
                    });
                },
                o.seconds);
            double max_ref = 0, max_diff = 0;
            for (int c = 0; c < cols; ++c) {
                for (int64_t r = 0; r < rows; ++r) {
                    max_ref = std::max(max_ref, std::fabs(double(out_vnni[c * rows + r])));
                    max_diff = std::max(max_diff, std::fabs(double(out_amx[c * rows + r]) -
                                                            out_vnni[c * rows + r]));
                }
            }
            std::printf("%-6s %3d | %12.2f %12.2f | %7.2fx | %.2e\n", label, cols,
                        t_vnni / rows * 1e9, t_amx / rows * 1e9, t_vnni / t_amx,
                        max_diff / max_ref);
            std::fflush(stdout);
        }
    }
    return 0;
}
