// The block decoders of cuda/block_dequant.h run on the GPU against formats/ on the host: bit
// for bit for every weight format, from blocks at the alignments uploads give. Skipped without
// a GPU; compiling it still checks every chunk8 as device code.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/block_dequant.h"
#include "formats/format_table.h"

namespace tandem::gpu {
namespace {

// One thread per chunk, as the matrix kernels' lanes read them.
template <GgmlType T>
__global__ void dequantize_kernel(const uint8_t* blocks, float* out, int64_t n_chunks,
                                  DequantTables tables) {
    using F = BlockFormat<T>;
    constexpr int kChunks = F::kValues / 8;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_chunks;
         i += stride) {
        float v[8];
        F::chunk8(blocks + i / kChunks * F::kBytes, static_cast<int>(i % kChunks), v, tables);
        for (int j = 0; j < 8; ++j) out[8 * i + j] = v[j];
    }
}

// Device memory freed on scope exit.
class DeviceBytes {
  public:
    explicit DeviceBytes(size_t n) { ok_ = cudaMalloc(&p_, n) == cudaSuccess; }
    ~DeviceBytes() {
        if (ok_) cudaFree(p_);
    }
    DeviceBytes(const DeviceBytes&) = delete;
    DeviceBytes& operator=(const DeviceBytes&) = delete;
    bool ok() const { return ok_; }
    uint8_t* get() const { return static_cast<uint8_t*>(p_); }

  private:
    void* p_ = nullptr;
    bool ok_ = false;
};

bool have_gpu() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Bit patterns equal, or both NaN: the GPU's arithmetic returns the canonical NaN.
std::string first_mismatch(const std::vector<float>& ours, const std::vector<float>& ref) {
    for (size_t i = 0; i < ref.size(); ++i) {
        if (ours[i] != ours[i] && ref[i] != ref[i]) continue;
        if (std::memcmp(&ours[i], &ref[i], 4) != 0) {
            return "value " + std::to_string(i) + ": gpu " + std::to_string(ours[i]) +
                   ", formats " + std::to_string(ref[i]);
        }
    }
    return "";
}

class BlockDequantDevice : public ::testing::TestWithParam<GgmlType> {};

TEST_P(BlockDequantDevice, BitIdenticalToFormats) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU";
    const GgmlType type = GetParam();
    const FormatTraits& format = format_of(type);

    // The tables, each part copied as is (256-aligned).
    size_t table_bytes = 0;
    for (const DequantTablePart& part : dequant_table_parts())
        table_bytes += (part.bytes + 255) / 256 * 256;
    DeviceBytes table_memory(table_bytes);
    ASSERT_TRUE(table_memory.ok());
    DequantTables tables{};
    size_t offset = 0;
    for (const DequantTablePart& part : dequant_table_parts()) {
        ASSERT_EQ(
            cudaMemcpy(table_memory.get() + offset, part.host, part.bytes, cudaMemcpyHostToDevice),
            cudaSuccess);
        tables.*part.member = table_memory.get() + offset;
        offset += (part.bytes + 255) / 256 * 256;
    }

    // Valid blocks (random_blocks, or quantize_row of random floats) and random bytes.
    int values = 0, bytes = 0;
    for_each_weight_format([&](auto tag) {
        if (tag.kType != type) return;
        values = decltype(tag)::Format::kValues;
        bytes = decltype(tag)::Format::kBytes;
    });
    const int64_t n_blocks = 999;
    const int64_t n = n_blocks * values;
    const size_t size = static_cast<size_t>(n_blocks) * bytes;
    std::mt19937_64 rng(type_id(type));
    for (int fill = 0; fill < 2; ++fill) {
        SCOPED_TRACE(fill == 0 ? "valid blocks" : "random bytes");
        std::vector<uint8_t> host(size);
        if (fill == 1) {
            for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
        } else if (format.random_blocks != nullptr) {
            format.random_blocks(host.data(), n_blocks, 11, 0.05f);
        } else if (format.quantize_row != nullptr) {
            std::normal_distribution<float> normal;
            std::vector<float> x(n);
            for (float& v : x) v = normal(rng);
            format.quantize_row(x.data(), host.data(), n);
        } else {
            for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
        }
        std::vector<float> ref(n), ours(n);
        format.dequantize_row(host.data(), ref.data(), n);

        DeviceBytes blocks(size), out(n * sizeof(float));
        ASSERT_TRUE(blocks.ok() && out.ok());
        ASSERT_EQ(cudaMemcpy(blocks.get(), host.data(), size, cudaMemcpyHostToDevice), cudaSuccess);
        for_each_weight_format([&](auto tag) {
            if (tag.kType != type) return;
            dequantize_kernel<decltype(tag)::kType>
                <<<64, 128>>>(blocks.get(), reinterpret_cast<float*>(out.get()), n / 8, tables);
        });
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(ours.data(), out.get(), n * sizeof(float), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        EXPECT_EQ(first_mismatch(ours, ref), "");
    }
}

INSTANTIATE_TEST_SUITE_P(WeightFormats, BlockDequantDevice, ::testing::ValuesIn(kGpuWeightFormats),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                             return std::string(format_of(info.param).name);
                         });

}  // namespace
}  // namespace tandem::gpu
