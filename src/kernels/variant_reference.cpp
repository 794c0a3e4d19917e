// The reference kernel table, from the format table's scalar functions.
#include "kernels/variant_reference.h"

#include <array>

#include "formats/format_table.h"
#include "kernels/delta_rule_loops.h"

namespace tandem {
namespace {

void reference_dot_tile(const FormatTraits& f, int64_t k, const uint8_t* w, size_t w_stride,
                        int n_rows, const uint8_t* a, size_t a_stride, int n_cols, float* out,
                        size_t out_stride) {
    for (int c = 0; c < n_cols; ++c) {
        for (int r = 0; r < n_rows; ++r) {
            out[c * out_stride + r] =
                static_cast<float>(f.ref_dot(k, w + r * w_stride, a + c * a_stride));
        }
    }
}

// One tile function per type id, made by a template so the table stays constant-initialized.
template <uint32_t Id>
void dot_tile(int64_t k, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* a,
              size_t a_stride, int n_cols, float* out, size_t out_stride) {
    reference_dot_tile(*find_format(Id), k, w, w_stride, n_rows, a, a_stride, n_cols, out,
                       out_stride);
}

template <uint32_t Id>
void quantize(const float* x, void* dst, int64_t k) {
    find_format(Id)->quantize_row(x, dst, k);
}

void delta_rule_step(float* M, int S, const float* q, const float* k, const float* v, float decay,
                     float beta, float scale, float* out, float* delta) {
    delta_rule_loops(&dot_tile<type_id(GgmlType::kF32)>, M, S, q, k, v, decay, beta, scale, out,
                     delta);
}

KernelTable make_table() {
    KernelTable t{};
    t.name = "reference";
    t.delta_rule_step = &delta_rule_step;
    [&]<uint32_t... Ids>(std::integer_sequence<uint32_t, Ids...>) {
        ((t.dot[Ids] = (find_format(Ids) && find_format(Ids)->ref_dot) ? &dot_tile<Ids> : nullptr),
         ...);
        ((t.quantize[Ids] =
              (find_format(Ids) && find_format(Ids)->quantize_row) ? &quantize<Ids> : nullptr),
         ...);
    }
    (std::make_integer_sequence<uint32_t, kGgmlTypeIdLimit>{});
    return t;
}

}  // namespace

const KernelTable* reference_kernel_table() {
    static const KernelTable table = make_table();
    return &table;
}

}  // namespace tandem
