// Float and integer formats: f32, f16, bf16, f64 and i8..i64 (layout: one value per element,
// little-endian). Float weights take activations in their own format (ggml's vec_dot types).
#pragma once

#include <cstdint>

namespace tandem {

void dequantize_f32(const void* src, float* dst, int64_t n);
void quantize_f32(const float* src, void* dst, int64_t n);
double ref_dot_f32(int64_t n, const void* weights, const void* act);
void dequantize_f16(const void* src, float* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
double ref_dot_f16(int64_t n, const void* weights, const void* act);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
double ref_dot_bf16(int64_t n, const void* weights, const void* act);
void dequantize_f64(const void* src, float* dst, int64_t n);
void dequantize_i8(const void* src, float* dst, int64_t n);
void dequantize_i16(const void* src, float* dst, int64_t n);
void dequantize_i32(const void* src, float* dst, int64_t n);
void dequantize_i64(const void* src, float* dst, int64_t n);

}  // namespace tandem
