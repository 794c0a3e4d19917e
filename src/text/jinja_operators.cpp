// Binary operators of the Jinja interpreter, with @huggingface/jinja's semantics where they
// produce output and Python's where the reference only raises.
#include <cmath>
#include <limits>

#include "text/jinja_builtins.h"
#include "text/jinja_error.h"
#include "text/jinja_interpreter.h"
#include "text/jinja_json.h"

namespace tandem::jinja {
namespace {

const char* op_name(BinaryOp op) {
    switch (op) {
        case BinaryOp::kAdd:
            return "+";
        case BinaryOp::kSub:
            return "-";
        case BinaryOp::kConcat:
            return "~";
        case BinaryOp::kMul:
            return "*";
        case BinaryOp::kDiv:
            return "/";
        case BinaryOp::kFloorDiv:
            return "//";
        case BinaryOp::kMod:
            return "%";
        case BinaryOp::kPow:
            return "**";
        case BinaryOp::kEq:
            return "==";
        case BinaryOp::kNe:
            return "!=";
        case BinaryOp::kLt:
            return "<";
        case BinaryOp::kGt:
            return ">";
        case BinaryOp::kLe:
            return "<=";
        case BinaryOp::kGe:
            return ">=";
        case BinaryOp::kIn:
            return "in";
        case BinaryOp::kNotIn:
            return "not in";
    }
    return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
    if (a.is_undefined()) throw JinjaError(undefined_message(a));
    if (b.is_undefined()) throw JinjaError(undefined_message(b));
    throw JinjaError(std::string("unsupported operand types for '") + op_name(op) +
                     "': " + kind_name(a.kind()) + " and " + kind_name(b.kind()));
}

bool numeric_like(const Value& v) {
    return v.is_number() || v.is_bool();
}
double as_double(const Value& v) {
    return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.number();
}
int64_t as_int64(const Value& v) {
    return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int();
}

Value make_float(double d) {
    if (!std::isfinite(d)) throw JinjaError("arithmetic result is not a finite number");
    return Value::floating(d);
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
    bool ints = !a.is_float() && !b.is_float();
    if (ints) {
        int64_t x = as_int64(a), y = as_int64(b), r = 0;
        switch (op) {
            case BinaryOp::kAdd:
                if (__builtin_add_overflow(x, y, &r)) throw JinjaError("integer overflow");
                return Value::integer(r);
            case BinaryOp::kSub:
                if (__builtin_sub_overflow(x, y, &r)) throw JinjaError("integer overflow");
                return Value::integer(r);
            case BinaryOp::kMul:
                if (__builtin_mul_overflow(x, y, &r)) throw JinjaError("integer overflow");
                return Value::integer(r);
            case BinaryOp::kDiv:
                if (y == 0) throw JinjaError("division by zero");
                return make_float(static_cast<double>(x) / static_cast<double>(y));
            case BinaryOp::kFloorDiv:
            case BinaryOp::kMod: {
                if (y == 0)
                    throw JinjaError(op == BinaryOp::kMod ? "modulo by zero" : "division by zero");
                if (x == INT64_MIN && y == -1) throw JinjaError("integer overflow");
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward negative infinity
                    --q;
                    m += y;
                }
                return Value::integer(op == BinaryOp::kMod ? m : q);
            }
            case BinaryOp::kPow: {
                if (y < 0) {
                    if (x == 0) throw JinjaError("0 cannot be raised to a negative power");
                    return make_float(std::pow(static_cast<double>(x), static_cast<double>(y)));
                }
                int64_t result = 1, base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if (e & 1) {
                        if (__builtin_mul_overflow(result, base, &result))
                            throw JinjaError("integer overflow");
                    }
                    if (e > 1 && __builtin_mul_overflow(base, base, &base))
                        throw JinjaError("integer overflow");
                }
                return Value::integer(result);
            }
            default:
                break;
        }
    }
    double x = as_double(a), y = as_double(b);
    switch (op) {
        case BinaryOp::kAdd:
            return make_float(x + y);
        case BinaryOp::kSub:
            return make_float(x - y);
        case BinaryOp::kMul:
            return make_float(x * y);
        case BinaryOp::kDiv:
            if (y == 0) throw JinjaError("division by zero");
            return make_float(x / y);
        case BinaryOp::kFloorDiv:
            if (y == 0) throw JinjaError("division by zero");
            return make_float(std::floor(x / y));
        case BinaryOp::kMod: {
            if (y == 0) throw JinjaError("modulo by zero");
            double m = std::fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return make_float(m);
        }
        case BinaryOp::kPow:
            if (x == 0 && y < 0) throw JinjaError("0 cannot be raised to a negative power");
            return make_float(std::pow(x, y));
        default:
            break;
    }
    unsupported(op, a, b);
}

bool compare(BinaryOp op, int c) {
    switch (op) {
        case BinaryOp::kLt:
            return c < 0;
        case BinaryOp::kGt:
            return c > 0;
        case BinaryOp::kLe:
            return c <= 0;
        default:
            return c >= 0;
    }
}

bool contains(Interpreter& in, const Value& needle, const Value& haystack, BinaryOp op) {
    if (haystack.is_array()) {
        in.charge(haystack.list().size());
        for (const auto& item : haystack.list()) {
            if (strict_equals(item, needle)) return true;
        }
        return false;
    }
    if (haystack.is_string() && needle.is_string()) {
        in.charge_bytes(haystack.str().size());
        return haystack.str().find(needle.str()) != std::string::npos;
    }
    if (haystack.is_mapping_like() && needle.is_string())
        return haystack.map().find(needle.str()) != nullptr;
    if (haystack.is_undefined()) return false;  // `x in undefined` is false
    unsupported(op, needle, haystack);
}

}  // namespace

std::string concat_piece(const Value& v) {
    // The reference concatenates JavaScript values: floats lose their ".0" here.
    if (v.is_float()) return js_number(v.as_float());
    return to_display(v);
}

Value binary_op(Interpreter& in, BinaryOp op, const Value& a, const Value& b) {
    switch (op) {
        case BinaryOp::kEq:
            return Value::boolean(loose_equals(a, b));
        case BinaryOp::kNe:
            return Value::boolean(!loose_equals(a, b));
        case BinaryOp::kIn:
            return Value::boolean(contains(in, a, b, op));
        case BinaryOp::kNotIn:
            return Value::boolean(!contains(in, a, b, op));
        case BinaryOp::kConcat: {
            std::string s = concat_piece(a);
            std::string t = concat_piece(b);
            in.check_size(s.size() + t.size());
            in.charge_bytes(s.size() + t.size());
            return Value::string(s + t);
        }
        default:
            break;
    }
    if (a.is_undefined() || b.is_undefined() || a.is_none() || b.is_none()) unsupported(op, a, b);
    if (numeric_like(a) && numeric_like(b)) {
        if (op == BinaryOp::kLt || op == BinaryOp::kGt || op == BinaryOp::kLe ||
            op == BinaryOp::kGe) {
            double x = as_double(a), y = as_double(b);
            return Value::boolean(compare(op, x < y ? -1 : x > y ? 1 : 0));
        }
        return arithmetic(op, a, b);
    }
    if (op == BinaryOp::kAdd) {
        if (a.is_array() && b.is_array()) {
            in.check_items(a.list().size() + b.list().size());
            in.charge(a.list().size() + b.list().size());
            ValueList out = a.list();
            out.insert(out.end(), b.list().begin(), b.list().end());
            return Value::array(std::move(out));
        }
        if (a.is_string() || b.is_string()) {
            // The reference joins a string with anything through JavaScript's toString.
            std::string s = concat_piece(a);
            std::string t = concat_piece(b);
            in.check_size(s.size() + t.size());
            in.charge_bytes(s.size() + t.size());
            return Value::string(s + t);
        }
    }
    if (op == BinaryOp::kMul && (a.is_string() || b.is_string()) && (a.is_int() || b.is_int())) {
        const Value& s = a.is_string() ? a : b;
        int64_t n = a.is_int() ? a.as_int() : b.as_int();
        if (n <= 0) return Value::string("");
        if (static_cast<uint64_t>(n) >
            in.limits().max_output_bytes / std::max<size_t>(s.str().size(), 1)) {
            in.check_size(in.limits().max_output_bytes + 1);
        }
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += s.str();
        in.charge_bytes(out.size());
        return Value::string(std::move(out));
    }
    if (a.is_string() && b.is_string() &&
        (op == BinaryOp::kLt || op == BinaryOp::kGt || op == BinaryOp::kLe ||
         op == BinaryOp::kGe)) {
        int c = a.str().compare(b.str());
        return Value::boolean(compare(op, c));
    }
    unsupported(op, a, b);
}

}  // namespace tandem::jinja
