// Jinja lexer: whitespace preprocessing and tokens, following @huggingface/jinja's lexer.
#include "text/jinja_lexer.h"

#include <charconv>

#include "text/jinja_error.h"
#include "text/jinja_unicode.h"

namespace tandem::jinja {
namespace {

// A string under construction together with the original offset of each byte.
struct Mapped {
    std::string text;
    std::vector<uint32_t> origin;

    void push(const Mapped& from, size_t i) {
        text += from.text[i];
        origin.push_back(from.origin[i]);
    }
    void append(const Mapped& from, size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) push(from, i);
    }
};

bool is_line_terminator_end(const std::string& s, size_t i) {
    char c = s[i];
    if (c == '\n' || c == '\r') return true;
    // U+2028 and U+2029 (E2 80 A8/A9) also start a new line for JavaScript's multiline `^`.
    return i >= 2 && static_cast<unsigned char>(s[i - 2]) == 0xE2 &&
           static_cast<unsigned char>(s[i - 1]) == 0x80 &&
           (static_cast<unsigned char>(c) == 0xA8 || static_cast<unsigned char>(c) == 0xA9);
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1": spaces and tabs before a block or comment tag
// at the start of a line go.
Mapped lstrip_blocks(const Mapped& in) {
    Mapped out;
    const std::string& s = in.text;
    bool at_line_start = true;
    for (size_t i = 0; i < s.size();) {
        if (at_line_start) {
            at_line_start = false;
            size_t j = i;
            while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
            if (j + 1 < s.size() && s[j] == '{' &&
                (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
                i = j;
            }
        }
        out.push(in, i);
        at_line_start = is_line_terminator_end(s, i);
        ++i;
    }
    return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1": the first newline after a tag goes.
Mapped trim_blocks(const Mapped& in) {
    Mapped out;
    const std::string& s = in.text;
    for (size_t i = 0; i < s.size();) {
        if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' &&
            s[i + 2] == '\n') {
            out.append(in, i, i + 2);
            i += 3;
        } else {
            out.push(in, i++);
        }
    }
    return out;
}

size_t skip_js_spaces(const std::string& s, size_t pos) {
    while (size_t n = js_space_at(s, pos)) pos += n;
    return pos;
}

// Matches `{%-? \s* (end)?generation \s* -?%}` at `pos`; returns its end or 0. Sets the flags
// of the two `-` markers.
size_t match_generation_tag(const std::string& s, size_t pos, bool* lstrip, bool* rstrip) {
    if (s.compare(pos, 2, "{%") != 0) return 0;
    size_t i = pos + 2;
    *lstrip = i < s.size() && s[i] == '-';
    if (*lstrip) ++i;
    i = skip_js_spaces(s, i);
    if (s.compare(i, 3, "end") == 0) i += 3;
    if (s.compare(i, 10, "generation") != 0) return 0;
    i = skip_js_spaces(s, i + 10);
    *rstrip = i < s.size() && s[i] == '-';
    if (*rstrip) ++i;
    if (s.compare(i, 2, "%}") != 0) return 0;
    return i + 2;
}

// transformers' {% generation %} / {% endgeneration %} tags are dropped, honouring `-` markers:
// /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs.
Mapped remove_generation_tags(const Mapped& in) {
    const std::string& s = in.text;
    if (s.find("generation") == std::string::npos) return in;
    Mapped out;
    size_t done = 0;  // everything before `done` is settled
    for (size_t pos = s.find("{%"); pos != std::string::npos; pos = s.find("{%", pos + 1)) {
        if (pos < done) continue;
        bool lstrip = false, rstrip = false;
        size_t end = match_generation_tag(s, pos, &lstrip, &rstrip);
        if (end == 0) continue;
        size_t before = pos;
        while (before > done) {
            size_t n = js_space_before(s, before);
            if (n == 0 || before - n < done) break;
            before -= n;
        }
        size_t after = skip_js_spaces(s, end);
        out.append(in, done, before);
        if (!lstrip) out.append(in, before, pos);
        if (!rstrip) out.append(in, end, after);
        done = after;
        pos = after == 0 ? 0 : after - 1;
    }
    out.append(in, done, s.size());
    return out;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Lexer {
  public:
    explicit Lexer(const std::string& src) : src_(src), n_(src.size()) {}

    std::vector<Token> run();

  private:
    [[noreturn]] void fail(const std::string& message, size_t pos) const {
        throw JinjaError(message, static_cast<uint32_t>(pos));
    }
    void push(TokenType type, std::string value, size_t pos) {
        tokens_.push_back(Token{type, std::move(value), static_cast<uint32_t>(pos)});
    }
    bool last_is(TokenType type) const { return !tokens_.empty() && tokens_.back().type == type; }
    // Like the reference's consumeWhile: running into the end of the template is an error.
    template <typename Pred>
    std::string consume_while(Pred pred) {
        size_t start = cur_;
        while (cur_ < n_ && pred(src_[cur_])) {
            if (++cur_ >= n_) fail("unexpected end of template", start);
        }
        return src_.substr(start, cur_ - start);
    }
    void consume_spaces() {
        size_t start = cur_;
        while (cur_ < n_) {
            size_t len = js_space_at(src_, cur_);
            if (len == 0) break;
            cur_ += len;
            if (cur_ >= n_) fail("unexpected end of template", start);
        }
    }
    std::string consume_string_literal(char quote);
    void strip_trailing_whitespace() {
        if (!last_is(TokenType::kText)) return;
        std::string& text = tokens_.back().value;
        text.resize(js_trim(text, false, true).size());
        if (text.empty()) tokens_.pop_back();
    }

    const std::string& src_;
    size_t n_;
    size_t cur_ = 0;
    int curly_depth_ = 0;
    std::vector<Token> tokens_;
};

std::string Lexer::consume_string_literal(char quote) {
    size_t start = cur_ - 1;
    std::string out;
    while (true) {
        if (cur_ >= n_) fail("unterminated string literal", start);
        char c = src_[cur_];
        if (c == quote) break;
        if (c == '\\') {
            if (++cur_ >= n_) fail("unterminated string literal", start);
            char e = src_[cur_++];
            if (e == 'x' || e == 'u') {
                size_t len = e == 'x' ? 2 : 4;
                uint32_t unit = 0;
                for (size_t k = 0; k < len; ++k) {
                    int h = cur_ + k < n_ ? hex_value(src_[cur_ + k]) : -1;
                    if (h < 0)
                        fail(std::string("invalid hexadecimal escape sequence \\") + e, cur_ - 2);
                    unit = unit * 16 + static_cast<uint32_t>(h);
                }
                cur_ += len;
                // A surrogate pair written as two \u escapes is one code point.
                if (unit >= 0xD800 && unit < 0xDC00 && src_.compare(cur_, 2, "\\u") == 0) {
                    uint32_t low = 0;
                    bool ok = cur_ + 6 <= n_;
                    for (size_t k = 0; ok && k < 4; ++k) {
                        int h = hex_value(src_[cur_ + 2 + k]);
                        ok = h >= 0;
                        low = low * 16 + static_cast<uint32_t>(h < 0 ? 0 : h);
                    }
                    if (ok && low >= 0xDC00 && low < 0xE000) {
                        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        cur_ += 6;
                    }
                }
                append_utf8(out, unit);
                continue;
            }
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case '\\':
                    out += '\\';
                    break;
                default:
                    fail(std::string("unexpected escaped character '") + e + "'", cur_ - 2);
            }
            continue;
        }
        out += c;
        if (++cur_ >= n_) fail("unterminated string literal", start);
    }
    ++cur_;  // closing quote
    return out;
}

struct Symbol {
    const char* text;
    TokenType type;
};

// Order matters: longer operators come before their prefixes.
constexpr Symbol kSymbols[] = {
    {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
    {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
    {",", TokenType::kComma},           {".", TokenType::kDot},
    {":", TokenType::kColon},           {"|", TokenType::kPipe},
    {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
    {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
    {"<", TokenType::kComparison},      {">", TokenType::kComparison},
    {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
    {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
    {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
};

std::vector<Token> Lexer::run() {
    while (cur_ < n_) {
        // Text runs up to the next tag, but only between tags.
        if (tokens_.empty() || last_is(TokenType::kCloseStatement) ||
            last_is(TokenType::kCloseExpression) || last_is(TokenType::kComment)) {
            size_t start = cur_;
            while (cur_ < n_ &&
                   !(src_[cur_] == '{' && cur_ + 1 < n_ &&
                     (src_[cur_ + 1] == '%' || src_[cur_ + 1] == '{' || src_[cur_ + 1] == '#'))) {
                ++cur_;
            }
            if (cur_ > start) {
                push(TokenType::kText, src_.substr(start, cur_ - start), start);
                continue;
            }
        }

        if (src_[cur_] == '{' && cur_ + 1 < n_ && src_[cur_ + 1] == '#') {
            size_t start = cur_;
            cur_ += 2;
            bool strip_before = cur_ < n_ && src_[cur_] == '-';
            if (strip_before) ++cur_;
            size_t body = cur_;
            while (!(cur_ + 1 < n_ && src_[cur_] == '#' && src_[cur_ + 1] == '}')) {
                if (cur_ + 2 >= n_) fail("unterminated comment (missing #})", start);
                ++cur_;
            }
            std::string comment = src_.substr(body, cur_ - body);
            bool strip_after = !comment.empty() && comment.back() == '-';
            if (strip_after) comment.pop_back();
            if (strip_before) strip_trailing_whitespace();
            push(TokenType::kComment, std::move(comment), start);
            cur_ += 2;
            if (strip_after) cur_ = skip_js_spaces(src_, cur_);
            continue;
        }
        if (src_.compare(cur_, 3, "{%-") == 0) {
            strip_trailing_whitespace();
            push(TokenType::kOpenStatement, "{%", cur_);
            cur_ += 3;
            continue;
        }
        if (src_.compare(cur_, 3, "{{-") == 0) {
            strip_trailing_whitespace();
            push(TokenType::kOpenExpression, "{{", cur_);
            curly_depth_ = 0;
            cur_ += 3;
            continue;
        }

        consume_spaces();  // whitespace inside tags separates tokens only

        if (src_.compare(cur_, 3, "-%}") == 0) {
            push(TokenType::kCloseStatement, "%}", cur_);
            cur_ = skip_js_spaces(src_, cur_ + 3);
            continue;
        }
        if (src_.compare(cur_, 3, "-}}") == 0) {
            push(TokenType::kCloseExpression, "}}", cur_);
            cur_ = skip_js_spaces(src_, cur_ + 3);
            continue;
        }

        const char c = src_[cur_];
        const size_t start = cur_;
        if (c == '-' || c == '+') {
            if (tokens_.empty() || last_is(TokenType::kText)) {
                fail(std::string("unexpected character '") + c + "'", cur_);
            }
            TokenType last = tokens_.back().type;
            bool binary = last == TokenType::kIdentifier || last == TokenType::kNumber ||
                          last == TokenType::kString || last == TokenType::kCloseParen ||
                          last == TokenType::kCloseBracket;
            if (!binary) {
                // A sign in prefix position: part of a number literal, or a unary operator.
                ++cur_;
                std::string num = consume_while(is_digit);
                if (!num.empty() && cur_ + 1 < n_ && src_[cur_] == '.' &&
                    is_digit(src_[cur_ + 1])) {
                    ++cur_;
                    num += '.';
                    num += consume_while(is_digit);
                }
                if (num.empty()) {
                    push(TokenType::kUnary, std::string(1, c), start);
                } else {
                    push(TokenType::kNumber, c + num, start);
                }
                continue;
            }
        }

        bool matched = false;
        for (const Symbol& sym : kSymbols) {
            std::string_view text(sym.text);
            if (text == "}}" && curly_depth_ > 0) continue;  // `}}` closing a dict literal
            if (src_.compare(cur_, text.size(), text) != 0) continue;
            push(sym.type, std::string(text), cur_);
            if (sym.type == TokenType::kOpenExpression) {
                curly_depth_ = 0;
            } else if (sym.type == TokenType::kOpenBrace) {
                ++curly_depth_;
            } else if (sym.type == TokenType::kCloseBrace) {
                --curly_depth_;
            }
            cur_ += text.size();
            matched = true;
            break;
        }
        if (matched) continue;

        if (c == '\'' || c == '"') {
            ++cur_;
            std::string value = consume_string_literal(c);
            push(TokenType::kString, std::move(value), start);
            continue;
        }
        if (is_digit(c)) {
            std::string num = consume_while(is_digit);
            if (!last_is(TokenType::kDot) && cur_ + 1 < n_ && src_[cur_] == '.' &&
                is_digit(src_[cur_ + 1])) {
                ++cur_;
                num += '.';
                num += consume_while(is_digit);
            }
            push(TokenType::kNumber, std::move(num), start);
            continue;
        }
        if (is_word_char(c)) {
            push(TokenType::kIdentifier, consume_while(is_word_char), start);
            continue;
        }
        fail(std::string("unexpected character '") + c + "'", cur_);
    }
    push(TokenType::kEnd, "", n_);
    return std::move(tokens_);
}

}  // namespace

Source::Source(std::string_view original) : original_(original) {
    Mapped m;
    m.text = original_;
    m.origin.resize(original_.size());
    for (size_t i = 0; i < original_.size(); ++i) m.origin[i] = static_cast<uint32_t>(i);
    // Jinja's default keep_trailing_newline=False drops one final newline.
    if (!m.text.empty() && m.text.back() == '\n') {
        m.text.pop_back();
        m.origin.pop_back();
    }
    m = remove_generation_tags(trim_blocks(lstrip_blocks(m)));
    text_ = std::move(m.text);
    origin_ = std::move(m.origin);
}

std::pair<int, int> Source::line_col(uint32_t pos) const {
    size_t offset = pos < origin_.size() ? origin_[pos] : original_.size();
    int line = 1, col = 1;
    for (size_t i = 0; i < offset && i < original_.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(original_[i]);
        if (c == '\n') {
            ++line;
            col = 1;
        } else if ((c & 0xC0) != 0x80) {
            ++col;
        }
    }
    return {line, col};
}

std::vector<Token> tokenize(const Source& source) {
    return Lexer(source.text()).run();
}

}  // namespace tandem::jinja
