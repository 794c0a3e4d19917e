// GPU matrix-product speed per format.
#include "cuda/matmul_bench.h"

#include <algorithm>
#include <vector>

#include "cuda/check.h"
#include "cuda/dequant_tables.h"
#include "cuda/matmul.h"
#include "cuda/memory.h"
#include "formats/format_table.h"

namespace tandem::cuda {
namespace {

// Random bytes (speed does not depend on the values; a NaN scale costs no more than any other).
__global__ void fill_kernel(uint32_t* p, size_t n, uint32_t seed) {
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
        x ^= x >> 15;
        x *= 2246822519u;
        x ^= x >> 13;
        p[i] = x;
    }
}

__global__ void fill_floats(float* p, size_t n) {
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        p[i] = static_cast<float>(static_cast<int>(i % 17) - 8) * 0.0625f;
    }
}

template <typename Fn>
double median_ms(int rounds, int per_round, cudaStream_t stream, Fn fn) {
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "bench");
    check(cudaEventCreate(&b), "bench");
    for (int i = 0; i < 3; ++i) fn();  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < rounds; ++r) {
        check(cudaEventRecord(a, stream), "bench");
        for (int i = 0; i < per_round; ++i) fn();
        check(cudaEventRecord(b, stream), "bench");
        check(cudaEventSynchronize(b), "bench");
        float t = 0;
        check(cudaEventElapsedTime(&t, a, b), "bench");
        ms.push_back(t / per_round);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

double device_copy_gbps(size_t bytes) {
    DeviceBuffer src(bytes, "copy bench"), dst(bytes, "copy bench");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "bench");
    const double ms = median_ms(5, 5, stream, [&] {
        check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream),
              "copy bench");
    });
    cudaStreamDestroy(stream);
    return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

MatvecSpeed measure_matvec(GgmlType type, int64_t cols, size_t bytes, int rounds) {
    const FormatTraits& f = format_of(type);
    const size_t rb = row_bytes(f, cols);
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(bytes / rb));
    DeviceBuffer w(align_up(rb * rows), "bench weights");
    fill_kernel<<<1024, 256>>>(w.as<uint32_t>(), align_up(rb * rows) / 4, 12345u);
    check_launch("fill_kernel");
    const int64_t prefill = 512;
    DeviceBuffer x(sizeof(float) * prefill * cols, "bench activations");
    DeviceBuffer y(sizeof(float) * prefill * rows, "bench outputs");
    fill_floats<<<1024, 256>>>(x.as<float>(), prefill * cols);
    check_launch("fill_floats");
    // The q8 codes the model's products take where the format has integer kernels.
    const int64_t groups = (cols + 31) / 32;
    DeviceBuffer codes(align_up(static_cast<size_t>(prefill * groups * 32)), "bench codes");
    DeviceBuffer scales(sizeof(float) * prefill * groups, "bench codes");
    fill_kernel<<<1024, 256>>>(codes.as<uint32_t>(), codes.bytes() / 4, 777u);
    check_launch("fill_kernel");
    fill_floats<<<1024, 256>>>(scales.as<float>(), prefill * groups);
    check_launch("fill_floats");
    const Q8Rows q8{codes.as<int8_t>(), scales.as<float>(), groups * 32, groups};
    const Q8Rows* xq = gpu_integer_products(type) ? &q8 : nullptr;
    check(cudaDeviceSynchronize(), "bench setup");
    DeviceDequantTables tables;
    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "bench");
    const MatmulContext ctx{stream, tables.tables()};
    const WeightMatrix m{&f, w.as<uint8_t>(), cols, rows, rb, 1.0f};
    MatvecSpeed s;
    const double weight_bytes = static_cast<double>(rb) * rows;
    const double ms1 = median_ms(
        rounds, 10, stream, [&] { matmul(ctx, m, x.as<float>(), cols, 1, y.as<float>(), rows, xq); });
    const double ms8 = median_ms(
        rounds, 10, stream, [&] { matmul(ctx, m, x.as<float>(), cols, 8, y.as<float>(), rows, xq); });
    // The tile path on a slice of the matrix (the full one would take long at 512 rows).
    const WeightMatrix slice = m.slice_rows(0, std::min<int64_t>(rows, 8192));
    const double msp = median_ms(std::max(1, rounds / 2), 2, stream, [&] {
        matmul(ctx, slice, x.as<float>(), cols, static_cast<int>(prefill), y.as<float>(),
               slice.rows, xq);
    });
    cudaStreamDestroy(stream);
    s.us_1 = ms1 * 1e3;
    s.us_8 = ms8 * 1e3;
    s.gbps_1 = weight_bytes / (ms1 * 1e-3) / 1e9;
    s.gbps_8 = weight_bytes / (ms8 * 1e-3) / 1e9;
    s.tflops_prefill = 2.0 * prefill * static_cast<double>(slice.rows) * cols / (msp * 1e-3) / 1e12;
    return s;
}

}  // namespace tandem::cuda
