// Jinja filters (`value | name(args)`): @huggingface/jinja's set with its semantics, plus the
// Jinja builtins it lacks (select, reject, batch, min, max, sum, round, ...).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "text/jinja_builtins.h"
#include "text/jinja_error.h"
#include "text/jinja_json.h"
#include "text/jinja_unicode.h"

namespace tandem::jinja {
namespace {

[[noreturn]] void bad_operand(const std::string& filter, const Value& v) {
    if (v.is_undefined()) throw JinjaError("filter '" + filter + "': " + undefined_message(v));
    throw JinjaError("filter '" + filter + "' cannot be applied to a " + kind_name(v.kind()));
}

bool arg_bool(const CallArgs& args, size_t i, const char* name, bool fallback) {
    const Value* v = args.get(i, name);
    return v && !v->is_none() && !v->is_undefined() ? v->truthy() : fallback;
}

int64_t arg_int(const CallArgs& args, size_t i, const char* name, int64_t fallback) {
    const Value* v = args.get(i, name);
    if (!v || v->is_none() || v->is_undefined()) return fallback;
    if (v->is_int()) return v->as_int();
    if (v->is_float()) return static_cast<int64_t>(v->as_float());
    throw JinjaError(std::string("argument '") + name + "' must be an integer");
}

const Value* arg_opt(const CallArgs& args, size_t i, const char* name) {
    const Value* v = args.get(i, name);
    return v && !v->is_none() && !v->is_undefined() ? v : nullptr;
}

std::string arg_string(const CallArgs& args, size_t i, const char* name, const std::string& fallback) {
    const Value* v = arg_opt(args, i, name);
    if (!v) return fallback;
    if (!v->is_string()) throw JinjaError(std::string("argument '") + name + "' must be a string");
    return v->str();
}

// The text a string filter works on: Jinja converts any value with str(), undefined to "".
std::string text_of(const Value& v) { return v.is_string() ? v.str() : to_display(v); }

const ValueList& need_list(const std::string& filter, const Value& v) {
    if (!v.is_array()) bad_operand(filter, v);
    return v.list();
}

// JavaScript parseInt(s, 10): optional sign and leading digits after whitespace.
bool js_parse_int(const std::string& s, int64_t* out) {
    std::string_view t = js_trim(s, true, false);
    size_t i = 0;
    bool neg = false;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
    size_t start = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    if (i == start) return false;
    int64_t v = 0;
    auto res = std::from_chars(t.data() + start, t.data() + i, v);
    if (res.ec != std::errc()) return false;
    *out = neg ? -v : v;
    return true;
}

// JavaScript parseFloat: the longest decimal prefix after whitespace (finite values only).
bool js_parse_float(const std::string& s, double* out) {
    std::string_view t = js_trim(s, true, false);
    size_t i = 0;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    size_t digits = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
    if (i < t.size() && t[i] == '.') {
        ++i;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
    }
    if (digits == 0) return false;
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        size_t j = i + 1;
        if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
        size_t k = j;
        while (k < t.size() && t[k] >= '0' && t[k] <= '9') ++k;
        if (k > j) i = k;
    }
    double v = std::strtod(std::string(t.substr(0, i)).c_str(), nullptr);
    if (!std::isfinite(v)) return false;
    *out = v;
    return true;
}

std::string title_case(const std::string& s) {
    // The reference's /\b\w/g -> upper case: the first word character after a non-word one.
    std::string out = s;
    for (size_t i = 0; i < out.size(); ++i) {
        if (is_word_char(out[i]) && (i == 0 || !is_word_char(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z') {
            out[i] = static_cast<char>(out[i] - 'a' + 'A');
        }
    }
    return out;
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

// Python's printf-style `"%s and %d" | format(a, b)`.
std::string percent_format(const std::string& fmt, const CallArgs& args) {
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        size_t j = i + 1;
        std::string spec;
        while (j < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[j]) != std::string_view::npos) {
            spec += fmt[j++];
        }
        if (j >= fmt.size()) throw JinjaError("format: incomplete format");
        char conv = fmt[j];
        i = j;
        if (conv == '%') {
            out += '%';
            continue;
        }
        if (next >= args.positional.size()) throw JinjaError("format: not enough arguments");
        const Value& v = args.positional[next++];
        char buf[128];
        if (conv == 's' || conv == 'r') {
            out += to_display(v);
        } else if (conv == 'd' || conv == 'i') {
            if (!v.is_number() && !v.is_bool()) throw JinjaError("format: %d needs a number");
            long long n = v.is_bool() ? v.as_bool() : v.is_int() ? v.as_int() : static_cast<long long>(v.as_float());
            std::snprintf(buf, sizeof(buf), ("%" + spec + "lld").c_str(), n);
            out += buf;
        } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'g') {
            if (!v.is_number()) throw JinjaError("format: %f needs a number");
            if (spec.size() > 8) throw JinjaError("format: bad width");
            std::snprintf(buf, sizeof(buf), ("%" + spec + conv).c_str(), v.number());
            out += buf;
        } else {
            throw JinjaError(std::string("format: unsupported conversion %") + conv);
        }
    }
    return out;
}

// A hashable key for `unique` (JavaScript Set semantics on the underlying values).
std::string unique_key(const Value& v) {
    switch (v.kind()) {
        case Kind::kString: return "s" + v.str();
        case Kind::kInt: return "n" + js_number(static_cast<double>(v.as_int()));
        case Kind::kFloat: return "n" + js_number(v.as_float());
        case Kind::kBool: return v.as_bool() ? "t" : "f";
        case Kind::kNone: return "z";
        case Kind::kUndefined: return "u";
        default: return "p" + std::to_string(reinterpret_cast<uintptr_t>(v.identity()));
    }
}

Value filter_tojson(Interpreter& in, const Value& v, const CallArgs& args) {
    JsonOptions options;
    options.indent = static_cast<int>(std::clamp<int64_t>(arg_int(args, 0, "indent", 0), 0, 64));
    options.ensure_ascii = arg_bool(args, 99, "ensure_ascii", false);
    options.sort_keys = arg_bool(args, 99, "sort_keys", false);
    if (const Value* sep = arg_opt(args, 99, "separators")) {
        if (!sep->is_array() || sep->list().size() != 2 || !sep->list()[0].is_string() ||
            !sep->list()[1].is_string()) {
            throw JinjaError("tojson: separators must be a tuple of two strings");
        }
        options.separators = std::make_pair(sep->list()[0].str(), sep->list()[1].str());
    }
    options.max_bytes = in.limits().max_output_bytes;
    std::string out = to_json(v, options);
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
}

Value filter_sort(Interpreter& in, const Value& v, const CallArgs& args) {
    ValueList items = need_list("sort", v);
    bool reverse = arg_bool(args, 0, "reverse", false);
    bool case_sensitive = arg_bool(args, 1, "case_sensitive", false);
    const Value* attr = arg_opt(args, 2, "attribute");
    std::string path = !attr ? "" : attr->is_int() ? std::to_string(attr->as_int()) : text_of(*attr);
    in.charge(items.size() * 4 + 1);
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        int c = attr ? compare_values(attribute_path(a, path), attribute_path(b, path), case_sensitive)
                     : compare_values(a, b, case_sensitive);
        return reverse ? c > 0 : c < 0;
    });
    return Value::array(std::move(items));
}

Value filter_join(Interpreter& in, const Value& v, const CallArgs& args) {
    std::string sep = arg_string(args, 0, "d", "");
    if (const Value* s = arg_opt(args, 0, "separator")) sep = text_of(*s);
    const Value* attr = arg_opt(args, 1, "attribute");
    std::string out;
    if (v.is_string()) {
        auto chars = utf8_chars(v.str());
        for (size_t i = 0; i < chars.size(); ++i) {
            if (i) out += sep;
            out += chars[i];
            in.check_size(out.size());
        }
    } else if (v.is_array()) {
        const ValueList& items = v.list();
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += sep;
            out += concat_piece(attr ? attribute_path(items[i], text_of(*attr)) : items[i]);
            in.check_size(out.size());
        }
        in.charge(items.size());
    } else if (!v.is_undefined()) {
        bad_operand("join", v);
    }
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
}

Value filter_indent(const Value& v, const CallArgs& args) {
    std::string text = text_of(v);
    std::string pad(4, ' ');
    if (const Value* w = arg_opt(args, 0, "width")) {
        if (w->is_string()) {
            pad = w->str();
        } else if (w->is_int() && w->as_int() >= 0 && w->as_int() <= 1024) {
            pad.assign(static_cast<size_t>(w->as_int()), ' ');
        } else {
            throw JinjaError("indent: width must be a number (0..1024) or a string");
        }
    }
    bool first = arg_bool(args, 1, "first", false);
    bool blank = arg_bool(args, 2, "blank", false);
    std::string out;
    size_t start = 0, line = 0;
    while (true) {
        size_t end = text.find('\n', start);
        std::string_view piece = std::string_view(text).substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (!((!first && line == 0) || (!blank && piece.empty()))) out += pad;
        out += piece;
        if (end == std::string::npos) break;
        out += '\n';
        start = end + 1;
        ++line;
    }
    return Value::string(std::move(out));
}

Value filter_select(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
    const ValueList& items = need_list(name, v);
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool keep_true = name == "select" || name == "selectattr";
    size_t first_test_arg = by_attr ? 1 : 0;
    std::string attr = by_attr ? arg_string(args, 0, "attribute", "") : "";
    if (by_attr && attr.empty()) throw JinjaError(name + " needs an attribute name");
    const Value* test = args.positional.size() > first_test_arg ? &args.positional[first_test_arg] : nullptr;
    if (test && !test->is_string()) throw JinjaError(name + ": the test name must be a string");
    CallArgs test_args;
    for (size_t i = first_test_arg + 1; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
    ValueList out;
    in.charge(items.size());
    for (const auto& item : items) {
        Value subject = by_attr ? attribute_path(item, attr) : item;
        bool result = test ? apply_test(in, test->str(), subject, test_args) : subject.truthy();
        if (result == keep_true) out.push_back(item);
    }
    return Value::array(std::move(out));
}

Value filter_map(Interpreter& in, const Value& v, CallArgs& args, const ScopePtr& scope) {
    if (v.is_undefined()) return Value::array();
    const ValueList& items = need_list("map", v);
    ValueList out;
    in.charge(items.size());
    if (const Value* attr = args.kwarg("attribute")) {
        const Value* fallback = args.kwarg("default");
        std::string path = attr->is_int() ? std::to_string(attr->as_int()) : text_of(*attr);
        for (const auto& item : items) {
            Value x = attribute_path(item, path);
            out.push_back(x.is_undefined() && fallback ? *fallback : x);
        }
        return Value::array(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string()) {
        throw JinjaError("map needs a filter name or attribute=");
    }
    std::string filter = args.positional[0].str();
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const auto& item : items) out.push_back(apply_filter(in, filter, item, rest, scope));
    return Value::array(std::move(out));
}

Value filter_min_max(Interpreter& in, bool is_max, const Value& v, const CallArgs& args) {
    const ValueList& items = need_list(is_max ? "max" : "min", v);
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    const Value* attr = arg_opt(args, 1, "attribute");
    in.charge(items.size());
    const Value* best = nullptr;
    Value best_key;
    for (const auto& item : items) {
        Value key = attr ? attribute_path(item, text_of(*attr)) : item;
        if (!best || (is_max ? compare_values(key, best_key, case_sensitive) > 0
                             : compare_values(key, best_key, case_sensitive) < 0)) {
            best = &item;
            best_key = key;
        }
    }
    return best ? *best : Value::undefined("");
}

Value filter_round(const Value& v, const CallArgs& args) {
    if (!v.is_number()) bad_operand("round", v);
    int64_t precision = std::clamp<int64_t>(arg_int(args, 0, "precision", 0), -300, 300);
    std::string method = arg_string(args, 1, "method", "common");
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = v.number() * scale;
    if (method == "common") {
        x = std::round(x);
    } else if (method == "ceil") {
        x = std::ceil(x);
    } else if (method == "floor") {
        x = std::floor(x);
    } else {
        throw JinjaError("round: method must be common, ceil or floor");
    }
    double r = x / scale;
    if (!std::isfinite(r)) throw JinjaError("round: result is not finite");
    return Value::floating(r);
}

Value filter_sum(Interpreter& in, const Value& v, const CallArgs& args) {
    const ValueList& items = need_list("sum", v);
    const Value* attr = arg_opt(args, 0, "attribute");
    Value total = Value::integer(arg_int(args, 1, "start", 0));
    in.charge(items.size());
    for (const auto& item : items) {
        total = binary_op(in, BinaryOp::kAdd, total, attr ? attribute_path(item, text_of(*attr)) : item);
    }
    return total;
}

Value filter_batch(Interpreter& in, const Value& v, const CallArgs& args) {
    const ValueList& items = need_list("batch", v);
    int64_t size = arg_int(args, 0, "linecount", 0);
    if (size <= 0) throw JinjaError("batch: linecount must be positive");
    const Value* fill = arg_opt(args, 1, "fill_with");
    ValueList out, current;
    in.charge(items.size());
    for (const auto& item : items) {
        current.push_back(item);
        if (static_cast<int64_t>(current.size()) == size) {
            out.push_back(Value::array(std::move(current)));
            current.clear();
        }
    }
    if (!current.empty()) {
        if (fill) {
            while (static_cast<int64_t>(current.size()) < size) current.push_back(*fill);
        }
        out.push_back(Value::array(std::move(current)));
    }
    return Value::array(std::move(out));
}

Value dict_items(const Value& v) {
    ValueList out;
    for (const auto& [k, item] : v.map().items()) out.push_back(Value::array({Value::string(k), item}));
    return Value::array(std::move(out));
}

}  // namespace

Value attribute_path(const Value& item, const std::string& path) {
    Value current = item;
    size_t start = 0;
    while (true) {
        size_t dot = path.find('.', start);
        std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (current.is_mapping_like()) {
            const Value* v = current.map().find(part);
            if (!v) return Value::undefined(part);
            current = *v;
        } else if (current.is_array()) {
            int64_t index = -1;
            auto res = std::from_chars(part.data(), part.data() + part.size(), index);
            if (res.ec != std::errc() || res.ptr != part.data() + part.size() || index < 0 ||
                static_cast<size_t>(index) >= current.list().size()) {
                return Value::undefined(part);
            }
            current = current.list()[static_cast<size_t>(index)];
        } else {
            return Value::undefined(part);
        }
        if (dot == std::string::npos) return current;
        start = dot + 1;
    }
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
    if (a.is_none() && b.is_none()) return 0;
    if (a.is_undefined() && b.is_undefined()) return 0;
    if (a.is_none() || b.is_none() || a.is_undefined() || b.is_undefined()) {
        throw JinjaError(std::string("cannot compare ") + kind_name(a.kind()) + " with " + kind_name(b.kind()));
    }
    bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
    if (an && bn) {
        double x = a.is_bool() ? a.as_bool() : a.number();
        double y = b.is_bool() ? b.as_bool() : b.number();
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
        int c = case_sensitive ? a.str().compare(b.str()) : ascii_lower(a.str()).compare(ascii_lower(b.str()));
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    throw JinjaError(std::string("cannot compare ") + kind_name(a.kind()) + " with " + kind_name(b.kind()));
}

constexpr std::string_view kFilterNames[] = {
    "safe", "tojson", "default", "d", "string", "length", "count", "list", "first", "last", "reverse", "sort",
    "join", "unique", "select", "reject", "selectattr", "rejectattr", "map", "items", "dictsort", "min", "max",
    "sum", "batch", "abs", "round", "int", "float", "bool", "attr", "trim", "upper", "lower", "title",
    "capitalize", "indent", "replace", "wordcount", "escape", "e", "forceescape", "center", "format",
};

Value apply_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args,
                   const ScopePtr& scope) {
    if (std::find(std::begin(kFilterNames), std::end(kFilterNames), name) == std::end(kFilterNames)) {
        throw JinjaError("unknown filter '" + name + "'");
    }
    if (name == "safe") return v;
    if (name == "tojson") return filter_tojson(in, v, args);
    if (name == "default" || name == "d") {
        const Value* fallback = args.get(0, "default_value");
        bool boolean = arg_bool(args, 1, "boolean", false);
        if (v.is_undefined() || (boolean && !v.truthy())) return fallback ? *fallback : Value::string("");
        return v;
    }
    if (name == "string") {
        std::string s = to_display(v, in.limits().max_output_bytes);
        in.charge_bytes(s.size());
        return Value::string(std::move(s));
    }
    if (name == "length" || name == "count") {
        switch (v.kind()) {
            case Kind::kArray: return Value::integer(static_cast<int64_t>(v.list().size()));
            case Kind::kObject: return Value::integer(static_cast<int64_t>(v.map().size()));
            case Kind::kString: return Value::integer(static_cast<int64_t>(utf8_length(v.str())));
            case Kind::kUndefined: return Value::integer(0);
            default: bad_operand(name, v);
        }
    }
    if (name == "list") {
        if (v.is_array()) return v;
        ValueList out;
        if (v.is_string()) {
            for (auto ch : utf8_chars(v.str())) out.push_back(Value::string(std::string(ch)));
        } else if (v.is_object()) {
            for (const auto& [k, item] : v.map().items()) out.push_back(Value::string(k));
        } else if (!v.is_undefined()) {
            bad_operand(name, v);
        }
        in.check_items(out.size());
        return Value::array(std::move(out));
    }
    if (name == "first" || name == "last") {
        bool first = name == "first";
        if (v.is_array()) {
            const ValueList& l = v.list();
            if (l.empty()) return Value::undefined("");
            return first ? l.front() : l.back();
        }
        if (v.is_string()) {
            auto chars = utf8_chars(v.str());
            if (chars.empty()) return Value::undefined("");
            return Value::string(std::string(first ? chars.front() : chars.back()));
        }
        bad_operand(name, v);
    }
    if (name == "reverse") {
        if (v.is_array()) {
            ValueList out(v.list().rbegin(), v.list().rend());
            return Value::array(std::move(out));
        }
        if (v.is_string()) {
            auto chars = utf8_chars(v.str());
            std::string out;
            for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
            return Value::string(std::move(out));
        }
        bad_operand(name, v);
    }
    if (name == "sort") return filter_sort(in, v, args);
    if (name == "join") return filter_join(in, v, args);
    if (name == "unique") {
        const ValueList& items = need_list(name, v);
        std::unordered_set<std::string> seen;
        ValueList out;
        in.charge(items.size());
        for (const auto& item : items) {
            if (seen.insert(unique_key(item)).second) out.push_back(item);
        }
        return Value::array(std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
        return filter_select(in, name, v, args);
    }
    if (name == "map") return filter_map(in, v, args, scope);
    if (name == "items") {
        if (v.is_undefined()) return Value::array();
        if (!v.is_object()) bad_operand(name, v);
        return dict_items(v);
    }
    if (name == "dictsort") {
        if (!v.is_object()) bad_operand(name, v);
        CallArgs method_args = args;
        return in.call(member_of(v, "dictsort"), method_args, scope);
    }
    if (name == "min" || name == "max") return filter_min_max(in, name == "max", v, args);
    if (name == "sum") return filter_sum(in, v, args);
    if (name == "batch") return filter_batch(in, v, args);
    if (name == "abs") {
        if (v.is_int()) {
            if (v.as_int() == INT64_MIN) throw JinjaError("integer overflow");
            return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
        }
        if (v.is_float()) return Value::floating(std::fabs(v.as_float()));
        bad_operand(name, v);
    }
    if (name == "round") return filter_round(v, args);
    if (name == "int") {
        Value fallback = args.get(0, "default") ? *args.get(0, "default") : Value::integer(0);
        if (v.is_int()) return v;
        if (v.is_float()) {
            double t = std::trunc(v.as_float());
            if (std::fabs(t) >= 9.2e18) throw JinjaError("int: value out of range");
            return Value::integer(static_cast<int64_t>(t));
        }
        if (v.is_bool()) return Value::integer(v.as_bool() ? 1 : 0);
        if (v.is_string()) {
            int64_t i = 0;
            return js_parse_int(v.str(), &i) ? Value::integer(i) : fallback;
        }
        if (v.is_none() || v.is_undefined()) return fallback;
        bad_operand(name, v);
    }
    if (name == "float") {
        Value fallback = args.get(0, "default") ? *args.get(0, "default") : Value::floating(0.0);
        if (v.is_number()) return Value::floating(v.number());
        if (v.is_bool()) return Value::floating(v.as_bool() ? 1.0 : 0.0);
        if (v.is_string()) {
            double d = 0;
            return js_parse_float(v.str(), &d) ? Value::floating(d) : fallback;
        }
        if (v.is_none() || v.is_undefined()) return fallback;
        bad_operand(name, v);
    }
    if (name == "bool") return Value::boolean(v.truthy());
    if (name == "attr") {
        if (!v.is_mapping_like()) return Value::undefined("");
        const Value* x = v.map().find(arg_string(args, 0, "name", ""));
        return x ? *x : Value::undefined("");
    }

    // String filters: anything else is converted to its text first, as Jinja does.
    if (v.is_array() || v.is_object() || v.is_namespace() || v.is_function()) bad_operand(name, v);
    if (name == "trim") {
        std::string text = text_of(v);
        if (const Value* chars = arg_opt(args, 0, "chars")) {
            return Value::string(std::string(strip_chars(text, text_of(*chars), true, true)));
        }
        return Value::string(std::string(js_trim(text)));
    }
    if (name == "upper") return Value::string(ascii_upper(text_of(v)));
    if (name == "lower") return Value::string(ascii_lower(text_of(v)));
    if (name == "title") return Value::string(title_case(text_of(v)));
    if (name == "capitalize") {
        std::string s = text_of(v);
        if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
        return Value::string(std::move(s));
    }
    if (name == "indent") {
        Value out = filter_indent(v, args);
        in.check_size(out.str().size());
        in.charge_bytes(out.str().size());
        return out;
    }
    if (name == "replace") {
        CallArgs method_args = args;
        return in.call(member_of(Value::string(text_of(v)), "replace"), method_args, scope);
    }
    if (name == "wordcount") {
        std::string s = text_of(v);
        int64_t words = 0;
        for (size_t i = 0; i < s.size(); ++i) {
            if (is_word_char(s[i]) && (i == 0 || !is_word_char(s[i - 1]))) ++words;
        }
        return Value::integer(words);
    }
    if (name == "escape" || name == "e" || name == "forceescape") return Value::string(html_escape(text_of(v)));
    if (name == "center") {
        std::string s = text_of(v);
        int64_t width = std::clamp<int64_t>(arg_int(args, 0, "width", 80), 0, 4096);
        int64_t len = static_cast<int64_t>(utf8_length(s));
        if (len >= width) return Value::string(std::move(s));
        int64_t left = (width - len) / 2, right = width - len - left;
        return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(right), ' '));
    }
    std::string out = percent_format(text_of(v), args);  // format
    in.check_size(out.size());
    return Value::string(std::move(out));
}

}  // namespace tandem::jinja
