// Typed reads of optional fields of a JSON request object. A missing field and an explicit null
// both read as absent (OpenAI accepts null for every optional field); a value of the wrong type
// is a 400 that names the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::server {

// For nlohmann::json and nlohmann::ordered_json alike.
template <typename Json>
std::optional<bool> get_bool(const Json& object, const char* field);
template <typename Json>
std::optional<double> get_number(const Json& object, const char* field);
// Integers only (3.0 is accepted, 3.5 is not), within [min, max].
template <typename Json>
std::optional<int64_t> get_integer(const Json& object, const char* field, int64_t min, int64_t max);
template <typename Json>
std::optional<std::string> get_string(const Json& object, const char* field);

// The JSON type name of a value, for messages: "string", "number", "array", ...
template <typename Json>
const char* json_type_name(const Json& value);

}  // namespace tandem::server
