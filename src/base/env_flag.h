// Switches set in the environment: env_flag(NAME) for one off by default (NAME=1 turns it on,
// anything else or nothing leaves it off), env_flag_off(NAME) for one on by default (NAME=0 turns
// it off).
#pragma once

#include <cstdlib>
#include <cstring>

namespace tandem {

inline bool env_flag(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && std::strcmp(value, "1") == 0;
}

inline bool env_flag_off(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && std::strcmp(value, "0") == 0;
}

}  // namespace tandem
