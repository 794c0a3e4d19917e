// The lattice and non-linear "i-quants": iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq4_nl, iq4_xs.
#pragma once

#include "formats/format_functions.h"

namespace tandem {

TANDEM_DECLARE_FORMAT(iq1_s)
TANDEM_DECLARE_FORMAT(iq1_m)
TANDEM_DECLARE_FORMAT(iq2_xxs)
TANDEM_DECLARE_FORMAT(iq2_xs)
TANDEM_DECLARE_FORMAT(iq2_s)
TANDEM_DECLARE_FORMAT(iq3_xxs)
TANDEM_DECLARE_FORMAT(iq3_s)
TANDEM_DECLARE_FORMAT(iq4_nl)
TANDEM_DECLARE_FORMAT(iq4_xs)

}  // namespace tandem
