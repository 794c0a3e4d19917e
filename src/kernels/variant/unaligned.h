// Unaligned little-endian scalar loads from block bytes, shared by the x86 and NEON layers
// (simd.h, simd_neon.h); in the variant's namespace like everything the variants inline.
#pragma once

#include <cstdint>
#include <cstring>

namespace tandem::TANDEM_VARIANT_NS::simd {

inline uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline float load_f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
}

}  // namespace tandem::TANDEM_VARIANT_NS::simd
