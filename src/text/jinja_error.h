// The interpreter's internal error: a message plus the template offset it happened at, turned
// into a tandem::Error ("chat template: line L col C: ...") at the API boundary.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tandem::jinja {

inline constexpr uint32_t kNoPos = UINT32_MAX;

class JinjaError : public std::runtime_error {
  public:
    explicit JinjaError(const std::string& message, uint32_t pos = kNoPos)
        : std::runtime_error(message), pos(pos) {}
    // Offset in the preprocessed template; kNoPos until a node on the way up claims it.
    uint32_t pos;
    // True for errors raised by the template itself through raise_exception().
    bool raised = false;
};

}  // namespace tandem::jinja
