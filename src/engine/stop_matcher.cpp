// Stop strings matched across token boundaries.
#include "engine/stop_matcher.h"

#include <algorithm>

namespace tandem {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (std::string& s : stops) {
        if (!s.empty()) stops_.push_back(std::move(s));
    }
}

StopMatcher::Result StopMatcher::feed(std::string_view text) {
    Result out;
    if (stopped_) return out;
    if (stops_.empty()) {
        out.text.assign(text);
        return out;
    }
    held_.append(text);
    // The earliest match wins, whichever stop string it is: text before it was complete
    // before any later match.
    size_t first = std::string::npos;
    for (const std::string& s : stops_) {
        const size_t at = held_.find(s);
        if (at < first) {
            first = at;
            matched_ = s;
        }
    }
    if (first != std::string::npos) {
        out.text = held_.substr(0, first);
        out.stopped = stopped_ = true;
        held_.clear();
        return out;
    }
    // No match: keep the longest tail that is a proper prefix of some stop string. A stop
    // string starts at a character boundary, so the emitted part stays whole UTF-8.
    size_t keep = 0;
    for (const std::string& s : stops_) {
        const size_t longest = std::min(s.size() - 1, held_.size());
        for (size_t n = longest; n > keep; --n) {
            if (std::string_view(held_).substr(held_.size() - n) ==
                std::string_view(s).substr(0, n)) {
                keep = n;
                break;
            }
        }
    }
    out.text = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    std::string rest;
    rest.swap(held_);
    return stopped_ ? std::string() : rest;
}

}  // namespace tandem
