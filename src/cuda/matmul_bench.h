// Speed of the GPU's matrix products per weight format, for `tandem bench kernels --device
// cuda`: the decode products (1 and 8 rows of activations) over a matrix far larger than the L2
// cache, in GB/s of weights read, next to the card's own copy rate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/ggml_type.h"

namespace tandem::cuda {

struct MatvecSpeed {
    double gbps_1 = 0;  // weight bytes per second, 1 activation row
    double gbps_8 = 0;  // ... 8 rows
    double us_1 = 0;    // microseconds per product
    double us_8 = 0;
    double tflops_prefill = 0;  // the tile path on 512 rows of activations
};

// Device-to-device copy of `bytes`, counting bytes read and written (the bandwidth bound of a
// kernel that reads its input once).
double device_copy_gbps(size_t bytes = size_t{1} << 30);

// The products of a `bytes`-sized matrix of `cols` columns (random blocks); medians of `rounds`
// timed batches.
MatvecSpeed measure_matvec(GgmlType type, int64_t cols, size_t bytes, int rounds);

}  // namespace tandem::cuda
