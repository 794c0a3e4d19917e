// Serialisation of Jinja values: the `tojson` filter and JavaScript number formatting, both
// byte-compatible with @huggingface/jinja (our conformance reference).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "text/jinja_value.h"

namespace tandem::jinja {

struct JsonOptions {
    int indent = 0;  // 0: single line
    bool ensure_ascii = false;
    bool sort_keys = false;
    std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
    bool undefined_as_null = true;  // false: undefined prints as `undefined` (display of lists)
    size_t max_bytes = SIZE_MAX;    // fail once the text grows past this
};

// JSON text of `value`. Separators default to ", " and ": ", or "," and ": " with an indent
// (Python json.dumps). Fails on functions and on nesting deeper than 256 (cyclic namespaces).
std::string to_json(const Value& value, const JsonOptions& options = {});
// Appends `s` as a JSON string literal (JSON.stringify escaping).
void append_json_string(std::string& out, std::string_view s, bool ensure_ascii);

// Number.prototype.toString(): shortest round-trip digits, exponent form outside [1e-7, 1e21).
std::string js_number(double x);
// How the reference prints a float: integral values keep one decimal ("2.0"), -0 is "-0.0".
std::string float_display(double x);

}  // namespace tandem::jinja
