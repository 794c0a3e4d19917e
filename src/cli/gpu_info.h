// The GPUs of this machine for `tandem inspect --system`: name, memory, compute capability,
// driver, and the measured host-to-device copy rate; or why there is none to use.
#pragma once

namespace tandem::cli {

void print_gpus();

}  // namespace tandem::cli
