// The i-quant lookup tables in device memory.
#include "cuda/dequant_tables.h"

#include <cuda_runtime.h>

#include "cuda/check.h"

namespace tandem::cuda {

DeviceDequantTables::DeviceDequantTables() {
    size_t total = 0;
    for (const gpu::DequantTablePart& part : gpu::dequant_table_parts())
        total += align_up(part.bytes, 8);
    buffer_ = DeviceBuffer(total, "the i-quant tables");
    size_t offset = 0;
    for (const gpu::DequantTablePart& part : gpu::dequant_table_parts()) {
        uint8_t* dst = buffer_.as<uint8_t>() + offset;
        check(cudaMemcpy(dst, part.host, part.bytes, cudaMemcpyHostToDevice),
              "i-quant table upload");
        tables_.*part.member = dst;
        offset += align_up(part.bytes, 8);
    }
}

}  // namespace tandem::cuda
