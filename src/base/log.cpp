// Levelled logging to stderr.
#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tandem {
namespace {

LogLevel level_from_env() {
    const char* env = std::getenv("TANDEM_LOG");
    if (env == nullptr) return LogLevel::kInfo;
    if (std::strcmp(env, "error") == 0) return LogLevel::kError;
    if (std::strcmp(env, "warn") == 0) return LogLevel::kWarn;
    if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
    return LogLevel::kInfo;
}

std::atomic<int>& level_storage() {
    static std::atomic<int> level{static_cast<int>(level_from_env())};
    return level;
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }

void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }

void log_write(LogLevel level, std::string_view message) {
    static std::mutex mutex;
    static const char* const kPrefix[] = {"error: ", "warning: ", "", "debug: "};
    std::lock_guard<std::mutex> lock(mutex);
    std::fprintf(stderr, "%s%.*s\n", kPrefix[static_cast<int>(level)], static_cast<int>(message.size()),
                 message.data());
}

}  // namespace tandem
