// The i-quant lookup tables in device memory, for the block decoders of block_dequant.h.
#pragma once

#include "cuda/block_dequant.h"
#include "cuda/memory.h"

namespace tandem::cuda {

class DeviceDequantTables {
  public:
    // Copies every table (dequant_table_parts()) to the current device.
    DeviceDequantTables();
    const gpu::DequantTables& tables() const { return tables_; }

  private:
    DeviceBuffer buffer_;
    gpu::DequantTables tables_{};
};

}  // namespace tandem::cuda
