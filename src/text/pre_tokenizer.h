// A byte-level BPE pre-tokenizer: cuts text into the pieces that BPE merges within.
#pragma once

#include <string_view>
#include <vector>

#include "text/pre_tokenizer_table.h"
#include "text/split_regex.h"

namespace tandem {

class PreTokenizer {
  public:
    // Compiles the spec's patterns; throws Error if PCRE2 refuses one.
    explicit PreTokenizer(const PreTokenizerSpec& spec);

    // The pieces of `subject` (valid UTF-8, prepared by prepare_split_text) in order; together
    // they cover it exactly.
    std::vector<TextSpan> split(std::string_view subject) const;

  private:
    std::vector<SplitRegex> regexes_;
};

}  // namespace tandem
