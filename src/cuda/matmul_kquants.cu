// The matrix kernels for the k-quants (q2_K .. q6_K) and the ternary tq1_0, tq2_0.
#include "cuda/matmul_int_kernels.cuh"

namespace tandem::cuda {

FormatKernelList kquant_format_kernels() {
    static constexpr FormatKernels kList[] = {
        all_format_kernels_of<GgmlType::kQ2_K>(),  all_format_kernels_of<GgmlType::kQ3_K>(),
        all_format_kernels_of<GgmlType::kQ4_K>(),  all_format_kernels_of<GgmlType::kQ5_K>(),
        all_format_kernels_of<GgmlType::kQ6_K>(),  all_format_kernels_of<GgmlType::kTQ1_0>(),
        all_format_kernels_of<GgmlType::kTQ2_0>(),
    };
    return {kList, static_cast<int>(sizeof(kList) / sizeof(kList[0]))};
}

}  // namespace tandem::cuda
