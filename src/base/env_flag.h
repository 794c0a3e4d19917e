// A switch set in the environment: NAME=1 turns it on, anything else (or nothing) leaves it off.
#pragma once

#include <cstdlib>
#include <cstring>

namespace tandem {

inline bool env_flag(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace tandem
