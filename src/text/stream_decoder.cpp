// Streaming detokenization with UTF-8 boundaries respected.
#include "text/stream_decoder.h"

#include "text/utf8.h"

namespace tandem {

std::string StreamDecoder::feed(TokenId id) {
    pending_ += tokenizer_->token_to_piece(id, render_special_);
    std::string out;
    pending_.erase(0, append_valid_utf8(pending_, out, /*final=*/false));
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    append_valid_utf8(pending_, out, /*final=*/true);
    pending_.clear();
    return out;
}

}  // namespace tandem
