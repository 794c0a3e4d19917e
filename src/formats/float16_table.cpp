// The table of every IEEE half's value (float16.h), computed by the compiler: constant data,
// no start-up work.
#include "formats/float16.h"

namespace tandem {
namespace {

constexpr std::array<float, 65536> all_fp16_values() {
    std::array<float, 65536> values{};
    for (uint32_t h = 0; h < values.size(); ++h) values[h] = fp16_to_f32(static_cast<uint16_t>(h));
    return values;
}

}  // namespace

alignas(64) constinit const std::array<float, 65536> kFp16Values = all_fp16_values();

}  // namespace tandem
