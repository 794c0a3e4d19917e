// Helpers of the GPU tests: skipping without a GPU (one line saying why), device arrays, and
// random weights of any format.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/memory.h"
#include "formats/format_table.h"
#include "model/backend.h"

namespace tandem::testing {

#define TANDEM_REQUIRE_GPU()                                                   \
    do {                                                                       \
        std::string why_no_gpu;                                                \
        if (!::tandem::gpu_available(&why_no_gpu)) GTEST_SKIP() << why_no_gpu; \
    } while (0)

// A device copy of a host vector, read back with download().
template <typename T>
class DeviceArray {
  public:
    explicit DeviceArray(size_t n)
        : n_(n), buffer_(cuda::align_up(sizeof(T) * (n ? n : 1)), "test array") {}
    explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
    void upload(const std::vector<T>& host) {
        cuda::check(
            cudaMemcpy(buffer_.get(), host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice),
            "test upload");
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        cuda::check(cudaDeviceSynchronize(), "test kernels");
        cuda::check(cudaMemcpy(host.data(), buffer_.get(), sizeof(T) * n_, cudaMemcpyDeviceToHost),
                    "test download");
        return host;
    }
    T* get() const { return buffer_.as<T>(); }
    size_t size() const { return n_; }

  private:
    size_t n_;
    cuda::DeviceBuffer buffer_;
};

inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// rows × cols weights of `format` (random valid blocks, or quantized random values), row-major.
inline std::vector<uint8_t> random_weights(const FormatTraits& f, int64_t rows, int64_t cols,
                                           uint64_t seed) {
    const size_t rb = row_bytes(f, cols);
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* dst = w.data() + r * rb;
        if (f.random_blocks != nullptr) {
            f.random_blocks(dst, cols / f.block_size, seed * 1000003 + r, 0.5f);
        } else if (f.quantize_row != nullptr) {
            const std::vector<float> x = random_floats(cols, seed * 1000003 + r, 0.5f);
            f.quantize_row(x.data(), dst, cols);
        } else {  // f64
            const std::vector<float> x = random_floats(cols, seed * 1000003 + r, 0.5f);
            for (int64_t i = 0; i < cols; ++i) {
                const double d = x[i];
                std::memcpy(dst + 8 * i, &d, 8);
            }
        }
    }
    return w;
}

inline std::vector<float> dequantize(const FormatTraits& f, const std::vector<uint8_t>& w,
                                     int64_t rows, int64_t cols) {
    std::vector<float> out(static_cast<size_t>(rows) * cols);
    const size_t rb = row_bytes(f, cols);
    for (int64_t r = 0; r < rows; ++r)
        f.dequantize_row(w.data() + r * rb, out.data() + r * cols, cols);
    return out;
}

}  // namespace tandem::testing
