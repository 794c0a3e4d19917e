// Parsing of ggml type names given on the command line ("q4_K", "iq2_xxs", ...).
#pragma once

#include <string>
#include <vector>

#include "formats/ggml_type.h"

namespace tandem::cli {

// A weight type by its ggml name (case-insensitive); throws Error naming the flag otherwise.
GgmlType parse_type(const std::string& name, const std::string& flag);
// "q4_K,q8_0" -> types.
std::vector<GgmlType> parse_type_list(const std::string& list, const std::string& flag);

}  // namespace tandem::cli
