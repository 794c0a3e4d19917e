// Levelled logging to stderr; the level comes from TANDEM_LOG (error, warn, info, debug).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace tandem {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
    if (level <= log_level()) log_write(level, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
    log_at(LogLevel::kInfo, format, std::forward<Args>(args)...);
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
    log_at(LogLevel::kWarn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) {
    log_at(LogLevel::kDebug, format, std::forward<Args>(args)...);
}

}  // namespace tandem
