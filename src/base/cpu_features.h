// What the CPU and the OS let us use: instruction-set extensions (cpuid plus the register state
// the OS saves, from XCR0) and the core topology. Built with baseline flags only.
#pragma once

#include <string>

namespace tandem {

struct CpuFeatures {
    std::string vendor;
    std::string brand;
    // x86-64
    bool sse3 = false, ssse3 = false, sse41 = false, sse42 = false, popcnt = false;
    bool avx = false, avx2 = false, fma = false, f16c = false, bmi2 = false;
    bool avx_vnni = false;
    bool avx512f = false, avx512cd = false, avx512vl = false, avx512dq = false, avx512bw = false;
    bool avx512vnni = false, avx512vbmi = false, avx512bf16 = false;
    bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
    // OS register state (XCR0): whether the OS saves YMM, ZMM/opmask and AMX tile state.
    bool os_ymm = false, os_zmm = false, os_amx = false;
    // aarch64
    bool neon = false, dotprod = false, i8mm = false;

    int logical_cores = 1;
    int physical_cores = 1;

    // Space-separated list of the extensions present, for logs and `inspect --system`.
    std::string summary() const;
};

// Detected once, on first use.
const CpuFeatures& cpu_features();

// Asks Linux for permission to use AMX tile data (needed once per process before any tile
// instruction). Returns false when the kernel refuses or the CPU has no AMX.
bool request_amx_permission();

}  // namespace tandem
