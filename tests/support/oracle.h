// Access to the llama.cpp oracle kit (../shared/oracle) from tests: paths to its tools, and a
// way to run them. tools/test.sh sets the kit up and exports its variables before the suite.
#pragma once

#include <string>
#include <vector>

namespace tandem::testing {

// True when the kit's environment (ORACLE_BIN, ...) is present. When TANDEM_REQUIRE_ORACLE=1
// (set by tools/test.sh and CI) a missing kit is a test failure, not a skip.
bool oracle_available();
// Calls GTEST_SKIP-like logic: returns false and records a skip or failure when unavailable.
#define TANDEM_REQUIRE_ORACLE()                                                          \
    do {                                                                                 \
        if (!::tandem::testing::oracle_available()) {                                    \
            if (::tandem::testing::oracle_required()) FAIL() << "oracle kit not set up"; \
            GTEST_SKIP() << "oracle kit not set up (run tools/test.sh)";                 \
        }                                                                                \
    } while (0)
bool oracle_required();

std::string oracle_bin();      // $ORACLE_BIN: kern, llama_logits
std::string oracle_kit_dir();  // the kit's scripts: make_gguf.py, compare_logits.py, ...
std::string oracle_dir();      // $TANDEM_ORACLE_DIR: node_modules, tokenizers

// Runs a shell command; returns its exit status and fills `output` with stdout+stderr.
int run_command(const std::string& command, std::string* output = nullptr);
// Shell-quotes one argument.
std::string shell_quote(const std::string& s);
// The built tandem binary (build/tandem).
std::string tandem_binary();

}  // namespace tandem::testing
