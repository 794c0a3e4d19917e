// The matrix kernels for the i-quants (iq1_s .. iq4_xs).
#include "cuda/matmul_kernels.cuh"

namespace tandem::cuda {

FormatKernelList iquant_format_kernels() { return {nullptr, 0}; }

}  // namespace tandem::cuda
