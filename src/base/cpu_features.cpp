// CPU feature and topology detection.
#include "base/cpu_features.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace tandem {
namespace {

#if defined(__x86_64__)
struct CpuidRegs {
    uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(uint32_t leaf, uint32_t subleaf = 0) {
    CpuidRegs r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
}

uint64_t read_xcr0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

void detect_x86(CpuFeatures& f) {
    CpuidRegs r0 = cpuid(0);
    char vendor[13] = {};
    std::memcpy(vendor + 0, &r0.ebx, 4);
    std::memcpy(vendor + 4, &r0.edx, 4);
    std::memcpy(vendor + 8, &r0.ecx, 4);
    f.vendor = vendor;
    uint32_t max_leaf = r0.eax;

    CpuidRegs r1 = cpuid(1);
    f.sse3 = r1.ecx & (1u << 0);
    f.ssse3 = r1.ecx & (1u << 9);
    f.fma = r1.ecx & (1u << 12);
    f.sse41 = r1.ecx & (1u << 19);
    f.sse42 = r1.ecx & (1u << 20);
    f.popcnt = r1.ecx & (1u << 23);
    bool osxsave = r1.ecx & (1u << 27);
    f.avx = r1.ecx & (1u << 28);
    f.f16c = r1.ecx & (1u << 29);

    if (osxsave) {
        uint64_t xcr0 = read_xcr0();
        f.os_ymm = (xcr0 & 0x6) == 0x6;               // SSE + AVX state
        f.os_zmm = f.os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM_Hi256 + Hi16_ZMM
        f.os_amx = (xcr0 & 0x60000) == 0x60000;        // XTILECFG + XTILEDATA
    }

    if (max_leaf >= 7) {
        CpuidRegs r7 = cpuid(7, 0);
        f.avx2 = r7.ebx & (1u << 5);
        f.bmi2 = r7.ebx & (1u << 8);
        f.avx512f = r7.ebx & (1u << 16);
        f.avx512dq = r7.ebx & (1u << 17);
        f.avx512cd = r7.ebx & (1u << 28);
        f.avx512bw = r7.ebx & (1u << 30);
        f.avx512vl = r7.ebx & (1u << 31);
        f.avx512vbmi = r7.ecx & (1u << 1);
        f.avx512vnni = r7.ecx & (1u << 11);
        f.amx_bf16 = r7.edx & (1u << 22);
        f.amx_tile = r7.edx & (1u << 24);
        f.amx_int8 = r7.edx & (1u << 25);
        CpuidRegs r71 = cpuid(7, 1);
        f.avx_vnni = r71.eax & (1u << 4);
        f.avx512bf16 = r71.eax & (1u << 5);
    }

    CpuidRegs rx = cpuid(0x80000000);
    if (rx.eax >= 0x80000004) {
        char brand[49] = {};
        for (uint32_t i = 0; i < 3; ++i) {
            CpuidRegs b = cpuid(0x80000002 + i);
            std::memcpy(brand + 16 * i + 0, &b.eax, 4);
            std::memcpy(brand + 16 * i + 4, &b.ebx, 4);
            std::memcpy(brand + 16 * i + 8, &b.ecx, 4);
            std::memcpy(brand + 16 * i + 12, &b.edx, 4);
        }
        f.brand = brand;
        while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
        size_t first = f.brand.find_first_not_of(' ');
        f.brand = first == std::string::npos ? std::string() : f.brand.substr(first);
    }
}
#endif

#if defined(__aarch64__)
void detect_arm(CpuFeatures& f) {
    unsigned long hwcap = getauxval(AT_HWCAP);
    unsigned long hwcap2 = getauxval(AT_HWCAP2);
    f.vendor = "arm";
    f.neon = hwcap & HWCAP_ASIMD;
    f.dotprod = hwcap & HWCAP_ASIMDDP;
#ifdef HWCAP2_I8MM
    f.i8mm = hwcap2 & HWCAP2_I8MM;
#else
    (void)hwcap2;
#endif
}
#endif

// Physical cores = distinct (package, core) pairs in sysfs; falls back to the logical count.
int count_physical_cores(int logical) {
    std::set<std::pair<int, int>> cores;
    for (int cpu = 0; cpu < logical; ++cpu) {
        std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
        std::ifstream core_file(base + "core_id");
        std::ifstream package_file(base + "physical_package_id");
        int core = -1, package = -1;
        if (!(core_file >> core) || !(package_file >> package)) return logical;
        cores.insert({package, core});
    }
    return cores.empty() ? logical : static_cast<int>(cores.size());
}

CpuFeatures detect() {
    CpuFeatures f;
#if defined(__x86_64__)
    detect_x86(f);
#elif defined(__aarch64__)
    detect_arm(f);
#endif
    unsigned hw = std::thread::hardware_concurrency();
    f.logical_cores = hw == 0 ? 1 : static_cast<int>(hw);
    f.physical_cores = count_physical_cores(f.logical_cores);
    return f;
}

}  // namespace

std::string CpuFeatures::summary() const {
    std::string out;
    auto add = [&out](bool present, const char* name) {
        if (!present) return;
        if (!out.empty()) out += ' ';
        out += name;
    };
    add(sse42, "sse4.2");
    add(avx && os_ymm, "avx");
    add(avx2 && os_ymm, "avx2");
    add(fma, "fma");
    add(f16c, "f16c");
    add(bmi2, "bmi2");
    add(avx_vnni && os_ymm, "avx-vnni");
    add(avx512f && os_zmm, "avx512f");
    add(avx512cd && os_zmm, "avx512cd");
    add(avx512vl && os_zmm, "avx512vl");
    add(avx512dq && os_zmm, "avx512dq");
    add(avx512bw && os_zmm, "avx512bw");
    add(avx512vnni && os_zmm, "avx512vnni");
    add(avx512vbmi && os_zmm, "avx512vbmi");
    add(avx512bf16 && os_zmm, "avx512bf16");
    add(amx_tile && os_amx, "amx-tile");
    add(amx_int8 && os_amx, "amx-int8");
    add(amx_bf16 && os_amx, "amx-bf16");
    add(neon, "neon");
    add(dotprod, "dotprod");
    add(i8mm, "i8mm");
    if (avx512f && !os_zmm) out += " (avx512 present but not enabled by the OS)";
    return out;
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

bool request_amx_permission() {
#if defined(__x86_64__) && defined(__linux__)
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.os_amx) return false;
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

}  // namespace tandem
