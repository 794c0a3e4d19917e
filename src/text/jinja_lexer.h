// Jinja lexer: the whitespace preprocessing (trim_blocks, lstrip_blocks, `-` markers) and the
// token stream, both following @huggingface/jinja so that output matches it byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::jinja {

enum class TokenType : uint8_t {
    kText,
    kNumber,      // 12, 1.5, -3 (a sign right after an operator-like token is part of it)
    kString,      // value holds the unescaped contents
    kIdentifier,  // names and keywords
    kEquals,      // =
    kOpenParen,
    kCloseParen,
    kOpenStatement,    // {%
    kCloseStatement,   // %}
    kOpenExpression,   // {{
    kCloseExpression,  // }}
    kOpenBracket,
    kCloseBracket,
    kOpenBrace,
    kCloseBrace,
    kComma,
    kDot,
    kColon,
    kPipe,
    kAdditive,        // + - ~
    kMultiplicative,  // * / // %
    kPower,           // **
    kComparison,      // < > <= >= == !=
    kUnary,           // a lone + or - in prefix position
    kComment,
    kEnd,
};

struct Token {
    TokenType type;
    std::string value;
    uint32_t pos;  // offset in Source::text()
};

// A template after preprocessing, with a map from each byte back to the original source so
// that errors name the line and column the author sees.
class Source {
  public:
    // Applies what transformers configures (trim_blocks and lstrip_blocks), drops one trailing
    // newline, and removes {% generation %} tags, exactly as the reference does.
    explicit Source(std::string_view original);
    const std::string& text() const { return text_; }
    // 1-based line and column (in code points) in the original template.
    std::pair<int, int> line_col(uint32_t pos) const;

  private:
    std::string original_;
    std::string text_;
    std::vector<uint32_t> origin_;  // origin_[i]: offset in original_ of text_[i]
};

// Splits the preprocessed template into tokens; throws JinjaError on bad input.
std::vector<Token> tokenize(const Source& source);

}  // namespace tandem::jinja
