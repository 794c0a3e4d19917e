// Runtime values of the Jinja interpreter.
#include "text/jinja_value.h"

#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "text/jinja_error.h"
#include "text/jinja_json.h"
#include "text/jinja_unicode.h"

namespace tandem::jinja {

size_t ValueMap::position(std::string_view key) const {
    if (index_) {
        auto it = index_->find(std::string(key));
        return it == index_->end() ? items_.size() : it->second;
    }
    for (size_t i = 0; i < items_.size(); ++i) {
        if (items_[i].first == key) return i;
    }
    return items_.size();
}

const Value* ValueMap::find(std::string_view key) const {
    size_t i = position(key);
    return i < items_.size() ? &items_[i].second : nullptr;
}

Value* ValueMap::find(std::string_view key) {
    size_t i = position(key);
    return i < items_.size() ? &items_[i].second : nullptr;
}

void ValueMap::set(std::string_view key, Value value) {
    size_t i = position(key);
    if (i < items_.size()) {
        items_[i].second = std::move(value);
        return;
    }
    items_.emplace_back(std::string(key), std::move(value));
    if (index_) {
        index_->emplace(std::string(key), items_.size() - 1);
    } else if (items_.size() > kIndexThreshold) {
        index_ = std::make_unique<std::unordered_map<std::string, size_t>>();
        for (size_t k = 0; k < items_.size(); ++k) index_->emplace(items_[k].first, k);
    }
}

bool ValueMap::erase(std::string_view key) {
    size_t i = position(key);
    if (i == items_.size()) return false;
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
    if (index_) {
        index_->clear();
        for (size_t k = 0; k < items_.size(); ++k) index_->emplace(items_[k].first, k);
    }
    return true;
}

const Value* CallArgs::kwarg(std::string_view name) const {
    for (const auto& [k, v] : keyword) {
        if (k == name) return &v;
    }
    return nullptr;
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
    if (index < positional.size()) return &positional[index];
    return kwarg(name);
}

Value Value::undefined(std::string name) {
    Value v;
    if (!name.empty()) v.p_ = std::make_shared<std::string>(std::move(name));
    return v;
}

Value Value::none() {
    Value v;
    v.kind_ = Kind::kNone;
    return v;
}

Value Value::boolean(bool b) {
    Value v;
    v.kind_ = Kind::kBool;
    v.b_ = b;
    return v;
}

Value Value::integer(int64_t i) {
    Value v;
    v.kind_ = Kind::kInt;
    v.i_ = i;
    return v;
}

Value Value::floating(double f) {
    Value v;
    v.kind_ = Kind::kFloat;
    v.f_ = f;
    return v;
}

Value Value::string(std::string s) {
    Value v;
    v.kind_ = Kind::kString;
    v.p_ = std::make_shared<std::string>(std::move(s));
    return v;
}

Value Value::array() { return array(ValueList()); }
Value Value::object() { return object(ValueMap()); }
Value Value::name_space() { return name_space(ValueMap()); }

Value Value::array(ValueList items) {
    Value v;
    v.kind_ = Kind::kArray;
    v.p_ = std::make_shared<ValueList>(std::move(items));
    return v;
}

Value Value::object(ValueMap map) {
    Value v;
    v.kind_ = Kind::kObject;
    v.p_ = std::make_shared<ValueMap>(std::move(map));
    return v;
}

Value Value::name_space(ValueMap map) {
    Value v;
    v.kind_ = Kind::kNamespace;
    v.p_ = std::make_shared<ValueMap>(std::move(map));
    return v;
}

Value Value::function(std::string name, decltype(Callable::fn) fn) {
    Value v;
    v.kind_ = Kind::kFunction;
    v.p_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
    return v;
}

std::string Value::undefined_name() const {
    if (kind_ != Kind::kUndefined || !p_) return {};
    return *static_cast<const std::string*>(p_.get());
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::kUndefined:
        case Kind::kNone:
            return false;
        case Kind::kBool:
            return b_;
        case Kind::kInt:
            return i_ != 0;
        case Kind::kFloat:
            return f_ != 0 && !std::isnan(f_);
        case Kind::kString:
            return !str().empty();
        case Kind::kArray:
            return !list().empty();
        case Kind::kObject:
            return !map().empty();
        case Kind::kNamespace:
        case Kind::kFunction:
            return true;
    }
    return false;
}

const char* kind_name(Kind kind) {
    switch (kind) {
        case Kind::kUndefined:
            return "undefined";
        case Kind::kNone:
            return "none";
        case Kind::kBool:
            return "boolean";
        case Kind::kInt:
            return "integer";
        case Kind::kFloat:
            return "float";
        case Kind::kString:
            return "string";
        case Kind::kArray:
            return "list";
        case Kind::kObject:
            return "dict";
        case Kind::kNamespace:
            return "namespace";
        case Kind::kFunction:
            return "function";
    }
    return "?";
}

void append_display(std::string& out, const Value& value, size_t max_bytes) {
    switch (value.kind()) {
        case Kind::kUndefined:
        case Kind::kNone:
        case Kind::kFunction:
            return;
        case Kind::kBool:
            out += value.as_bool() ? "true" : "false";
            return;
        case Kind::kInt:
            out += std::to_string(value.as_int());
            return;
        case Kind::kFloat:
            out += float_display(value.as_float());
            return;
        case Kind::kString:
            out += value.str();
            return;
        case Kind::kArray:
        case Kind::kObject:
        case Kind::kNamespace: {
            JsonOptions options;
            options.undefined_as_null = false;
            options.max_bytes = max_bytes;
            out += to_json(value, options);
            return;
        }
    }
}

std::string to_display(const Value& value, size_t max_bytes) {
    if (value.is_string()) return value.str();
    std::string out;
    append_display(out, value, max_bytes);
    return out;
}

namespace {

// JavaScript ToNumber for strings, restricted to decimal literals (enough for `==`).
double js_string_to_number(const std::string& s) {
    std::string_view t = js_trim(s);
    if (t.empty()) return 0;
    if (t == "Infinity" || t == "+Infinity") return INFINITY;
    if (t == "-Infinity") return -INFINITY;
    size_t i = 0;
    if (t[i] == '+' || t[i] == '-') ++i;
    size_t digits = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
    if (i < t.size() && t[i] == '.') {
        ++i;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
    }
    if (digits == 0) return NAN;
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        ++i;
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
        size_t exp_digits = 0;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++exp_digits;
        if (exp_digits == 0) return NAN;
    }
    if (i != t.size()) return NAN;
    return std::strtod(std::string(t).c_str(), nullptr);
}

bool is_container(Kind k) {
    return k == Kind::kArray || k == Kind::kObject || k == Kind::kNamespace || k == Kind::kFunction;
}

double numeric(const Value& v) {
    return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.number();
}

}  // namespace

bool loose_equals(const Value& a, const Value& b) {
    Kind ka = a.kind(), kb = b.kind();
    bool a_nullish = ka == Kind::kUndefined || ka == Kind::kNone;
    bool b_nullish = kb == Kind::kUndefined || kb == Kind::kNone;
    if (a_nullish || b_nullish) return a_nullish && b_nullish;
    if (ka == Kind::kInt && kb == Kind::kInt) return a.as_int() == b.as_int();
    bool a_num = a.is_number() || a.is_bool();
    bool b_num = b.is_number() || b.is_bool();
    if (ka == Kind::kString && kb == Kind::kString) return a.str() == b.str();
    if (a_num && b_num) return numeric(a) == numeric(b);
    if (a_num && kb == Kind::kString) return numeric(a) == js_string_to_number(b.str());
    if (ka == Kind::kString && b_num) return js_string_to_number(a.str()) == numeric(b);
    if (is_container(ka) && is_container(kb)) return a.identity() == b.identity();
    return false;
}

bool strict_equals(const Value& a, const Value& b) {
    Kind ka = a.kind(), kb = b.kind();
    if (ka == Kind::kInt && kb == Kind::kInt) return a.as_int() == b.as_int();
    if (a.is_number() && b.is_number()) return a.number() == b.number();
    if (ka != kb) return false;
    switch (ka) {
        case Kind::kUndefined:
        case Kind::kNone:
            return true;
        case Kind::kBool:
            return a.as_bool() == b.as_bool();
        case Kind::kString:
            return a.str() == b.str();
        default:
            return a.identity() == b.identity();
    }
}

Value from_json(const nlohmann::ordered_json& json, int max_depth) {
    if (max_depth <= 0) throw JinjaError("input JSON nested too deeply");
    using T = nlohmann::ordered_json::value_t;
    switch (json.type()) {
        case T::null:
            return Value::none();
        case T::boolean:
            return Value::boolean(json.get<bool>());
        case T::number_integer:
            return Value::integer(json.get<int64_t>());
        case T::number_unsigned: {
            uint64_t u = json.get<uint64_t>();
            if (u <= static_cast<uint64_t>(INT64_MAX))
                return Value::integer(static_cast<int64_t>(u));
            return Value::floating(static_cast<double>(u));
        }
        case T::number_float: {
            // JavaScript has one number type: the reference sees 2.0 as the integer 2.
            double d = json.get<double>();
            if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) <= 9007199254740992.0) {
                return Value::integer(static_cast<int64_t>(d));
            }
            return Value::floating(d);
        }
        case T::string:
            return Value::string(json.get<std::string>());
        case T::array: {
            ValueList items;
            items.reserve(json.size());
            for (const auto& item : json) items.push_back(from_json(item, max_depth - 1));
            return Value::array(std::move(items));
        }
        case T::object: {
            ValueMap map;
            for (const auto& [key, item] : json.items())
                map.set(key, from_json(item, max_depth - 1));
            return Value::object(std::move(map));
        }
        default:
            return Value();
    }
}

}  // namespace tandem::jinja
