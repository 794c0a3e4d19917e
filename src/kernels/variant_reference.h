// The reference kernel table: the format table's scalar quantizers and dot products, wrapped in
// the tile contract. Slow; it is what every optimized variant is tested against.
#pragma once

#include "kernels/kernel_table.h"

namespace tandem {

const KernelTable* reference_kernel_table();

}  // namespace tandem
