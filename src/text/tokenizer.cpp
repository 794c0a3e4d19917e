// Tokenizer: special-token matching, then BPE or SentencePiece on the text between; pieces
// for decoding are computed once at load (llama.cpp's token_to_piece cache).
#include "text/tokenizer.h"

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "text/bpe_tokenizer.h"
#include "text/byte_level.h"
#include "text/special_splitter.h"
#include "text/spm_tokenizer.h"

namespace tandem {
namespace {

// The text of a normal token as bytes: byte-level BPE texts map code points back to bytes,
// SentencePiece (and SentencePiece-style BPE) texts write spaces as ▁ (llama.cpp's
// token_to_piece).
std::string normal_piece(const Vocab& vocab, const std::string& text) {
    std::string out;
    if (vocab.kind() == VocabKind::kBpe && !vocab.spm_style_bpe()) {
        append_unicode_as_bytes(text, out);
        return out;
    }
    constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";
    for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, kSpaceMarker.size(), kSpaceMarker) == 0) {
            out.push_back(' ');
            pos += kSpaceMarker.size();
        } else {
            out.push_back(text[pos++]);
        }
    }
    return out;
}

int hex_value(char c) {
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

std::string make_piece(const Vocab& vocab, TokenId id) {
    const std::string& text = vocab.text(id);
    const uint32_t attrs = vocab.attrs(id);
    if (attrs & (kTokenAttrUnknown | kTokenAttrControl | kTokenAttrUserDefined)) return text;
    if (attrs & kTokenAttrNormal) return normal_piece(vocab, text);
    if (attrs & kTokenAttrByte) {
        // <0xXX> (checked at load for SentencePiece; a byte-level vocabulary rarely has any).
        if (text.size() == 6 && text.compare(0, 3, "<0x") == 0) {
            return std::string(1, static_cast<char>(hex_value(text[3]) * 16 + hex_value(text[4])));
        }
        return std::string();
    }
    return std::string();  // unused and undefined tokens render as nothing
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Vocab> vocab) : vocab_(std::move(vocab)) {
    if (vocab_->kind() == VocabKind::kBpe) {
        bpe_ = std::make_unique<BpeTokenizer>(*vocab_);
    } else {
        spm_ = std::make_unique<SpmTokenizer>(*vocab_);
    }
    pieces_.resize(vocab_->size());
    for (TokenId id = 0; id < vocab_->size(); ++id) pieces_[id] = make_piece(*vocab_, id);
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const GgufFile& gguf) {
    return Tokenizer(std::make_unique<Vocab>(Vocab::from_gguf(gguf)));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
    const Vocab& vocab = *vocab_;
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 2);
    if (add_special && vocab.add_bos()) out.push_back(vocab.special().bos);

    // SentencePiece puts a space before text that starts the input or follows a special
    // token (llama.cpp's is_prev_special).
    bool after_special = true;
    std::string prefixed;
    for (const TextFragment& f : split_special_tokens(text, vocab, parse_special)) {
        if (f.token != kNoToken) {
            out.push_back(f.token);
            after_special = true;
            continue;
        }
        const std::string_view piece = text.substr(f.begin, f.end - f.begin);
        if (bpe_) {
            bpe_->encode(piece, out);
        } else {
            prefixed.clear();
            if (vocab.add_space_prefix() && after_special) prefixed.push_back(' ');
            prefixed.append(piece);
            spm_->encode(prefixed, out);
        }
        after_special = false;
    }

    if (add_special && vocab.add_eos()) out.push_back(vocab.special().eos);
    return out;
}

void Tokenizer::check_id(TokenId id) const {
    if (!vocab_->contains(id))
        fail("token id {} is outside the vocabulary [0, {})", id, n_tokens());
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
    check_id(id);
    if (!render_special && is_control(id)) return std::string();
    return pieces_[id];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
    std::string out;
    bool strip_space = vocab_->add_space_prefix();  // only ever from the first token
    for (TokenId id : ids) {
        check_id(id);
        if (render_special || !is_control(id)) {
            const std::string& piece = pieces_[id];
            const size_t skip = strip_space && !piece.empty() && piece[0] == ' ' ? 1 : 0;
            out.append(piece, skip);
        }
        strip_space = false;
    }
    return out;
}

}  // namespace tandem
