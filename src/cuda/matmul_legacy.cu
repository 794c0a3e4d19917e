// The matrix kernels for the 32-value block formats and the small-float ones (q4_0 .. q8_0,
// iq4_nl, mxfp4, nvfp4, q1_0, q2_0).
#include "cuda/matmul_int_kernels.cuh"

namespace tandem::cuda {

FormatKernelList legacy_format_kernels() {
    static constexpr FormatKernels kList[] = {
        all_format_kernels_of<GgmlType::kQ4_0>(),  all_format_kernels_of<GgmlType::kQ4_1>(),
        all_format_kernels_of<GgmlType::kQ5_0>(),  all_format_kernels_of<GgmlType::kQ5_1>(),
        all_format_kernels_of<GgmlType::kQ8_0>(),  all_format_kernels_of<GgmlType::kIQ4_NL>(),
        all_format_kernels_of<GgmlType::kMXFP4>(), all_format_kernels_of<GgmlType::kNVFP4>(),
        all_format_kernels_of<GgmlType::kQ1_0>(),  all_format_kernels_of<GgmlType::kQ2_0>(),
    };
    return {kList, static_cast<int>(sizeof(kList) / sizeof(kList[0]))};
}

}  // namespace tandem::cuda
