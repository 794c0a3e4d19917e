// This variant's kernel table: the baseline's plain C++ kernel for every type, replaced by the
// variant's own kernel where it has one. Constant-initialized (constinit): no start-up code.
#include "formats/quants_float.h"
#include "formats/quants_k.h"
#include "formats/quants_legacy.h"
#include "kernels/variant/kernel_decls.h"
#include "kernels/variants.h"

namespace tandem::TANDEM_VARIANT_NS {
namespace {

consteval KernelTable make_table() {
    KernelTable t{};
    t.name = TANDEM_VARIANT_NAME;
#define TANDEM_SET_DOT(name, id) t.dot[type_id(GgmlType::k##id)] = &kernels_baseline::dot_##name;
    TANDEM_WEIGHT_TYPES(TANDEM_SET_DOT)
#undef TANDEM_SET_DOT
    // The baseline's activation quantizers are the format table's references themselves.
#define TANDEM_SET_QUANTIZE(name, id) \
    t.quantize[type_id(GgmlType::k##id)] = &tandem::quantize_##name;
    TANDEM_ACTIVATION_TYPES(TANDEM_SET_QUANTIZE)
#undef TANDEM_SET_QUANTIZE
    t.delta_rule_step = &kernels_baseline::delta_rule_step;
#if !defined(TANDEM_VARIANT_BASELINE)
    t.delta_rule_step = &delta_rule_step;
#define TANDEM_SET_DOT(name, id) t.dot[type_id(GgmlType::k##id)] = &dot_##name;
    TANDEM_SIMD_WEIGHT_TYPES(TANDEM_SET_DOT)
#undef TANDEM_SET_DOT
#define TANDEM_SET_QUANTIZE(name, id) t.quantize[type_id(GgmlType::k##id)] = &quantize_##name;
    TANDEM_ACTIVATION_TYPES(TANDEM_SET_QUANTIZE)
#undef TANDEM_SET_QUANTIZE
#endif
    return t;
}

}  // namespace

constinit const KernelTable kKernelTable = make_table();

}  // namespace tandem::TANDEM_VARIANT_NS
