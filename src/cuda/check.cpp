// CUDA errors as Tandem errors.
#include "cuda/check.h"

#include "base/error.h"

namespace tandem::cuda {

void check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a non-sticky error so later calls report their own
    fail("CUDA error in {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

void check_launch(const char* kernel) {
    check(cudaGetLastError(), kernel);
}

}  // namespace tandem::cuda
