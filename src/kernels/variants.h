// The kernel tables each instruction-set variant exports (one constant-initialized table per
// variant namespace, defined in variant/table.cpp). Only their addresses are taken before a
// variant is chosen, so nothing built with variant flags runs at start-up.
#pragma once

#include "kernels/kernel_table.h"

namespace tandem {

namespace kernels_baseline {
extern const KernelTable kKernelTable;
}
namespace kernels_avx2 {
extern const KernelTable kKernelTable;
}
namespace kernels_avx_vnni {
extern const KernelTable kKernelTable;
}
namespace kernels_avx512 {
extern const KernelTable kKernelTable;
}
namespace kernels_avx512_vnni {
extern const KernelTable kKernelTable;
}
namespace kernels_avx512_bf16 {
extern const KernelTable kKernelTable;
}
namespace kernels_neon_dotprod {
extern const KernelTable kKernelTable;
}
namespace kernels_neon_i8mm {
extern const KernelTable kKernelTable;
}

}  // namespace tandem
