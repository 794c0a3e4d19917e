// Scores every kernel variant against the CPU and keeps the best (or TANDEM_CPU_VARIANT).
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "kernels/kernel_table.h"
#include "kernels/variant_reference.h"

namespace tandem {
namespace {

int score_reference(const CpuFeatures&) { return 1; }

constexpr KernelVariant kVariants[] = {
    {"reference", "scalar reference (format table)", score_reference, reference_kernel_table},
};

const KernelVariant& choose() {
    const CpuFeatures& cpu = cpu_features();
    const char* forced = std::getenv("TANDEM_CPU_VARIANT");
    if (forced != nullptr && *forced != '\0') {
        const KernelVariant* v = find_kernel_variant(forced);
        if (v == nullptr) {
            std::string names;
            for (const KernelVariant& k : kVariants) names += (names.empty() ? "" : ", ") + std::string(k.name);
            fail("TANDEM_CPU_VARIANT={}: unknown variant (built: {})", forced, names);
        }
        if (v->score(cpu) <= 0) {
            fail("TANDEM_CPU_VARIANT={}: this CPU cannot run it (has: {})", forced, cpu.summary());
        }
        log_info("cpu: variant {} (forced by TANDEM_CPU_VARIANT)", v->name);
        return *v;
    }
    const KernelVariant* best = &kVariants[0];
    int best_score = 0;
    for (const KernelVariant& v : kVariants) {
        int s = v.score(cpu);
        if (s > best_score) {
            best = &v;
            best_score = s;
        }
    }
    log_info("cpu: variant {} ({})", best->name, best->description);
    return *best;
}

}  // namespace

std::span<const KernelVariant> kernel_variants() { return kVariants; }

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
