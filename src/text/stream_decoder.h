// Turns generated tokens into text as they come, holding back the bytes of a character that
// is split across tokens until it is complete, so every chunk handed out is valid UTF-8.
#pragma once

#include <string>

#include "text/tokenizer.h"

namespace tandem {

class StreamDecoder {
  public:
    // `tokenizer` must outlive the decoder. Control tokens are rendered with `render_special`.
    explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = true)
        : tokenizer_(&tokenizer), render_special_(render_special) {}

    // The text that became complete with token `id` (possibly empty). Bytes that can never
    // form a character come out as U+FFFD. Throws Error for an id outside the vocabulary.
    std::string feed(TokenId id);
    // Whatever is still held (an unfinished character, as U+FFFD), at the end of a stream.
    std::string flush();
    // Forgets what is held, for a new stream.
    void reset() { pending_.clear(); }
    bool has_pending() const { return !pending_.empty(); }

  private:
    const Tokenizer* tokenizer_;
    bool render_special_;
    std::string pending_;  // bytes of an incomplete character
};

}  // namespace tandem
