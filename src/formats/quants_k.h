// The 256-value super-block "k-quants": q2_K..q6_K (weights) and q8_K (activations).
#pragma once

#include "formats/format_functions.h"

namespace tandem {

TANDEM_DECLARE_FORMAT(q2_K)
TANDEM_DECLARE_FORMAT(q3_K)
TANDEM_DECLARE_FORMAT(q4_K)
TANDEM_DECLARE_FORMAT(q5_K)
TANDEM_DECLARE_FORMAT(q6_K)
void dequantize_q8_K(const void* src, float* dst, int64_t n);
void quantize_q8_K(const float* src, void* dst, int64_t n);

}  // namespace tandem
