// The table of every IEEE half's value (float16.h), computed by the compiler: constant data,
// no start-up work.
#include "formats/float16.h"

namespace tandem {
namespace {

// The positive halves by fp16_to_f32, the negative ones as their negations (the sign bit alone,
// NaN payloads kept): clang stops a constant evaluation after about a million steps, and a call
// of fp16_to_f32 takes it about 19, so all 65536 calls did not fit.
constexpr std::array<float, 65536> all_fp16_values() {
    std::array<float, 65536> values{};
    for (uint32_t h = 0; h < 0x8000; ++h) values[h] = fp16_to_f32(static_cast<uint16_t>(h));
    for (uint32_t h = 0; h < 0x8000; ++h) values[h | 0x8000] = -values[h];
    return values;
}

}  // namespace

alignas(64) constinit const std::array<float, 65536> kFp16Values = all_fp16_values();

}  // namespace tandem
