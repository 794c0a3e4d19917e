// Runtime values of the Jinja interpreter: undefined, none, bool, int, float, string, list,
// dict, namespace and callables, with reference semantics for containers as in Python.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem::jinja {

class Value;
class ValueMap;
struct CallArgs;
class Interpreter;
class Scope;

enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kArray,
    kObject,
    kNamespace,
    kFunction,
};

using ValueList = std::vector<Value>;

// A native function, a macro or a bound method. `scope` is the caller's scope: macros in
// @huggingface/jinja (the conformance reference) see the caller's variables.
struct Callable {
    std::string name;
    std::function<Value(Interpreter&, const std::shared_ptr<Scope>& scope, CallArgs& args)> fn;
};

// Value comes before the containers of it: clang's C++20 library checks need Value complete
// wherever std::pair<std::string, Value> is named.
class Value {
  public:
    Value() = default;  // undefined
    static Value undefined(std::string name);
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value floating(double f);
    static Value string(std::string s);
    static Value array();
    static Value array(ValueList items);
    static Value object();
    static Value object(ValueMap map);
    static Value name_space();
    static Value name_space(ValueMap map);
    static Value function(std::string name, decltype(Callable::fn) fn);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::kUndefined; }
    bool is_none() const { return kind_ == Kind::kNone; }
    bool is_bool() const { return kind_ == Kind::kBool; }
    bool is_int() const { return kind_ == Kind::kInt; }
    bool is_float() const { return kind_ == Kind::kFloat; }
    bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
    bool is_string() const { return kind_ == Kind::kString; }
    bool is_array() const { return kind_ == Kind::kArray; }
    bool is_object() const { return kind_ == Kind::kObject; }
    bool is_namespace() const { return kind_ == Kind::kNamespace; }
    bool is_mapping_like() const { return kind_ == Kind::kObject || kind_ == Kind::kNamespace; }
    bool is_function() const { return kind_ == Kind::kFunction; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return i_; }
    double as_float() const { return f_; }
    // Int or float as a double.
    double number() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : f_; }
    const std::string& str() const { return *static_cast<const std::string*>(p_.get()); }
    ValueList& list() const { return *static_cast<ValueList*>(p_.get()); }
    ValueMap& map() const { return *static_cast<ValueMap*>(p_.get()); }
    const Callable& callable() const { return *static_cast<const Callable*>(p_.get()); }
    // The variable name an undefined value came from ("" when unknown), for error messages.
    std::string undefined_name() const;
    // Identity of a container, for `==` and `in` (the reference compares containers by identity).
    const void* identity() const { return p_.get(); }

    // Python truthiness: empty containers and strings are false; namespaces are always true.
    bool truthy() const;

  private:
    Kind kind_ = Kind::kUndefined;
    union {
        bool b_;
        int64_t i_ = 0;
        double f_;
    };
    std::shared_ptr<void> p_;  // string, ValueList, ValueMap, Callable, or undefined's name
};

// An insertion-ordered dict (Python dicts and JS Maps keep insertion order, and tojson output
// depends on it). Small dicts are searched linearly; large ones (hostile input) get a hash index.
class ValueMap {
  public:
    ValueMap() = default;
    ValueMap(const ValueMap& other) : items_(other.items_) {}
    ValueMap(ValueMap&&) = default;
    ValueMap& operator=(const ValueMap& other) {
        items_ = other.items_;
        index_.reset();
        return *this;
    }
    ValueMap& operator=(ValueMap&&) = default;

    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    void set(std::string_view key, Value value);
    bool erase(std::string_view key);
    size_t size() const { return items_.size(); }
    bool empty() const { return items_.empty(); }
    const std::vector<std::pair<std::string, Value>>& items() const { return items_; }

  private:
    static constexpr size_t kIndexThreshold = 32;
    size_t position(std::string_view key) const;  // items_.size() when absent
    std::vector<std::pair<std::string, Value>> items_;
    std::unique_ptr<std::unordered_map<std::string, size_t>> index_;
};

// Arguments of one call: positional values, then keyword arguments in source order.
struct CallArgs {
    ValueList positional;
    std::vector<std::pair<std::string, Value>> keyword;

    // The keyword argument `name`, or nullptr.
    const Value* kwarg(std::string_view name) const;
    // Positional argument `index`, else keyword `name`, else nullptr (Python binding rules).
    const Value* get(size_t index, std::string_view name) const;
};


// Name of a kind for error messages ("string", "list", ...).
const char* kind_name(Kind kind);

// Text of a value as `{{ value }}` prints it (reference semantics: none and undefined print
// nothing, booleans print true/false, lists and dicts print as JSON).
std::string to_display(const Value& value, size_t max_bytes = SIZE_MAX);
// Appends to_display(value) to `out`; lists and dicts fail past `max_bytes` of JSON.
void append_display(std::string& out, const Value& value, size_t max_bytes = SIZE_MAX);

// Equality as the reference's `==` does it: numbers by value (true == 1), strings by value,
// none == undefined, containers by identity.
bool loose_equals(const Value& a, const Value& b);
// Strict equality used by `in` over lists and `unique`: like loose_equals but without
// bool/number mixing or none/undefined mixing.
bool strict_equals(const Value& a, const Value& b);

// Converts JSON (messages, tools, kwargs) to values. Integral floats become ints, as the
// reference does with JavaScript numbers. Fails past `max_depth` nesting.
Value from_json(const nlohmann::ordered_json& json, int max_depth = 256);

}  // namespace tandem::jinja
