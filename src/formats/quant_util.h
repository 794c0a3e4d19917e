// Helpers shared by the format implementations of this folder (not used outside formats/):
// block loads and stores, rounding, a small deterministic random generator, and the two ways
// of making random blocks (through a quantizer, or random payload with calibrated scales).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "formats/float16.h"

namespace tandem::formats_detail {

// Blocks are read and written with memcpy: block sizes such as 17 or 54 bytes leave fields
// unaligned, and the bytes usually come from a file mapping.
template <typename Block>
Block load_block(const void* src, int64_t i) {
    Block b;
    std::memcpy(&b, static_cast<const uint8_t*>(src) + i * static_cast<int64_t>(sizeof(Block)),
                sizeof(Block));
    return b;
}
template <typename Block>
void store_block(void* dst, int64_t i, const Block& b) {
    std::memcpy(static_cast<uint8_t*>(dst) + i * static_cast<int64_t>(sizeof(Block)), &b,
                sizeof(Block));
}

// Round to nearest, ties to even (the default rounding mode), as ggml's nearest_int.
inline int round_even(float x) {
    return static_cast<int>(std::lrint(x));
}
// Round to nearest, ties away from zero (C's roundf).
inline int round_away(float x) {
    return static_cast<int>(std::lround(x));
}
inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// Index of the entry of `levels` (n of them) nearest to x; ties go to the lower index.
template <typename T>
int nearest_level(float x, const T* levels, int n) {
    int best = 0;
    float best_err = std::fabs(x - static_cast<float>(levels[0]));
    for (int i = 1; i < n; ++i) {
        const float err = std::fabs(x - static_cast<float>(levels[i]));
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

// Squared error of x[0..n) quantized as scale * (nearest level).
template <typename T>
double level_sse(const float* x, int n, float scale, const T* levels, int n_levels) {
    double sse = 0;
    for (int j = 0; j < n; ++j) {
        const float v =
            scale * static_cast<float>(
                        levels[nearest_level(scale != 0 ? x[j] / scale : 0.0f, levels, n_levels)]);
        sse += static_cast<double>(x[j] - v) * (x[j] - v);
    }
    return sse;
}

// splitmix64 seeding an xorshift64* stream: deterministic on every platform.
class Rng {
  public:
    explicit Rng(uint64_t seed) {
        uint64_t z = seed + 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        state_ = (z ^ (z >> 31)) | 1;
    }
    uint64_t next() {
        state_ ^= state_ >> 12;
        state_ ^= state_ << 25;
        state_ ^= state_ >> 27;
        return state_ * 2685821657736338717ull;
    }
    // Uniform in [-1, 1).
    float uniform() { return static_cast<float>(next() >> 40) * 0x1p-23f - 1.0f; }
    // Roughly N(0, 1): the sum of four uniforms, rescaled to unit variance. Only + and *, so
    // the stream is the same with every math library.
    float normal() { return (uniform() + uniform() + uniform() + uniform()) * 0.8660254037844386f; }
    float sign() { return (next() >> 63) ? -1.0f : 1.0f; }
    void fill(void* dst, size_t n) {
        auto* p = static_cast<uint8_t*>(dst);
        for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(next() >> 56);
    }

  private:
    uint64_t state_;
};

// Random blocks through a quantizer: each block holds `block_size` N(0, scale^2) values
// quantized. Symmetric values give every format its natural mix of signs and no common mode.
template <int kBlockSize, size_t kBlockBytes>
void random_by_quantizing(void (*quantize)(const float*, void*, int64_t), void* dst,
                          int64_t n_blocks, uint64_t seed, float scale) {
    Rng rng(seed);
    float values[kBlockSize];
    for (int64_t b = 0; b < n_blocks; ++b) {
        for (float& v : values) v = scale * rng.normal();
        quantize(values, static_cast<uint8_t*>(dst) + b * static_cast<int64_t>(kBlockBytes),
                 kBlockSize);
    }
}

// RMS of the values of one block, in double.
template <int kBlockSize>
double block_rms(void (*dequantize)(const void*, float*, int64_t), const void* block) {
    float values[kBlockSize];
    dequantize(block, values, kBlockSize);
    double sum = 0;
    for (float v : values) sum += static_cast<double>(v) * v;
    return std::sqrt(sum / kBlockSize);
}

// The fp16 scale that turns a block of RMS `rms` at unit scale into one of RMS `target`, with
// a random sign; always finite.
inline uint16_t calibrated_fp16_scale(Rng& rng, double rms, float target) {
    double d = rms > 0 ? target / rms : target;
    if (d > 65504.0) d = 65504.0;
    return f32_to_fp16(rng.sign() * static_cast<float>(d));
}

}  // namespace tandem::formats_detail
