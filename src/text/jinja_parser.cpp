// Jinja parser: recursive descent over the token stream.
#include "text/jinja_parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "text/jinja_error.h"

namespace tandem::jinja {
namespace {

NodePtr make(NodeKind kind, uint32_t pos) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->pos = pos;
    return node;
}

std::string describe(const Token& t) {
    switch (t.type) {
        case TokenType::kEnd: return "end of template";
        case TokenType::kText: return "text";
        case TokenType::kString: return "string '" + t.value + "'";
        case TokenType::kComment: return "comment";
        default: return "'" + t.value + "'";
    }
}

// Marks whether a macro body reads `varargs` or `kwargs` (they then collect extra arguments).
void scan_special_names(const Node& node, bool* varargs, bool* kwargs) {
    if (node.kind == NodeKind::kName) {
        if (node.text == "varargs") *varargs = true;
        if (node.text == "kwargs") *kwargs = true;
    }
    for (const auto& k : node.kids) {
        if (k) scan_special_names(*k, varargs, kwargs);
    }
    for (const auto& a : node.args) {
        if (a.value) scan_special_names(*a.value, varargs, kwargs);
    }
    for (const auto& b : node.body) scan_special_names(*b, varargs, kwargs);
    for (const auto& b : node.else_body) scan_special_names(*b, varargs, kwargs);
}

class Parser {
public:
    explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

    std::vector<NodePtr> parse_program() {
        std::vector<NodePtr> body;
        while (!is(TokenType::kEnd)) body.push_back(parse_any());
        return body;
    }

private:
    struct DepthGuard {
        explicit DepthGuard(Parser& p) : p(p) {
            if (++p.depth_ > kMaxParseDepth) {
                throw JinjaError("template nested too deeply", p.peek().pos);
            }
        }
        ~DepthGuard() { --p.depth_; }
        Parser& p;
    };

    const Token& peek(size_t k = 0) const {
        size_t i = cur_ + k;
        return i < t_.size() ? t_[i] : t_.back();
    }
    const Token& next() {
        const Token& tok = peek();
        if (cur_ < t_.size() - 1) ++cur_;
        return tok;
    }
    bool is(TokenType type) const { return peek().type == type; }
    bool is_ident(std::string_view name, size_t k = 0) const {
        return peek(k).type == TokenType::kIdentifier && peek(k).value == name;
    }
    bool is_statement(std::initializer_list<std::string_view> names) const {
        if (!is(TokenType::kOpenStatement) || peek(1).type != TokenType::kIdentifier) return false;
        for (auto n : names) {
            if (peek(1).value == n) return true;
        }
        return false;
    }
    [[noreturn]] void fail(const std::string& message, uint32_t pos) const {
        throw JinjaError(message, pos);
    }
    const Token& expect(TokenType type, const char* what) {
        if (!is(type)) fail(std::string("expected ") + what + ", found " + describe(peek()), peek().pos);
        return next();
    }
    void expect_ident(std::string_view name) {
        if (!is_ident(name)) {
            fail("expected '" + std::string(name) + "', found " + describe(peek()), peek().pos);
        }
        next();
    }
    void expect_close() { expect(TokenType::kCloseStatement, "'%}'"); }
    // Parses statements until one of `names` opens; `opener` names the block for the error.
    std::vector<NodePtr> parse_body(std::initializer_list<std::string_view> names,
                                    const char* opener, uint32_t open_pos) {
        std::vector<NodePtr> body;
        while (!is_statement(names)) {
            if (is(TokenType::kEnd)) {
                fail(std::string("unclosed '") + opener + "' block (missing {% end" + opener + " %})",
                     open_pos);
            }
            body.push_back(parse_any());
        }
        return body;
    }
    void expect_end(const char* name) {
        expect(TokenType::kOpenStatement, "'{%'");
        expect_ident(std::string("end") + name);
        expect_close();
    }

    NodePtr parse_any();
    NodePtr parse_statement();
    NodePtr parse_set(uint32_t pos);
    NodePtr parse_if(uint32_t pos);
    NodePtr parse_for(uint32_t pos);
    NodePtr parse_macro(uint32_t pos);
    NodePtr parse_call_block(uint32_t pos);
    NodePtr parse_filter_block(uint32_t pos);

    NodePtr parse_expression();
    NodePtr parse_sequence(bool primary);
    NodePtr parse_or();
    NodePtr parse_and();
    NodePtr parse_not();
    NodePtr parse_comparison();
    NodePtr parse_additive();
    NodePtr parse_multiplicative();
    NodePtr parse_power();
    NodePtr parse_test();
    NodePtr parse_filter();
    NodePtr parse_unary();
    NodePtr parse_postfix(NodePtr node);
    NodePtr parse_subscript(NodePtr object, uint32_t pos);
    NodePtr parse_primary();
    std::vector<Arg> parse_args(bool parameters);

    const std::vector<Token>& t_;
    size_t cur_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
};

NodePtr Parser::parse_any() {
    const Token& tok = peek();
    switch (tok.type) {
        case TokenType::kComment: {
            next();
            return make(NodeKind::kComment, tok.pos);
        }
        case TokenType::kText: {
            auto node = make(NodeKind::kText, tok.pos);
            node->text = next().value;
            return node;
        }
        case TokenType::kOpenStatement:
            return parse_statement();
        case TokenType::kOpenExpression: {
            next();
            auto expr = parse_expression();
            expect(TokenType::kCloseExpression, "'}}'");
            return expr;
        }
        default:
            fail("unexpected " + describe(tok), tok.pos);
    }
}

NodePtr Parser::parse_statement() {
    DepthGuard guard(*this);
    uint32_t pos = next().pos;  // {%
    if (!is(TokenType::kIdentifier)) fail("expected a statement name, found " + describe(peek()), peek().pos);
    const std::string name = next().value;
    if (name == "set") return parse_set(pos);
    if (name == "if") {
        auto node = parse_if(pos);
        expect_end("if");
        return node;
    }
    if (name == "for") return parse_for(pos);
    if (name == "macro") return parse_macro(pos);
    if (name == "call") return parse_call_block(pos);
    if (name == "filter") return parse_filter_block(pos);
    if (name == "break" || name == "continue") {
        if (loop_depth_ == 0) fail("'" + name + "' outside of a loop", pos);
        expect_close();
        return make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, pos);
    }
    fail("unknown statement '" + name + "'", pos);
}

NodePtr Parser::parse_set(uint32_t pos) {
    auto node = make(NodeKind::kSet, pos);
    NodePtr target = parse_sequence(false);
    if (target->kind == NodeKind::kName) {
        node->names.push_back(target->text);
    } else if (target->kind == NodeKind::kTuple) {
        for (auto& item : target->kids) {
            if (item->kind != NodeKind::kName) fail("can only unpack into names in 'set'", item->pos);
            node->names.push_back(item->text);
        }
        node->tuple_target = true;
    } else if (target->kind == NodeKind::kAttribute) {
        node->text = target->text;
        node->kids.resize(2);
        node->kids[1] = std::move(target->kids[0]);
    } else {
        fail("invalid assignment target in 'set'", target->pos);
    }
    if (is(TokenType::kEquals)) {
        next();
        if (node->kids.empty()) node->kids.resize(1);
        node->kids[0] = parse_sequence(false);
        expect_close();
    } else {
        expect_close();
        if (node->kids.empty()) node->kids.resize(1);
        node->body = parse_body({"endset"}, "set", pos);
        expect_end("set");
    }
    return node;
}

NodePtr Parser::parse_if(uint32_t pos) {
    DepthGuard guard(*this);
    auto node = make(NodeKind::kIf, pos);
    node->kids.push_back(parse_expression());
    expect_close();
    node->body = parse_body({"elif", "else", "endif"}, "if", pos);
    if (is_statement({"elif"})) {
        uint32_t elif_pos = next().pos;
        next();
        node->else_body.push_back(parse_if(elif_pos));
    } else if (is_statement({"else"})) {
        next();
        next();
        expect_close();
        node->else_body = parse_body({"endif"}, "if", pos);
    }
    return node;
}

NodePtr Parser::parse_for(uint32_t pos) {
    auto node = make(NodeKind::kFor, pos);
    NodePtr target = parse_sequence(true);
    if (target->kind == NodeKind::kName) {
        node->names.push_back(target->text);
    } else if (target->kind == NodeKind::kTuple) {
        for (auto& item : target->kids) {
            if (item->kind != NodeKind::kName) fail("can only unpack into names in 'for'", item->pos);
            node->names.push_back(item->text);
        }
        node->tuple_target = true;
    } else {
        fail("expected a name or a tuple of names after 'for'", target->pos);
    }
    expect_ident("in");
    NodePtr iterable = parse_expression();
    node->kids.resize(2);
    if (iterable->kind == NodeKind::kSelect) {  // for x in xs if cond
        node->kids[0] = std::move(iterable->kids[0]);
        node->kids[1] = std::move(iterable->kids[1]);
    } else {
        node->kids[0] = std::move(iterable);
    }
    expect_close();
    ++loop_depth_;
    node->body = parse_body({"endfor", "else"}, "for", pos);
    --loop_depth_;
    if (is_statement({"else"})) {
        next();
        next();
        expect_close();
        node->else_body = parse_body({"endfor"}, "for", pos);
    }
    expect_end("for");
    return node;
}

NodePtr Parser::parse_macro(uint32_t pos) {
    auto node = make(NodeKind::kMacro, pos);
    if (!is(TokenType::kIdentifier)) fail("expected a macro name, found " + describe(peek()), peek().pos);
    node->text = next().value;
    node->args = parse_args(true);
    expect_close();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_body({"endmacro"}, "macro", pos);
    loop_depth_ = saved_loops;
    expect_end("macro");
    for (const auto& b : node->body) scan_special_names(*b, &node->uses_varargs, &node->uses_kwargs);
    return node;
}

NodePtr Parser::parse_call_block(uint32_t pos) {
    auto node = make(NodeKind::kCallBlock, pos);
    if (is(TokenType::kOpenParen)) node->args = parse_args(true);
    if (!is(TokenType::kIdentifier)) fail("expected a macro name after 'call'", peek().pos);
    auto call = make(NodeKind::kCall, peek().pos);
    auto callee = make(NodeKind::kName, peek().pos);
    callee->text = next().value;
    call->kids.push_back(std::move(callee));
    call->args = parse_args(false);
    node->kids.push_back(std::move(call));
    expect_close();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_body({"endcall"}, "call", pos);
    loop_depth_ = saved_loops;
    expect_end("call");
    for (const auto& b : node->body) scan_special_names(*b, &node->uses_varargs, &node->uses_kwargs);
    return node;
}

NodePtr Parser::parse_filter_block(uint32_t pos) {
    auto node = make(NodeKind::kFilterBlock, pos);
    if (!is(TokenType::kIdentifier)) fail("expected a filter name after 'filter'", peek().pos);
    auto filter = make(NodeKind::kFilter, peek().pos);
    filter->text = next().value;
    filter->kids.emplace_back();  // operand: the rendered body
    if (is(TokenType::kOpenParen)) filter->args = parse_args(false);
    node->kids.push_back(std::move(filter));
    expect_close();
    node->body = parse_body({"endfilter"}, "filter", pos);
    expect_end("filter");
    return node;
}

NodePtr Parser::parse_expression() {
    DepthGuard guard(*this);
    NodePtr value = parse_or();
    if (!is_ident("if")) return value;
    uint32_t pos = next().pos;
    NodePtr cond = parse_or();
    if (is_ident("else")) {
        next();
        auto node = make(NodeKind::kTernary, pos);
        node->kids.push_back(std::move(cond));
        node->kids.push_back(std::move(value));
        node->kids.push_back(parse_expression());
        return node;
    }
    auto node = make(NodeKind::kSelect, pos);
    node->kids.push_back(std::move(value));
    node->kids.push_back(std::move(cond));
    return node;
}

NodePtr Parser::parse_sequence(bool primary) {
    uint32_t pos = peek().pos;
    NodePtr first = primary ? parse_primary() : parse_expression();
    if (!is(TokenType::kComma)) return first;
    auto tuple = make(NodeKind::kTuple, pos);
    tuple->kids.push_back(std::move(first));
    while (is(TokenType::kComma)) {
        next();
        if (is(TokenType::kCloseParen)) break;  // (a,)
        tuple->kids.push_back(primary ? parse_primary() : parse_expression());
    }
    return tuple;
}

NodePtr Parser::parse_or() {
    NodePtr left = parse_and();
    while (is_ident("or")) {
        auto node = make(NodeKind::kOr, next().pos);
        node->kids.push_back(std::move(left));
        node->kids.push_back(parse_and());
        left = std::move(node);
    }
    return left;
}

NodePtr Parser::parse_and() {
    NodePtr left = parse_not();
    while (is_ident("and")) {
        auto node = make(NodeKind::kAnd, next().pos);
        node->kids.push_back(std::move(left));
        node->kids.push_back(parse_not());
        left = std::move(node);
    }
    return left;
}

NodePtr Parser::parse_not() {
    if (!is_ident("not")) return parse_comparison();
    DepthGuard guard(*this);
    auto node = make(NodeKind::kUnary, next().pos);
    node->unary_op = 'n';
    node->kids.push_back(parse_not());
    return node;
}

NodePtr Parser::parse_comparison() {
    // Membership has the same precedence as comparison, chained left to right.
    NodePtr left = parse_additive();
    while (true) {
        BinaryOp op;
        uint32_t pos = peek().pos;
        if (is_ident("not") && is_ident("in", 1)) {
            next();
            next();
            op = BinaryOp::kNotIn;
        } else if (is_ident("in")) {
            next();
            op = BinaryOp::kIn;
        } else if (is(TokenType::kComparison)) {
            const std::string& v = next().value;
            op = v == "==" ? BinaryOp::kEq
               : v == "!=" ? BinaryOp::kNe
               : v == "<"  ? BinaryOp::kLt
               : v == ">"  ? BinaryOp::kGt
               : v == "<=" ? BinaryOp::kLe
                           : BinaryOp::kGe;
        } else {
            return left;
        }
        auto node = make(NodeKind::kBinary, pos);
        node->op = op;
        node->kids.push_back(std::move(left));
        node->kids.push_back(parse_additive());
        left = std::move(node);
    }
}

NodePtr Parser::parse_additive() {
    NodePtr left = parse_multiplicative();
    while (is(TokenType::kAdditive)) {
        const Token& tok = next();
        auto node = make(NodeKind::kBinary, tok.pos);
        node->op = tok.value == "+" ? BinaryOp::kAdd : tok.value == "-" ? BinaryOp::kSub : BinaryOp::kConcat;
        node->kids.push_back(std::move(left));
        node->kids.push_back(parse_multiplicative());
        left = std::move(node);
    }
    return left;
}

NodePtr Parser::parse_multiplicative() {
    NodePtr left = parse_power();
    while (is(TokenType::kMultiplicative)) {
        const Token& tok = next();
        auto node = make(NodeKind::kBinary, tok.pos);
        node->op = tok.value == "*"    ? BinaryOp::kMul
                 : tok.value == "/"    ? BinaryOp::kDiv
                 : tok.value == "//"   ? BinaryOp::kFloorDiv
                                       : BinaryOp::kMod;
        node->kids.push_back(std::move(left));
        node->kids.push_back(parse_power());
        left = std::move(node);
    }
    return left;
}

NodePtr Parser::parse_power() {
    // Left-associative like Jinja: 2 ** 3 ** 2 == (2 ** 3) ** 2.
    NodePtr left = parse_test();
    while (is(TokenType::kPower)) {
        auto node = make(NodeKind::kBinary, next().pos);
        node->op = BinaryOp::kPow;
        node->kids.push_back(std::move(left));
        node->kids.push_back(parse_test());
        left = std::move(node);
    }
    return left;
}

NodePtr Parser::parse_test() {
    NodePtr operand = parse_filter();
    while (is_ident("is")) {
        auto node = make(NodeKind::kTest, next().pos);
        if (is_ident("not")) {
            next();
            node->negate = true;
        }
        if (!is(TokenType::kIdentifier)) fail("expected a test name after 'is', found " + describe(peek()), peek().pos);
        node->text = next().value;
        node->kids.push_back(std::move(operand));
        if (is(TokenType::kOpenParen)) {
            node->args = parse_args(false);
        } else if (is(TokenType::kNumber) || is(TokenType::kString) ||
                   (is(TokenType::kIdentifier) && !is_ident("and") && !is_ident("or") &&
                    !is_ident("else") && !is_ident("if") && !is_ident("is") && !is_ident("in") &&
                    !is_ident("not"))) {
            // Jinja's `x is divisibleby 3` / `x is sameas none`: one argument without parentheses.
            node->args.push_back(Arg{ArgKind::kPositional, "", parse_postfix(parse_primary())});
        }
        operand = std::move(node);
    }
    return operand;
}

NodePtr Parser::parse_filter() {
    NodePtr operand = parse_unary();
    while (is(TokenType::kPipe)) {
        next();
        if (!is(TokenType::kIdentifier)) fail("expected a filter name after '|', found " + describe(peek()), peek().pos);
        auto node = make(NodeKind::kFilter, peek().pos);
        node->text = next().value;
        node->kids.push_back(std::move(operand));
        if (is(TokenType::kOpenParen)) node->args = parse_args(false);
        operand = std::move(node);
    }
    return operand;
}

NodePtr Parser::parse_unary() {
    const Token& tok = peek();
    if ((tok.type == TokenType::kUnary || tok.type == TokenType::kAdditive) &&
        (tok.value == "-" || tok.value == "+")) {
        DepthGuard guard(*this);
        auto node = make(NodeKind::kUnary, next().pos);
        node->unary_op = tok.value[0];
        node->kids.push_back(parse_unary());
        return node;
    }
    return parse_postfix(parse_primary());
}

NodePtr Parser::parse_postfix(NodePtr node) {
    while (true) {
        if (is(TokenType::kDot)) {
            uint32_t pos = next().pos;
            const Token& tok = peek();
            if (tok.type == TokenType::kIdentifier) {
                auto attr = make(NodeKind::kAttribute, pos);
                attr->text = next().value;
                attr->kids.push_back(std::move(node));
                node = std::move(attr);
            } else if (tok.type == TokenType::kNumber && tok.value.find('.') == std::string::npos &&
                       tok.value[0] != '-' && tok.value[0] != '+') {
                // obj.0 indexes like obj[0].
                auto index = make(NodeKind::kIndex, pos);
                index->kids.push_back(std::move(node));
                index->kids.push_back(parse_primary());
                node = std::move(index);
            } else {
                fail("expected an attribute name after '.', found " + describe(tok), tok.pos);
            }
        } else if (is(TokenType::kOpenBracket)) {
            uint32_t pos = next().pos;
            node = parse_subscript(std::move(node), pos);
        } else if (is(TokenType::kOpenParen)) {
            auto call = make(NodeKind::kCall, node->pos);  // errors point at the callee
            call->kids.push_back(std::move(node));
            call->args = parse_args(false);
            node = std::move(call);
        } else {
            return node;
        }
    }
}

NodePtr Parser::parse_subscript(NodePtr object, uint32_t pos) {
    // obj[key] or obj[start:stop:step] with any part omitted.
    std::vector<NodePtr> parts;
    bool is_slice = false;
    while (!is(TokenType::kCloseBracket)) {
        if (is(TokenType::kEnd)) fail("unclosed '['", pos);
        if (is(TokenType::kColon)) {
            parts.emplace_back();
            next();
            is_slice = true;
        } else {
            parts.push_back(parse_expression());
            if (is(TokenType::kColon)) {
                next();
                is_slice = true;
            } else if (!is(TokenType::kCloseBracket)) {
                fail("expected ']' or ':', found " + describe(peek()), peek().pos);
            }
        }
    }
    next();  // ]
    if (parts.empty()) fail("empty subscript '[]'", pos);
    if (is_slice) {
        if (parts.size() > 3) fail("a slice takes at most three parts", pos);
        auto node = make(NodeKind::kSlice, pos);
        node->kids.push_back(std::move(object));
        for (auto& p : parts) node->kids.push_back(std::move(p));
        node->kids.resize(4);
        return node;
    }
    auto node = make(NodeKind::kIndex, pos);
    node->kids.push_back(std::move(object));
    node->kids.push_back(std::move(parts[0]));
    return node;
}

NodePtr Parser::parse_primary() {
    DepthGuard guard(*this);
    const Token& tok = next();
    switch (tok.type) {
        case TokenType::kNumber: {
            auto node = make(NodeKind::kLiteral, tok.pos);
            const std::string& v = tok.value;
            if (v.find('.') != std::string::npos) {
                node->literal = Value::floating(std::strtod(v.c_str(), nullptr));
            } else {
                int64_t i = 0;
                const char* begin = v.data() + (v[0] == '+' ? 1 : 0);
                auto res = std::from_chars(begin, v.data() + v.size(), i);
                if (res.ec != std::errc() || res.ptr != v.data() + v.size()) {
                    fail("integer literal out of range: " + v, tok.pos);
                }
                node->literal = Value::integer(i);
            }
            return node;
        }
        case TokenType::kString: {
            auto node = make(NodeKind::kLiteral, tok.pos);
            std::string s = tok.value;
            while (is(TokenType::kString)) s += next().value;  // "a" "b" == "ab"
            node->literal = Value::string(std::move(s));
            return node;
        }
        case TokenType::kIdentifier: {
            const std::string& v = tok.value;
            if (v == "true" || v == "True" || v == "false" || v == "False") {
                auto node = make(NodeKind::kLiteral, tok.pos);
                node->literal = Value::boolean(v[0] == 't' || v[0] == 'T');
                return node;
            }
            if (v == "none" || v == "None") {
                auto node = make(NodeKind::kLiteral, tok.pos);
                node->literal = Value::none();
                return node;
            }
            auto node = make(NodeKind::kName, tok.pos);
            node->text = v;
            return node;
        }
        case TokenType::kOpenParen: {
            if (is(TokenType::kCloseParen)) {  // ()
                next();
                return make(NodeKind::kTuple, tok.pos);
            }
            NodePtr inner = parse_sequence(false);
            expect(TokenType::kCloseParen, "')'");
            return inner;
        }
        case TokenType::kOpenBracket: {
            auto node = make(NodeKind::kList, tok.pos);
            while (!is(TokenType::kCloseBracket)) {
                node->kids.push_back(parse_expression());
                if (is(TokenType::kComma)) {
                    next();
                } else if (!is(TokenType::kCloseBracket)) {
                    fail("expected ',' or ']' in list, found " + describe(peek()), peek().pos);
                }
            }
            next();
            return node;
        }
        case TokenType::kOpenBrace: {
            auto node = make(NodeKind::kDict, tok.pos);
            while (!is(TokenType::kCloseBrace)) {
                node->kids.push_back(parse_expression());
                expect(TokenType::kColon, "':' in dict literal");
                node->kids.push_back(parse_expression());
                if (is(TokenType::kComma)) {
                    next();
                } else if (!is(TokenType::kCloseBrace)) {
                    fail("expected ',' or '}' in dict, found " + describe(peek()), peek().pos);
                }
            }
            next();
            return node;
        }
        default:
            fail("unexpected " + describe(tok), tok.pos);
    }
}

std::vector<Arg> Parser::parse_args(bool parameters) {
    uint32_t open = expect(TokenType::kOpenParen, "'('").pos;
    std::vector<Arg> args;
    bool saw_keyword = false, saw_spread = false;
    while (!is(TokenType::kCloseParen)) {
        if (is(TokenType::kEnd)) fail("unclosed '('", open);
        bool kw_spread = is(TokenType::kPower);
        bool spread = is(TokenType::kMultiplicative) && peek().value == "*";
        if (parameters && (kw_spread || spread)) fail("argument unpacking in a parameter list", peek().pos);
        if (kw_spread) {
            next();
            args.push_back(Arg{ArgKind::kKeywordSpread, "", parse_expression()});
            if (is(TokenType::kComma)) next();
            if (!is(TokenType::kCloseParen)) fail("'**' must be the last argument", peek().pos);
            break;
        }
        if (spread) {
            if (saw_spread) fail("only one '*' argument is allowed", peek().pos);
            saw_spread = true;
            next();
            args.push_back(Arg{ArgKind::kSpread, "", parse_expression()});
        } else {
            uint32_t pos = peek().pos;
            NodePtr value = parse_expression();
            if (is(TokenType::kEquals)) {
                next();
                if (value->kind != NodeKind::kName) fail("expected a name before '='", pos);
                std::string name = value->text;
                args.push_back(Arg{ArgKind::kKeyword, std::move(name), parse_expression()});
                saw_keyword = true;
            } else {
                if (parameters && value->kind != NodeKind::kName) fail("expected a parameter name", pos);
                if (saw_keyword) {
                    fail(parameters ? "non-default parameter follows default parameter"
                                    : "positional argument follows keyword argument",
                         pos);
                }
                if (saw_spread) fail("positional argument follows '*' unpacking", pos);
                std::string name = parameters ? value->text : std::string();
                args.push_back(Arg{ArgKind::kPositional, std::move(name), parameters ? nullptr : std::move(value)});
            }
            if (parameters) {
                for (size_t i = 0; i + 1 < args.size(); ++i) {
                    if (args[i].name == args.back().name) fail("duplicate parameter '" + args.back().name + "'", pos);
                }
            }
        }
        if (is(TokenType::kComma)) {
            next();
        } else if (!is(TokenType::kCloseParen)) {
            fail("expected ',' or ')', found " + describe(peek()), peek().pos);
        }
    }
    next();  // )
    return args;
}

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_program(); }

}  // namespace tandem::jinja
