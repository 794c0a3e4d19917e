// The matrix kernels for the i-quants (iq1_s .. iq4_xs).
#include "cuda/matmul_int_kernels.cuh"

namespace tandem::cuda {

FormatKernelList iquant_format_kernels() {
    static constexpr FormatKernels kList[] = {
        all_format_kernels_of<GgmlType::kIQ2_XXS>(), all_format_kernels_of<GgmlType::kIQ2_XS>(),
        all_format_kernels_of<GgmlType::kIQ2_S>(),   all_format_kernels_of<GgmlType::kIQ3_XXS>(),
        all_format_kernels_of<GgmlType::kIQ3_S>(),   all_format_kernels_of<GgmlType::kIQ1_S>(),
        all_format_kernels_of<GgmlType::kIQ1_M>(),   all_format_kernels_of<GgmlType::kIQ4_XS>(),
    };
    return {kList, static_cast<int>(sizeof(kList) / sizeof(kList[0]))};
}

}  // namespace tandem::cuda
