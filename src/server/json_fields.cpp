// Typed reads of optional request fields.
#include "server/json_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace tandem::server {
namespace {

template <typename Json>
const Json* find(const Json& object, const char* field) {
    auto it = object.find(field);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
}

template <typename Json>
[[noreturn]] void wrong_type(const char* field, const char* expected, const Json& value) {
    bad_request(
        std::string("'") + field + "' must be " + expected + ", not " + json_type_name(value),
        field);
}

}  // namespace

template <typename Json>
const char* json_type_name(const Json& value) {
    switch (value.type()) {
        case nlohmann::json::value_t::null:
            return "null";
        case nlohmann::json::value_t::boolean:
            return "a boolean";
        case nlohmann::json::value_t::number_integer:
        case nlohmann::json::value_t::number_unsigned:
        case nlohmann::json::value_t::number_float:
            return "a number";
        case nlohmann::json::value_t::string:
            return "a string";
        case nlohmann::json::value_t::array:
            return "an array";
        case nlohmann::json::value_t::object:
            return "an object";
        default:
            return "a binary value";
    }
}

template <typename Json>
std::optional<bool> get_bool(const Json& object, const char* field) {
    const Json* v = find(object, field);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(field, "a boolean", *v);
    return v->template get<bool>();
}

template <typename Json>
std::optional<double> get_number(const Json& object, const char* field) {
    const Json* v = find(object, field);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(field, "a number", *v);
    return v->template get<double>();
}

template <typename Json>
std::optional<int64_t> get_integer(const Json& object, const char* field, int64_t min,
                                   int64_t max) {
    const Json* v = find(object, field);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(field, "an integer", *v);
    int64_t value = 0;
    if (v->is_number_unsigned()) {
        const uint64_t u = v->template get<uint64_t>();
        value = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
        value = v->template get<int64_t>();
    } else {
        const double d = v->template get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
            bad_request(std::string("'") + field + "' must be an integer", field);
        }
        value = static_cast<int64_t>(d);
    }
    if (value < min || value > max) {
        bad_request(std::string("'") + field + "' is " + std::to_string(value) + ", outside [" +
                        std::to_string(min) + ", " + std::to_string(max) + "]",
                    field);
    }
    return value;
}

template <typename Json>
std::optional<std::string> get_string(const Json& object, const char* field) {
    const Json* v = find(object, field);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(field, "a string", *v);
    return v->template get<std::string>();
}

#define TANDEM_JSON_FIELDS(Json)                                                             \
    template const char* json_type_name(const Json&);                                        \
    template std::optional<bool> get_bool(const Json&, const char*);                         \
    template std::optional<double> get_number(const Json&, const char*);                     \
    template std::optional<int64_t> get_integer(const Json&, const char*, int64_t, int64_t); \
    template std::optional<std::string> get_string(const Json&, const char*);
TANDEM_JSON_FIELDS(nlohmann::json)
TANDEM_JSON_FIELDS(nlohmann::ordered_json)
#undef TANDEM_JSON_FIELDS

}  // namespace tandem::server
