// The 32-value block formats: q4_0, q4_1, q5_0, q5_1, q8_0 (weights) and q8_1 (activations).
#pragma once

#include "formats/format_functions.h"

namespace tandem {

TANDEM_DECLARE_FORMAT(q4_0)
TANDEM_DECLARE_FORMAT(q4_1)
TANDEM_DECLARE_FORMAT(q5_0)
TANDEM_DECLARE_FORMAT(q5_1)
TANDEM_DECLARE_FORMAT(q8_0)
void dequantize_q8_1(const void* src, float* dst, int64_t n);
void quantize_q8_1(const float* src, void* dst, int64_t n);

}  // namespace tandem
