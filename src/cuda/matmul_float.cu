// The matrix kernels for the float formats (f32, f16, bf16, f64).
#include "cuda/matmul_kernels.cuh"

namespace tandem::cuda {

FormatKernelList float_format_kernels() {
    static constexpr FormatKernels kList[] = {
        format_kernels_of<GgmlType::kF32>(),
        format_kernels_of<GgmlType::kF16>(),
        format_kernels_of<GgmlType::kBF16>(),
        format_kernels_of<GgmlType::kF64>(),
    };
    return {kList, static_cast<int>(sizeof(kList) / sizeof(kList[0]))};
}

}  // namespace tandem::cuda
