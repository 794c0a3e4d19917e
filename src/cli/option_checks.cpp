#include "cli/option_checks.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace tandem::cli {
namespace {

// A validator accepting the numbers for which ok(value) holds; `what` completes "X is ...".
template <typename Ok>
CLI::Validator number_check(const char* description, const char* what, Ok ok) {
    return CLI::Validator(
        [what, ok](std::string& text) -> std::string {
            char* end = nullptr;
            errno = 0;
            const double v = std::strtod(text.c_str(), &end);
            if (end == text.c_str() || *end != '\0' || errno == ERANGE)
                return "'" + text + "' is not a number";
            return ok(v) ? std::string() : text + " is " + what;
        },
        description);
}

}  // namespace

CLI::Validator positive_number() {
    return number_check("> 0", "not positive", [](double v) { return v > 0; });
}

CLI::Validator non_negative_number() {
    return number_check(">= 0", "negative", [](double v) { return v >= 0; });
}

}  // namespace tandem::cli
