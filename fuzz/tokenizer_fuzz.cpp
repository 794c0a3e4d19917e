// libFuzzer target: the byte-level BPE tokenizer (with control tokens) on arbitrary bytes:
// encoding never crashes, every id is in the vocabulary, and decoding gives the text back
// whenever the text is valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "text/tokenizer.h"

namespace {

// GPT-2's byte -> printable code point map, as UTF-8.
std::string byte_token(int b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    int cp = b;
    if (!printable) {
        int n = 0;
        for (int i = 0; i < b; ++i) {
            bool p = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
            n += p ? 0 : 1;
        }
        cp = 256 + n;
    }
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

const tandem::Tokenizer& tokenizer() {
    static std::unique_ptr<tandem::Tokenizer> tok = [] {
        std::vector<std::string> tokens;
        for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(b));
        std::vector<std::string> merges = {byte_token('h') + " " + byte_token('e'),
                                           byte_token(' ') + " " + byte_token('t'),
                                           byte_token(' ') + byte_token('t') + " " + byte_token('h') + byte_token('e')};
        tokens.push_back(byte_token('h') + byte_token('e'));
        tokens.push_back(byte_token(' ') + byte_token('t'));
        tokens.push_back(byte_token(' ') + byte_token('t') + byte_token('h') + byte_token('e'));
        tokens.push_back("<|im_start|>");
        tokens.push_back("<|endoftext|>");
        std::vector<int32_t> types(tokens.size(), 1);
        types[types.size() - 1] = types[types.size() - 2] = 3;
        tandem::GgufWriter w;
        w.set_string("tokenizer.ggml.model", "gpt2");
        w.set_string("tokenizer.ggml.pre", "qwen2");
        w.set_string_array("tokenizer.ggml.tokens", tokens);
        w.set_array<int32_t>("tokenizer.ggml.token_type", types);
        w.set_string_array("tokenizer.ggml.merges", merges);
        w.set<uint32_t>("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tokens.size() - 1));
        static std::vector<uint8_t> bytes = w.to_bytes();
        auto file = tandem::GgufFile::parse("fuzz-vocab.gguf", bytes.data(), bytes.size());
        return std::make_unique<tandem::Tokenizer>(tandem::Tokenizer::from_gguf(*file));
    }();
    return *tok;
}

// Well-formed UTF-8 (Unicode 15, table 3-7): no overlongs, surrogates or code points past U+10FFFF.
bool valid_utf8(const std::string& s) {
    auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = byte(i);
        int n = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return false;
        }
        if (i + n >= s.size()) return false;
        if (byte(i + 1) < lo || byte(i + 1) > hi) return false;
        for (int k = 2; k <= n; ++k) {
            if ((byte(i + k) >> 6) != 2) return false;
        }
        i += n + 1;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const tandem::Tokenizer& tok = tokenizer();
    const std::string text(reinterpret_cast<const char*>(data), size);
    for (bool parse_special : {false, true}) {
        std::vector<tandem::TokenId> ids = tok.encode(text, false, parse_special);
        for (tandem::TokenId id : ids) {
            if (id < 0 || id >= tok.n_tokens()) std::abort();
        }
        // Ill-formed UTF-8 is read as U+FFFD (as llama.cpp does), so only check well-formed text.
        if (valid_utf8(text) && tok.decode(ids) != text) std::abort();
    }
    return 0;
}
