// Checks of numeric command-line options, with one short message each ("--cols: 0 is not
// positive"), where CLI11's own ranges print the limits of a double.
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::cli {

CLI::Validator positive_number();
CLI::Validator non_negative_number();

}  // namespace tandem::cli
