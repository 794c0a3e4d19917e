// Builtin filters, tests, methods of strings/lists/dicts, and global functions of the Jinja
// interpreter (split over jinja_filters.cpp, jinja_tests.cpp and jinja_methods.cpp).
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "text/jinja_interpreter.h"
#include "text/jinja_value.h"

namespace tandem::jinja {

// `operand | name(args)`.
Value apply_filter(Interpreter& in, const std::string& name, const Value& operand, CallArgs& args,
                   const ScopePtr& scope);
// `operand is name(args)`.
bool apply_test(Interpreter& in, const std::string& name, const Value& operand,
                const CallArgs& args);
// `object.name` on a string, list or dict that has no such key: a bound method or a property
// such as `length`; undefined if there is none.
Value member_of(const Value& object, const std::string& name);

struct GlobalOptions {
    std::optional<std::time_t> now;  // fixed time for strftime_now (tests); else the clock
};
// Defines range, namespace, dict, raise_exception and strftime_now in `globals`.
void install_globals(Scope& globals, const GlobalOptions& options);

// Python-style attribute path lookup ("a.b.0") used by sort, map, selectattr, sum, ...
Value attribute_path(const Value& item, const std::string& path);
// Ordering used by sort/dictsort/min/max (the reference's compareRuntimeValues).
int compare_values(const Value& a, const Value& b, bool case_sensitive);
// `a` + `b` pieces for `~`: JavaScript toString of the value.
std::string concat_piece(const Value& v);

}  // namespace tandem::jinja
