// Jinja parser: tokens to a syntax tree, with @huggingface/jinja's grammar and operator
// precedence; every error names the offending position.
#pragma once

#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"

namespace tandem::jinja {

// Nesting depth (blocks plus expressions) past which a template is rejected, so that a
// hostile template cannot exhaust the stack of the parser or the interpreter.
inline constexpr int kMaxParseDepth = 200;

// Parses the whole template; throws JinjaError (with the token's position) on bad syntax.
std::vector<NodePtr> parse(const std::vector<Token>& tokens);

}  // namespace tandem::jinja
