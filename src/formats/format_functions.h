// Declares the four table functions of one format family member (see format_table.h).
#pragma once

#include <cstdint>

#define TANDEM_DECLARE_FORMAT(name)                                          \
    void dequantize_##name(const void* src, float* dst, int64_t n);          \
    void quantize_##name(const float* src, void* dst, int64_t n);            \
    double ref_dot_##name(int64_t n, const void* weights, const void* act);  \
    void random_##name(void* dst, int64_t n_blocks, uint64_t seed, float scale);
