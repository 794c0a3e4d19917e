// One split pattern of a pre-tokenizer, compiled with PCRE2 (UTF, Unicode properties, JIT).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace tandem {

// A piece of text by byte offsets: [begin, end).
struct TextSpan {
    size_t begin;
    size_t end;
};

class SplitRegex {
  public:
    // Compiles `pattern`; throws Error with PCRE2's message and the offset on a bad pattern.
    explicit SplitRegex(std::string_view pattern);
    ~SplitRegex();
    SplitRegex(SplitRegex&& other) noexcept;
    SplitRegex& operator=(SplitRegex&& other) noexcept;
    SplitRegex(const SplitRegex&) = delete;
    SplitRegex& operator=(const SplitRegex&) = delete;

    // Cuts subject[span) into the pattern's matches and the runs of text between them (kept
    // as pieces of their own, like llama.cpp's split does) and appends the pieces to `out`.
    // Matching sees only the span: lookaheads stop at its end. `subject` must be valid UTF-8.
    void split(std::string_view subject, TextSpan span, std::vector<TextSpan>& out) const;

    const std::string& pattern() const { return pattern_; }

  private:
    std::string pattern_;
    pcre2_real_code_8* code_ = nullptr;
};

}  // namespace tandem
