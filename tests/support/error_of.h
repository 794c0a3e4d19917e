// The message of the Error that f throws, or "" when it throws none: for tests of one-line
// refusals.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"

namespace tandem::testing {

inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace tandem::testing
