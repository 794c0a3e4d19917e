// The gated delta rule's step for this variant: the plain loops (kernels/delta_rule_loops.h)
// built with the variant's flags, over its own f32 dot tile. (The model code is built for the
// baseline CPU: there the passes over a head's state ran four floats at a time, a fifth of a
// qwen3.5 prompt's time on a Zen 4.)
#include "kernels/delta_rule_loops.h"
#include "kernels/variant/kernel_decls.h"

namespace tandem::TANDEM_VARIANT_NS {

void delta_rule_step(float* M, int S, const float* q, const float* k, const float* v, float decay,
                     float beta, float scale, float* out, float* delta) {
    delta_rule_loops(&dot_f32, M, S, q, k, v, decay, beta, scale, out, delta);
}

}  // namespace tandem::TANDEM_VARIANT_NS
