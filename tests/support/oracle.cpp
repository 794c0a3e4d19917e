// Access to the llama.cpp oracle kit from tests.
#include "support/oracle.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>

namespace tandem::testing {
namespace {
std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
}
}  // namespace

bool oracle_available() {
    std::string bin = oracle_bin();
    return !bin.empty() && std::filesystem::exists(bin + "/kern") &&
           std::filesystem::exists(oracle_kit_dir() + "/make_gguf.py");
}

bool oracle_required() { return env_or_empty("TANDEM_REQUIRE_ORACLE") == "1"; }

std::string oracle_bin() { return env_or_empty("ORACLE_BIN"); }

std::string oracle_kit_dir() {
    std::string kit = env_or_empty("TANDEM_ORACLE_KIT");
    if (!kit.empty()) return kit;
    return std::string(TANDEM_SOURCE_DIR) + "/../shared/oracle";
}

std::string oracle_dir() { return env_or_empty("TANDEM_ORACLE_DIR"); }

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') {
            out += "'\\''";
        } else {
            out += c;
        }
    }
    return out + "'";
}

int run_command(const std::string& command, std::string* output) {
    std::string full = command + " 2>&1";
    FILE* pipe = popen(full.c_str(), "r");
    if (pipe == nullptr) return -1;
    std::array<char, 4096> buf;
    std::string out;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
    int status = pclose(pipe);
    if (output != nullptr) *output = out;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// TANDEM_EXE names another: a packed copy on a GPU machine (tools/gpu_pack.sh's env.sh sets it),
// where the build folder the tests were compiled in does not exist.
std::string tandem_binary() {
    const char* exe = std::getenv("TANDEM_EXE");
    return exe != nullptr && *exe != '\0' ? std::string(exe)
                                          : std::string(TANDEM_BINARY_DIR) + "/tandem";
}

}  // namespace tandem::testing
