// Error type of the whole project: one line that says what went wrong and where.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tandem {

// Thrown at every boundary check (files, flags, requests). The message is a single line
// naming the file, key, tensor, field or offset at fault; callers print it and go on or exit.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tandem
