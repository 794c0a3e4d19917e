// The matrix kernels for the i-quants (iq1_s .. iq4_xs).
#include "cuda/matmul_kernels.cuh"

namespace tandem::cuda {

FormatKernelList iquant_format_kernels() {
    static constexpr FormatKernels kList[] = {
        format_kernels_of<GgmlType::kIQ2_XXS>(), format_kernels_of<GgmlType::kIQ2_XS>(),
        format_kernels_of<GgmlType::kIQ2_S>(),   format_kernels_of<GgmlType::kIQ3_XXS>(),
        format_kernels_of<GgmlType::kIQ3_S>(),   format_kernels_of<GgmlType::kIQ1_S>(),
        format_kernels_of<GgmlType::kIQ1_M>(),   format_kernels_of<GgmlType::kIQ4_XS>(),
    };
    return {kList, static_cast<int>(sizeof(kList) / sizeof(kList[0]))};
}

}  // namespace tandem::cuda
