// Scores every kernel variant against the CPU and keeps the best (or TANDEM_CPU_VARIANT).
// Built with baseline flags: it only reads cpuid (or HWCAP) results and takes the tables'
// addresses.
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "kernels/kernel_table.h"
#include "kernels/variant_reference.h"
#include "kernels/variants.h"

namespace tandem {
namespace {

#if defined(__x86_64__)
// What each x86 variant needs: cpuid bits plus the register state the OS saves (XCR0). A
// variant scores 0 when anything is missing; otherwise its rank (a later ISA ranks higher).
bool has_avx2(const CpuFeatures& c) {
    return c.os_ymm && c.avx && c.avx2 && c.fma && c.f16c && c.bmi2;
}
bool has_avx512(const CpuFeatures& c) {
    return has_avx2(c) && c.os_zmm && c.avx512f && c.avx512cd && c.avx512vl && c.avx512dq &&
           c.avx512bw;
}
bool has_avx512_vnni(const CpuFeatures& c) {
    return has_avx512(c) && c.avx512vnni && c.avx512vbmi;
}
#endif

int score_reference(const CpuFeatures&) {
    return 1;
}
int score_baseline(const CpuFeatures&) {
    return 10;
}
// (maybe_unused: a build may leave variants out, TANDEM_KERNEL_VARIANTS in CMakeLists.txt.)
#if defined(__x86_64__)
[[maybe_unused]] int score_avx2(const CpuFeatures& c) {
    return has_avx2(c) ? 20 : 0;
}
[[maybe_unused]] int score_avx_vnni(const CpuFeatures& c) {
    return has_avx2(c) && c.avx_vnni ? 30 : 0;
}
[[maybe_unused]] int score_avx512(const CpuFeatures& c) {
    return has_avx512(c) ? 40 : 0;
}
[[maybe_unused]] int score_avx512_vnni(const CpuFeatures& c) {
    return has_avx512_vnni(c) ? 50 : 0;
}
[[maybe_unused]] int score_avx512_bf16(const CpuFeatures& c) {
    return has_avx512_vnni(c) && c.avx512bf16 ? 60 : 0;
}
#endif
#if defined(__aarch64__)
// aarch64: the HWCAP bits (set by the kernel only for what it supports).
[[maybe_unused]] int score_neon_dotprod(const CpuFeatures& c) {
    return c.neon && c.dotprod ? 20 : 0;
}
[[maybe_unused]] int score_neon_i8mm(const CpuFeatures& c) {
    return c.neon && c.dotprod && c.i8mm ? 30 : 0;
}
#endif

template <const KernelTable* kTable>
const KernelTable* table_of() {
    return kTable;
}

constexpr KernelVariant kVariants[] = {
    {"reference", "scalar reference (format table)", score_reference, reference_kernel_table},
#ifdef TANDEM_KERNELS_HAVE_baseline
    {"baseline", "plain C++ (any CPU)", score_baseline, table_of<&kernels_baseline::kKernelTable>},
#endif
#ifdef TANDEM_KERNELS_HAVE_avx2
    {"avx2", "AVX2 + FMA + F16C + BMI2", score_avx2, table_of<&kernels_avx2::kKernelTable>},
#endif
#ifdef TANDEM_KERNELS_HAVE_avx_vnni
    {"avx_vnni", "AVX2 + AVX-VNNI (vpdpbusd on ymm)", score_avx_vnni,
     table_of<&kernels_avx_vnni::kKernelTable>},
#endif
#ifdef TANDEM_KERNELS_HAVE_avx512
    {"avx512", "AVX-512 F/CD/VL/DQ/BW", score_avx512, table_of<&kernels_avx512::kKernelTable>},
#endif
#ifdef TANDEM_KERNELS_HAVE_avx512_vnni
    {"avx512_vnni", "AVX-512 + VNNI + VBMI", score_avx512_vnni,
     table_of<&kernels_avx512_vnni::kKernelTable>},
#endif
#ifdef TANDEM_KERNELS_HAVE_avx512_bf16
    {"avx512_bf16", "AVX-512 + VNNI + VBMI + BF16 (vdpbf16ps)", score_avx512_bf16,
     table_of<&kernels_avx512_bf16::kKernelTable>},
#endif
#ifdef TANDEM_KERNELS_HAVE_neon_dotprod
    {"neon_dotprod", "NEON + dotprod (sdot)", score_neon_dotprod,
     table_of<&kernels_neon_dotprod::kKernelTable>},
#endif
#ifdef TANDEM_KERNELS_HAVE_neon_i8mm
    {"neon_i8mm", "NEON + dotprod + i8mm (usdot)", score_neon_i8mm,
     table_of<&kernels_neon_i8mm::kKernelTable>},
#endif
};

std::string variant_names() {
    std::string names;
    for (const KernelVariant& k : kVariants)
        names += (names.empty() ? "" : ", ") + std::string(k.name);
    return names;
}

const KernelVariant& choose() {
    const CpuFeatures& cpu = cpu_features();
    const char* forced = std::getenv("TANDEM_CPU_VARIANT");
    if (forced != nullptr && *forced != '\0') {
        const KernelVariant* v = find_kernel_variant(forced);
        if (v == nullptr) {
            fail("TANDEM_CPU_VARIANT={}: unknown variant (built: {})", forced, variant_names());
        }
        if (v->score(cpu) <= 0) {
            fail("TANDEM_CPU_VARIANT={}: this CPU cannot run it (it needs {}; the CPU has: {})",
                 forced, v->description, cpu.summary());
        }
        log_info("cpu: kernel variant {} (forced by TANDEM_CPU_VARIANT)", v->name);
        return *v;
    }
    const KernelVariant* best = &kVariants[0];
    int best_score = 0;
    for (const KernelVariant& v : kVariants) {
        const int s = v.score(cpu);
        if (s > best_score) {
            best = &v;
            best_score = s;
        }
    }
    log_info("cpu: kernel variant {} ({})", best->name, best->description);
    return *best;
}

}  // namespace

std::span<const KernelVariant> kernel_variants() {
    return kVariants;
}

const KernelVariant* find_kernel_variant(std::string_view name) {
    for (const KernelVariant& v : kVariants) {
        if (v.name == name) return &v;
    }
    return nullptr;
}

const KernelVariant& chosen_kernel_variant() {
    static const KernelVariant& chosen = choose();
    return chosen;
}

}  // namespace tandem
