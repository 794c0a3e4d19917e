// CUDA errors as Tandem errors: one line naming the operation that failed and the runtime's
// reason. Usable from .cu files (no fmt here).
#pragma once

#include <cuda_runtime.h>

namespace tandem::cuda {

// Throws Error("CUDA error in WHAT: REASON") unless e is cudaSuccess.
void check(cudaError_t e, const char* what);
// After a kernel launch: the launch's own error (bad configuration, no kernel image for this GPU).
void check_launch(const char* kernel);

}  // namespace tandem::cuda
