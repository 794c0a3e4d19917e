// Ternary and 1/2-bit formats (tq1_0, tq2_0, q1_0, q2_0) and the 4-bit floats with block
// scales (mxfp4: E8M0 scale per 32; nvfp4: UE4M3 scale per 16).
#pragma once

#include "formats/format_functions.h"

namespace tandem {

TANDEM_DECLARE_FORMAT(tq1_0)
TANDEM_DECLARE_FORMAT(tq2_0)
TANDEM_DECLARE_FORMAT(q1_0)
TANDEM_DECLARE_FORMAT(q2_0)
TANDEM_DECLARE_FORMAT(mxfp4)
TANDEM_DECLARE_FORMAT(nvfp4)

}  // namespace tandem
