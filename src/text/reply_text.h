// Small pieces the tool-call parsers share (tool_call_format.cpp, harmony.cpp): blanks, compact
// JSON, and the tail of streamed text held back because it may still become a mark.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem::reply_text {

inline bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

inline std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// One line, invalid UTF-8 replaced: as arguments go out in the API.
inline std::string compact(const nlohmann::ordered_json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The longest tail of `text` that is a proper prefix of one of `marks` (non-empty strings): held
// back, since the next piece may complete it.
template <typename Marks>
size_t partial_mark_tail(std::string_view text, const Marks& marks) {
    size_t keep = 0;
    for (std::string_view m : marks) {
        for (size_t n = std::min(m.size() - 1, text.size()); n > keep; --n) {
            if (text.substr(text.size() - n) == m.substr(0, n)) {
                keep = n;
                break;
            }
        }
    }
    return keep;
}

// Where a search for `marks` in a buffer that only grows at its end may resume after finding
// none in its first `size` bytes: only the last (longest mark - 1) of them can begin one. (A held
// call body is searched for its end as each piece arrives: from its start every time, that is
// quadratic in the body's length.)
template <typename Marks>
size_t resume_search_at(size_t size, const Marks& marks) {
    size_t longest = 0;
    for (std::string_view m : marks) longest = std::max(longest, m.size());
    return size + 1 > longest ? size + 1 - longest : 0;
}

}  // namespace tandem::reply_text
