// Stop strings over text that arrives in pieces: finds a stop string even when it spans several
// tokens, and holds back any tail that could still become one, so that a matched stop string is
// never emitted, not even in part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class StopMatcher {
  public:
    // Empty strings in `stops` are ignored.
    explicit StopMatcher(std::vector<std::string> stops = {});

    struct Result {
        std::string text;      // safe to emit now
        bool stopped = false;  // a stop string matched; `text` ends right before it
    };
    // Appends generated text. After a match every further call returns nothing.
    Result feed(std::string_view text);
    // The end of generation: whatever is still held back (nothing after a match).
    std::string flush();

    bool stopped() const { return stopped_; }
    bool empty() const { return stops_.empty(); }
    // The stop string that matched (as given), or empty.
    const std::string& matched() const { return matched_; }

  private:
    std::vector<std::string> stops_;
    std::string held_;  // text that might be the start of a stop string
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace tandem
