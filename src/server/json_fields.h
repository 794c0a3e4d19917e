// Typed reads of optional fields of a JSON request object. A missing field and an explicit null
// both read as absent (OpenAI accepts null for every optional field); a value of the wrong type
// is a 400 that names the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::server {

std::optional<bool> get_bool(const nlohmann::json& object, const char* field);
std::optional<double> get_number(const nlohmann::json& object, const char* field);
// Integers only (3.0 is accepted, 3.5 is not), within [min, max].
std::optional<int64_t> get_integer(const nlohmann::json& object, const char* field, int64_t min,
                                   int64_t max);
std::optional<std::string> get_string(const nlohmann::json& object, const char* field);

// The JSON type name of a value, for messages: "string", "number", "array", ...
const char* json_type_name(const nlohmann::json& value);

}  // namespace tandem::server
