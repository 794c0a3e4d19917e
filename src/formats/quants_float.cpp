// Float and integer formats: f32, f16 (IEEE binary16), bf16 (bfloat16), f64 and i8..i64.
// Layout of all of them: one little-endian value per element, no blocks, no scales.
#include "formats/quants_float.h"

#include <cstring>

#include "formats/float16.h"

namespace tandem {
namespace {

template <typename T>
T load(const void* src, int64_t i) {
    T v;
    std::memcpy(&v, static_cast<const uint8_t*>(src) + i * static_cast<int64_t>(sizeof(T)),
                sizeof(T));
    return v;
}

template <typename T>
void store(void* dst, int64_t i, T v) {
    std::memcpy(static_cast<uint8_t*>(dst) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

// Integers and doubles convert with the usual C++ rounding (to nearest even).
template <typename T>
void dequantize_cast(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<T>(src, i));
}

}  // namespace

void dequantize_f32(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
double ref_dot_f32(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(load<float>(weights, i)) * load<float>(act, i);
    }
    return sum;
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(load<uint16_t>(src, i));
}
void quantize_f16(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, f32_to_fp16(src[i]));
}
double ref_dot_f16(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(fp16_to_f32(load<uint16_t>(weights, i))) *
               fp16_to_f32(load<uint16_t>(act, i));
    }
    return sum;
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load<uint16_t>(src, i));
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, f32_to_bf16(src[i]));
}
double ref_dot_bf16(int64_t n, const void* weights, const void* act) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(bf16_to_f32(load<uint16_t>(weights, i))) *
               bf16_to_f32(load<uint16_t>(act, i));
    }
    return sum;
}

void dequantize_f64(const void* src, float* dst, int64_t n) {
    dequantize_cast<double>(src, dst, n);
}
void dequantize_i8(const void* src, float* dst, int64_t n) {
    dequantize_cast<int8_t>(src, dst, n);
}
void dequantize_i16(const void* src, float* dst, int64_t n) {
    dequantize_cast<int16_t>(src, dst, n);
}
void dequantize_i32(const void* src, float* dst, int64_t n) {
    dequantize_cast<int32_t>(src, dst, n);
}
void dequantize_i64(const void* src, float* dst, int64_t n) {
    dequantize_cast<int64_t>(src, dst, n);
}

}  // namespace tandem
