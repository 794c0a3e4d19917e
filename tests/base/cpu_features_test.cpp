// CPU feature detection agrees with the compiler's own cpuid probe, and the summary only names
// what the OS lets us use.
#include "base/cpu_features.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

bool names(const std::string& summary, const std::string& word) {
    return (" " + summary + " ").find(" " + word + " ") != std::string::npos;
}

TEST(CpuFeatures, CoresAreCounted) {
    const CpuFeatures& f = cpu_features();
    EXPECT_GE(f.logical_cores, 1);
    EXPECT_GE(f.physical_cores, 1);
    EXPECT_LE(f.physical_cores, f.logical_cores);
}

#if defined(__x86_64__)
TEST(CpuFeatures, AgreesWithTheCompilersProbe) {
    const CpuFeatures& f = cpu_features();
    __builtin_cpu_init();
    // The compiler's probe also checks the OS-saved state for AVX and AVX-512.
    EXPECT_EQ(f.avx2 && f.os_ymm, static_cast<bool>(__builtin_cpu_supports("avx2")));
    EXPECT_EQ(f.fma && f.os_ymm, static_cast<bool>(__builtin_cpu_supports("fma")));
    EXPECT_EQ(f.avx512f && f.os_zmm, static_cast<bool>(__builtin_cpu_supports("avx512f")));
    EXPECT_EQ(f.avx512bw && f.os_zmm, static_cast<bool>(__builtin_cpu_supports("avx512bw")));
}

TEST(CpuFeatures, SummaryNamesOnlyUsableExtensions) {
    const CpuFeatures& f = cpu_features();
    const std::string s = f.summary();
    EXPECT_EQ(names(s, "avx2"), f.avx2 && f.os_ymm) << s;
    if (!f.os_zmm) {
        EXPECT_FALSE(names(s, "avx512f")) << s;
    }
}
#elif defined(__aarch64__)
// Advanced SIMD is part of every AArch64 Linux system; dotprod and i8mm come from HWCAP(2).
TEST(CpuFeatures, ArmExtensionsFromHwcap) {
    const CpuFeatures& f = cpu_features();
    const std::string s = f.summary();
    EXPECT_TRUE(f.neon) << s;
    EXPECT_TRUE(names(s, "neon")) << s;
    EXPECT_EQ(names(s, "dotprod"), f.dotprod) << s;
    EXPECT_EQ(names(s, "i8mm"), f.i8mm) << s;
    EXPECT_FALSE(names(s, "avx2")) << s;
}
#endif

}  // namespace
}  // namespace tandem
