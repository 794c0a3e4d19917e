// Helpers shared by the format implementations of this folder (not used outside formats/):
// block loads and stores, rounding, nearest-level search, a small deterministic random
// generator, and random blocks with calibrated scales.
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

// Round to nearest, ties to even, as ggml's nearest_int: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits (exact for |x| < 2^22; larger inputs are clamped first).
inline int round_even(float x) {
    const float v =
        (x < -4194303.0f ? -4194303.0f : (x > 4194303.0f ? 4194303.0f : x)) + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &v, 4);
    return (bits & 0x007fffff) - 0x00400000;
}
inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}
// Plain comparisons (std::fmax / std::fmin are library calls on baseline x86-64).
inline float max_f(float a, float b) {
    return a > b ? a : b;
}
inline float min_f(float a, float b) {
    return a < b ? a : b;
}
inline float max_abs(const float* x, int n) {
    float amax = 0;
    for (int j = 0; j < n; ++j) amax = max_f(amax, std::fabs(x[j]));
    return amax;
}

// An ascending table of N levels with its midpoints. nearest(x) counts the midpoints below x:
// the index of the nearest level, the lower one on a tie, without branches.
template <int N>
struct LevelSet {
    float level[N];
    float mid[N - 1];

    template <typename T>
    explicit LevelSet(const T* values) {
        for (int i = 0; i < N; ++i) level[i] = static_cast<float>(values[i]);
        for (int i = 0; i + 1 < N; ++i) mid[i] = 0.5f * (level[i] + level[i + 1]);
    }
    int nearest(float x) const {
        int k = 0;
        for (int i = 0; i + 1 < N; ++i) k += x > mid[i];
        return k;
    }
};

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
    // Uniform in 0..n-1 (n small).
    int below(int n) { return static_cast<int>(((next() >> 32) * static_cast<uint64_t>(n)) >> 32); }
    float sign() { return (next() >> 63) ? -1.0f : 1.0f; }
    void fill(void* dst, size_t n) {
        auto* p = static_cast<uint8_t*>(dst);
        for (size_t i = 0; i < n; i += 8) {
            const uint64_t r = next();
            std::memcpy(p + i, &r, n - i < 8 ? n - i : 8);
        }
    }

  private:
    uint64_t state_;
};

// Random blocks for every format (what a model synthesizer uses when it does not quantize):
// `fill` writes a random but valid payload at unit scale; the block is dequantized, and
// `rescale(block, factor)` multiplies its scales by `factor`, chosen so that the block's RMS
// becomes `scale`, with a random sign per block (so no tensor has a common-mode component).
template <typename Block, int kBlockSize, typename Fill, typename Rescale>
void random_calibrated(void* dst, int64_t n_blocks, uint64_t seed, float scale,
                       void (*dequantize)(const void*, float*, int64_t), Fill fill,
                       Rescale rescale) {
    Rng rng(seed);
    float values[kBlockSize];
    for (int64_t i = 0; i < n_blocks; ++i) {
        Block b;
        fill(rng, b);
        dequantize(&b, values, kBlockSize);
        double sum = 0;
        for (float v : values) sum += static_cast<double>(v) * v;
        const double rms = std::sqrt(sum / kBlockSize);
        const double factor = rms > 0 ? scale / rms : scale;
        rescale(b, rng.sign() * static_cast<float>(factor));
        store_block(dst, i, b);
    }
}

constexpr uint16_t kFp16One = 0x3c00;

// An fp16 scale field for `value`, kept finite.
inline uint16_t finite_fp16(float value) {
    if (!(value == value)) return 0;  // NaN
    return f32_to_fp16(max_f(-65504.0f, min_f(65504.0f, value)));
}

}  // namespace tandem::formats_detail
