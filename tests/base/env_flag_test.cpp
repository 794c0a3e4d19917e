// env_flag: only the value "1" turns a switch on; env_flag_off: only "0" turns one off.
#include "base/env_flag.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tandem {
namespace {

TEST(EnvFlag, OnlyOneTurnsItOn) {
    const char* name = "TANDEM_TEST_ENV_FLAG";
    unsetenv(name);
    EXPECT_FALSE(env_flag(name));
    for (const char* off : {"", "0", "true", "11", " 1"}) {
        setenv(name, off, 1);
        EXPECT_FALSE(env_flag(name)) << "'" << off << "'";
    }
    setenv(name, "1", 1);
    EXPECT_TRUE(env_flag(name));
    unsetenv(name);
}

TEST(EnvFlag, OnlyZeroTurnsItOff) {
    const char* name = "TANDEM_TEST_ENV_FLAG";
    unsetenv(name);
    EXPECT_FALSE(env_flag_off(name));
    for (const char* on : {"", "1", "false", "00", " 0"}) {
        setenv(name, on, 1);
        EXPECT_FALSE(env_flag_off(name)) << "'" << on << "'";
    }
    setenv(name, "0", 1);
    EXPECT_TRUE(env_flag_off(name));
    unsetenv(name);
}

}  // namespace
}  // namespace tandem
