// The residual add that closes a block, the RMS norm that opens the next and the rounding of
// its output for the products that read it, in one pass over a row (Ops::residual_norm): three
// kernels of a decode step in one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/elementwise.h"
#include "cuda/moe_routing.h"
#include "formats/ggml_type.h"

namespace tandem::cuda {

// Whether residual_norm() takes rows of `cols` values (a multiple of 256, at most 8192).
bool residual_norm_fits(int64_t cols);

// x += residual (unless residual.data is null), out = rms_norm(x) · w (w may be null; out may
// be x), the results of add() and rms_norm(); then, unless dot_type is f32, `rounded` = out
// rounded through dot_type as round_activations() rounds it, with the q8 codes into q8 when
// given (and dot_type has them). With routed.routes set, the residual is instead the MoE output
// moe_weighted_sum() would give of `routed` (the same bits), summed here: a layer's last launch
// saved where only the next norm reads its output.
void residual_norm(DeviceRows x, DeviceRows residual, const float* w, float eps, DeviceRows out,
                   GgmlType dot_type, DeviceRows rounded, const Q8Rows* q8, cudaStream_t stream,
                   const RoutedRows& routed = {});

}  // namespace tandem::cuda
