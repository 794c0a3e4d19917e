// Jinja interpreter: renders a parsed template against a scope of variables, within limits
// on work, nesting and output size so that a hostile template ends in an error, not a hang.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_value.h"

namespace tandem::jinja {

struct Limits {
    size_t max_output_bytes = 32u << 20;  // the rendered text, and any one string built on the way
    uint64_t max_steps = 20'000'000;  // evaluated nodes, loop iterations, items and bytes processed
    int max_depth = 400;              // nested evaluation, macro recursion included
    size_t max_items = 1u << 20;      // elements of any one list the template builds
};

// A level of variables: the globals, a for loop, a macro call. Shared ownership because
// callables (caller() of a call block) keep the scope they were made in.
class Scope {
  public:
    explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
    // The innermost variable called `name`, or nullptr.
    const Value* lookup(std::string_view name) const;
    // Sets `name` in this scope (Jinja's `set` never writes to an outer scope).
    void set(std::string_view name, Value value);

  private:
    std::shared_ptr<Scope> parent_;
    std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
  public:
    explicit Interpreter(const Limits& limits) : limits_(limits) {}
    // Empties the containers that may sit in reference cycles (see note_mutation).
    ~Interpreter();
    Interpreter(const Interpreter&) = delete;
    Interpreter& operator=(const Interpreter&) = delete;

    // Renders `program` with `globals` as the outermost scope. Throws JinjaError.
    std::string render(const std::vector<NodePtr>& program, const ScopePtr& globals);

    // Calls a function value (macro, builtin, bound method).
    Value call(const Value& fn, CallArgs& args, const ScopePtr& scope);
    // Runs a macro or call-block body with arguments bound to `params`.
    Value invoke_body(const std::string& name, const std::vector<Arg>& params,
                      const std::vector<NodePtr>& body, bool uses_varargs, bool uses_kwargs,
                      const ScopePtr& parent, CallArgs& args);

    // Budget checks used by the builtins.
    void charge(uint64_t steps);
    void charge_bytes(size_t bytes) { charge(1 + bytes / 16); }
    void check_size(size_t bytes) const;
    void check_items(size_t count) const;
    const Limits& limits() const { return limits_; }
    // Records that `container` (a namespace or list) now holds `item`. A template can build a
    // cycle that way (`set ns.me = ns`, `xs.append(xs)`); emptying such containers when the
    // render ends frees the cycle, which shared ownership alone would leak.
    void note_mutation(const Value& container, const Value& item);

  private:
    enum class Flow { kNormal, kBreak, kContinue };
    struct DepthGuard {
        explicit DepthGuard(Interpreter& in);
        ~DepthGuard() { --in.depth_; }
        Interpreter& in;
    };

    Flow exec_block(const std::vector<NodePtr>& body, const ScopePtr& scope, std::string& out);
    Flow exec(const Node& node, const ScopePtr& scope, std::string& out);
    Flow exec_for(const Node& node, const ScopePtr& scope, std::string& out);
    void exec_set(const Node& node, const ScopePtr& scope);
    void exec_call_block(const Node& node, const ScopePtr& scope, std::string& out);
    void append_output(std::string& out, const Value& value);
    std::string render_body(const std::vector<NodePtr>& body, const ScopePtr& scope);

    Value eval(const Node& node, const ScopePtr& scope);
    Value eval_inner(const Node& node, const ScopePtr& scope);
    Value eval_binary(const Node& node, const ScopePtr& scope);
    Value eval_attribute(const Node& node, const ScopePtr& scope);
    Value eval_index(const Node& node, const ScopePtr& scope);
    Value eval_slice(const Node& node, const ScopePtr& scope);
    CallArgs eval_args(const std::vector<Arg>& args, const ScopePtr& scope);
    void bind_targets(const Node& node, const Value& item, Scope& scope);

    Limits limits_;
    std::vector<Value> mutated_;
    std::unordered_set<const void*> mutated_ids_;
    uint64_t steps_ = 0;
    int depth_ = 0;
};

// Binary operators with the reference's semantics (exposed for the comparison tests/filters).
Value binary_op(Interpreter& in, BinaryOp op, const Value& a, const Value& b);
// Error text for using an undefined value.
std::string undefined_message(const Value& v);

}  // namespace tandem::jinja
