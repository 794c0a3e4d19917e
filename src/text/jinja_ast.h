// Syntax tree of a Jinja template: one node type whose fields are used per kind, so that the
// parser and interpreter stay small.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/jinja_value.h"

namespace tandem::jinja {

enum class NodeKind : uint8_t {
    // Statements (appear in bodies).
    kText,   // text: literal output
    kIf,     // kids[0] condition; body; else_body (an elif is a nested kIf)
    kFor,    // names (targets); kids[0] iterable; kids[1] filter condition or null; body; else_body
    kSet,    // names, or kids[1] namespace object + text attribute; kids[0] value or null (block:
             // body)
    kMacro,  // text name; params; body
    kCallBlock,    // kids[0] a kCall node; params (caller's); body
    kFilterBlock,  // kids[0] a kFilter node whose operand is null; body
    kBreak,
    kContinue,
    kComment,
    // Expressions (a bare expression in a body is printed).
    kLiteral,    // literal
    kName,       // text
    kList,       // kids: items
    kTuple,      // kids: items
    kDict,       // kids: key0, value0, key1, value1, ...
    kAttribute,  // kids[0] object; text attribute (obj.name / obj.0)
    kIndex,      // kids[0] object; kids[1] key
    kSlice,      // kids[0] object; kids[1..3] start, stop, step (null when omitted)
    kCall,       // kids[0] callee; args
    kFilter,     // kids[0] operand; text filter name; args
    kTest,       // kids[0] operand; text test name; args; negate
    kUnary,      // kids[0]; op: '-', '+', or 'n' (not)
    kBinary,     // kids[0], kids[1]; op
    kAnd,
    kOr,
    kTernary,  // kids[0] condition, kids[1] if-true, kids[2] if-false
    kSelect,   // kids[0] value, kids[1] condition: `a if c` without else
};

enum class BinaryOp : uint8_t {
    kAdd,
    kSub,
    kConcat,
    kMul,
    kDiv,
    kFloorDiv,
    kMod,
    kPow,
    kEq,
    kNe,
    kLt,
    kGt,
    kLe,
    kGe,
    kIn,
    kNotIn,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

enum class ArgKind : uint8_t { kPositional, kKeyword, kSpread, kKeywordSpread };

// A call argument, or a macro parameter (kPositional: no default; kKeyword: with default).
struct Arg {
    ArgKind kind;
    std::string name;
    NodePtr value;  // argument value or parameter default
};

struct Node {
    NodeKind kind;
    uint32_t pos = 0;  // offset in the preprocessed template, for error messages
    BinaryOp op = BinaryOp::kAdd;
    char unary_op = 0;
    bool negate = false;
    bool tuple_target = false;  // for/set targets written as a tuple
    bool uses_varargs = false;  // macros and call blocks that read `varargs` / `kwargs`
    bool uses_kwargs = false;
    std::string text;
    Value literal;
    std::vector<std::string> names;
    std::vector<NodePtr> kids;
    std::vector<Arg> args;
    std::vector<NodePtr> body;
    std::vector<NodePtr> else_body;
};

inline bool is_statement(NodeKind kind) {
    return kind <= NodeKind::kComment;
}

}  // namespace tandem::jinja
