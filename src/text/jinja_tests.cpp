// Jinja tests (`x is name`): the reference's set plus Jinja's comparison and divisibility tests.
#include <cmath>

#include "text/jinja_builtins.h"
#include "text/jinja_error.h"

namespace tandem::jinja {
namespace {

const Value& arg0(const std::string& name, const CallArgs& args) {
    if (args.positional.empty()) throw JinjaError("test '" + name + "' needs an argument");
    return args.positional[0];
}

bool compare_test(Interpreter& in, BinaryOp op, const Value& a, const Value& b) {
    return binary_op(in, op, a, b).truthy();
}

}  // namespace

bool apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
    const Kind k = v.kind();
    if (name == "defined") return k != Kind::kUndefined;
    if (name == "undefined") return k == Kind::kUndefined;
    if (name == "none") return k == Kind::kNone;
    if (name == "boolean") return k == Kind::kBool;
    if (name == "false") return k == Kind::kBool && !v.as_bool();
    if (name == "true") return k == Kind::kBool && v.as_bool();
    if (name == "string") return k == Kind::kString;
    if (name == "number") return k == Kind::kInt || k == Kind::kFloat;
    if (name == "integer") return k == Kind::kInt;
    if (name == "float") return k == Kind::kFloat;
    if (name == "iterable") return k == Kind::kArray || k == Kind::kString;
    if (name == "mapping") return k == Kind::kObject;
    if (name == "sequence") return k == Kind::kArray || k == Kind::kObject || k == Kind::kString;
    if (name == "callable") return k == Kind::kFunction;
    if (name == "escaped") return false;
    if (name == "odd" || name == "even") {
        if (k != Kind::kInt)
            throw JinjaError("test '" + name + "' needs an integer, not " + kind_name(k));
        bool odd = v.as_int() % 2 != 0;
        return name == "odd" ? odd : !odd;
    }
    if (name == "divisibleby") {
        const Value& d = arg0(name, args);
        if (!v.is_number() || !d.is_number()) throw JinjaError("test 'divisibleby' needs numbers");
        if (v.is_int() && d.is_int()) {
            if (d.as_int() == 0) throw JinjaError("divisibleby 0");
            return d.as_int() == -1 || v.as_int() % d.as_int() == 0;
        }
        if (d.number() == 0) throw JinjaError("divisibleby 0");
        return std::fmod(v.number(), d.number()) == 0;
    }
    if (name == "lower" || name == "upper") {
        if (k != Kind::kString) return false;
        for (char c : v.str()) {
            if (name == "lower" ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) return false;
        }
        return true;
    }
    if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") {
        return strict_equals(v, arg0(name, args));
    }
    if (name == "ne" || name == "!=") return !loose_equals(v, arg0(name, args));
    if (name == "lt" || name == "lessthan")
        return compare_test(in, BinaryOp::kLt, v, arg0(name, args));
    if (name == "le") return compare_test(in, BinaryOp::kLe, v, arg0(name, args));
    if (name == "gt" || name == "greaterthan")
        return compare_test(in, BinaryOp::kGt, v, arg0(name, args));
    if (name == "ge") return compare_test(in, BinaryOp::kGe, v, arg0(name, args));
    if (name == "in") return compare_test(in, BinaryOp::kIn, v, arg0(name, args));
    throw JinjaError("unknown test '" + name + "'");
}

}  // namespace tandem::jinja
