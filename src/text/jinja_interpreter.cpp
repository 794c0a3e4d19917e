// Jinja interpreter: statements, expressions, scopes and limits.
#include "text/jinja_interpreter.h"

#include <cmath>

#include "text/jinja_builtins.h"
#include "text/jinja_error.h"
#include "text/jinja_json.h"
#include "text/jinja_unicode.h"

namespace tandem::jinja {

const Value* Scope::lookup(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
        for (const auto& [k, v] : s->vars_) {
            if (k == name) return &v;
        }
    }
    return nullptr;
}

void Scope::set(std::string_view name, Value value) {
    for (auto& [k, v] : vars_) {
        if (k == name) {
            v = std::move(value);
            return;
        }
    }
    vars_.emplace_back(std::string(name), std::move(value));
}

std::string undefined_message(const Value& v) {
    std::string name = v.undefined_name();
    return name.empty() ? "value is undefined" : "'" + name + "' is undefined";
}

Interpreter::DepthGuard::DepthGuard(Interpreter& in) : in(in) {
    if (++in.depth_ > in.limits_.max_depth) {
        --in.depth_;
        throw JinjaError("template recursion too deep (limit " +
                         std::to_string(in.limits_.max_depth) + ")");
    }
}

Interpreter::~Interpreter() {
    for (Value& v : mutated_) {
        if (v.is_array()) {
            ValueList().swap(v.list());
        } else if (v.is_mapping_like()) {
            v.map() = ValueMap();
        }
    }
}

void Interpreter::note_mutation(const Value& container, const Value& item) {
    if (!(item.is_array() || item.is_mapping_like() || item.is_function())) return;
    if (mutated_ids_.insert(container.identity()).second) mutated_.push_back(container);
}

void Interpreter::charge(uint64_t steps) {
    steps_ += steps;
    if (steps_ > limits_.max_steps) {
        throw JinjaError("template exceeded its work limit (" + std::to_string(limits_.max_steps) +
                         " steps): endless loop?");
    }
}

void Interpreter::check_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes) {
        throw JinjaError("template output exceeds " + std::to_string(limits_.max_output_bytes) +
                         " bytes");
    }
}

void Interpreter::check_items(size_t count) const {
    if (count > limits_.max_items) {
        throw JinjaError("list exceeds " + std::to_string(limits_.max_items) + " items");
    }
}

std::string Interpreter::render(const std::vector<NodePtr>& program, const ScopePtr& globals) {
    std::string out;
    exec_block(program, globals, out);
    return out;
}

Interpreter::Flow Interpreter::exec_block(const std::vector<NodePtr>& body, const ScopePtr& scope,
                                          std::string& out) {
    for (const auto& node : body) {
        Flow flow = exec(*node, scope, out);
        if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
}

std::string Interpreter::render_body(const std::vector<NodePtr>& body, const ScopePtr& scope) {
    std::string out;
    exec_block(body, scope, out);
    return out;
}

void Interpreter::append_output(std::string& out, const Value& value) {
    size_t before = out.size();
    append_display(out, value, limits_.max_output_bytes);
    check_size(out.size());
    charge_bytes(out.size() - before);
}

Interpreter::Flow Interpreter::exec(const Node& node, const ScopePtr& scope, std::string& out) {
    DepthGuard guard(*this);
    charge(1);
    try {
        switch (node.kind) {
            case NodeKind::kText:
                out += node.text;
                check_size(out.size());
                return Flow::kNormal;
            case NodeKind::kComment:
            case NodeKind::kMacro:
                if (node.kind == NodeKind::kMacro) {
                    const Node* macro = &node;
                    scope->set(node.text, Value::function(node.text, [macro](Interpreter& in,
                                                                             const ScopePtr& caller,
                                                                             CallArgs& args) {
                                   return in.invoke_body(macro->text, macro->args, macro->body,
                                                         macro->uses_varargs, macro->uses_kwargs,
                                                         caller, args);
                               }));
                }
                return Flow::kNormal;
            case NodeKind::kIf: {
                bool cond = eval(*node.kids[0], scope).truthy();
                return exec_block(cond ? node.body : node.else_body, scope, out);
            }
            case NodeKind::kFor:
                return exec_for(node, scope, out);
            case NodeKind::kSet:
                exec_set(node, scope);
                return Flow::kNormal;
            case NodeKind::kCallBlock:
                exec_call_block(node, scope, out);
                return Flow::kNormal;
            case NodeKind::kFilterBlock: {
                Value body = Value::string(render_body(node.body, scope));
                const Node& filter = *node.kids[0];
                CallArgs args = eval_args(filter.args, scope);
                append_output(out, apply_filter(*this, filter.text, body, args, scope));
                return Flow::kNormal;
            }
            case NodeKind::kBreak:
                return Flow::kBreak;
            case NodeKind::kContinue:
                return Flow::kContinue;
            default:
                append_output(out, eval(node, scope));
                return Flow::kNormal;
        }
    } catch (JinjaError& e) {
        if (e.pos == kNoPos) e.pos = node.pos;
        throw;
    }
}

void Interpreter::bind_targets(const Node& node, const Value& item, Scope& scope) {
    if (!node.tuple_target) {
        scope.set(node.names[0], item);
        return;
    }
    if (!item.is_array()) {
        throw JinjaError(std::string("cannot unpack ") + kind_name(item.kind()) + " into " +
                         std::to_string(node.names.size()) + " names");
    }
    const ValueList& parts = item.list();
    if (parts.size() != node.names.size()) {
        throw JinjaError(std::string("too ") + (parts.size() < node.names.size() ? "few" : "many") +
                         " values to unpack (expected " + std::to_string(node.names.size()) +
                         ", got " + std::to_string(parts.size()) + ")");
    }
    for (size_t i = 0; i < parts.size(); ++i) scope.set(node.names[i], parts[i]);
}

Interpreter::Flow Interpreter::exec_for(const Node& node, const ScopePtr& scope, std::string& out) {
    auto loop_scope = std::make_shared<Scope>(scope);
    Value iterable = eval(*node.kids[0], loop_scope);
    ValueList items;
    switch (iterable.kind()) {
        case Kind::kArray:
            items = iterable.list();  // a copy: the body may append to the list
            break;
        case Kind::kObject:
            for (const auto& [k, v] : iterable.map().items()) items.push_back(Value::string(k));
            break;
        case Kind::kString:
            for (auto ch : utf8_chars(iterable.str()))
                items.push_back(Value::string(std::string(ch)));
            break;
        case Kind::kUndefined:
            break;  // Jinja iterates an undefined value as empty
        default:
            throw JinjaError(std::string("cannot iterate over ") + kind_name(iterable.kind()));
    }
    charge(items.size());
    if (node.kids[1]) {  // for x in xs if cond
        ValueList kept;
        for (auto& item : items) {
            auto test_scope = std::make_shared<Scope>(loop_scope);
            bind_targets(node, item, *test_scope);
            if (eval(*node.kids[1], test_scope).truthy()) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
        charge(1);
        ValueMap loop;
        loop.set("index", Value::integer(i + 1));
        loop.set("index0", Value::integer(i));
        loop.set("revindex", Value::integer(n - i));
        loop.set("revindex0", Value::integer(n - i - 1));
        loop.set("first", Value::boolean(i == 0));
        loop.set("last", Value::boolean(i == n - 1));
        loop.set("length", Value::integer(n));
        loop.set("previtem",
                 i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("previtem"));
        loop.set("nextitem",
                 i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("nextitem"));
        loop_scope->set("loop", Value::object(std::move(loop)));
        bind_targets(node, items[static_cast<size_t>(i)], *loop_scope);
        if (exec_block(node.body, loop_scope, out) == Flow::kBreak) break;
    }
    if (n == 0) exec_block(node.else_body, loop_scope, out);
    return Flow::kNormal;
}

void Interpreter::exec_set(const Node& node, const ScopePtr& scope) {
    Value value =
        node.kids[0] ? eval(*node.kids[0], scope) : Value::string(render_body(node.body, scope));
    if (!node.names.empty()) {
        bind_targets(node, value, *scope);
        return;
    }
    Value target = eval(*node.kids[1], scope);
    if (!target.is_namespace()) {
        throw JinjaError("cannot assign attribute '" + node.text + "' on a " +
                         kind_name(target.kind()) + " (only on a namespace)");
    }
    note_mutation(target, value);
    target.map().set(node.text, std::move(value));
}

void Interpreter::exec_call_block(const Node& node, const ScopePtr& scope, std::string& out) {
    const Node* block = &node;
    ScopePtr definition = scope;
    Value caller = Value::function(
        "caller", [block, definition](Interpreter& in, const ScopePtr&, CallArgs& args) {
            return in.invoke_body("caller", block->args, block->body, block->uses_varargs,
                                  block->uses_kwargs, definition, args);
        });
    const Node& call = *node.kids[0];
    CallArgs args = eval_args(call.args, scope);
    Value fn = eval(*call.kids[0], scope);
    auto call_scope = std::make_shared<Scope>(scope);
    call_scope->set("caller", std::move(caller));
    append_output(out, this->call(fn, args, call_scope));
}

Value Interpreter::call(const Value& fn, CallArgs& args, const ScopePtr& scope) {
    if (!fn.is_function()) {
        if (fn.is_undefined()) throw JinjaError(undefined_message(fn));
        throw JinjaError(std::string("cannot call a ") + kind_name(fn.kind()));
    }
    return fn.callable().fn(*this, scope, args);
}

Value Interpreter::invoke_body(const std::string& name, const std::vector<Arg>& params,
                               const std::vector<NodePtr>& body, bool uses_varargs,
                               bool uses_kwargs, const ScopePtr& parent, CallArgs& args) {
    DepthGuard guard(*this);
    auto scope = std::make_shared<Scope>(parent);
    auto keyword = args.keyword;
    std::vector<const Arg*> pending_defaults;
    for (size_t i = 0; i < params.size(); ++i) {
        const Arg& p = params[i];
        Value value;
        bool bound = false;
        if (i < args.positional.size()) {
            value = args.positional[i];
            bound = true;
        } else {
            for (auto it = keyword.begin(); it != keyword.end(); ++it) {
                if (it->first == p.name) {
                    value = std::move(it->second);
                    keyword.erase(it);
                    bound = true;
                    break;
                }
            }
        }
        if (!bound && p.value) pending_defaults.push_back(&p);
        scope->set(p.name, bound ? std::move(value) : Value::undefined(p.name));
    }
    if (uses_kwargs) {
        ValueMap rest;
        for (auto& [k, v] : keyword) rest.set(k, v);
        scope->set("kwargs", Value::object(std::move(rest)));
    } else if (!keyword.empty()) {
        throw JinjaError("macro '" + name + "' takes no keyword argument '" +
                         keyword.front().first + "'");
    }
    if (uses_varargs) {
        ValueList rest;
        for (size_t i = params.size(); i < args.positional.size(); ++i)
            rest.push_back(args.positional[i]);
        scope->set("varargs", Value::array(std::move(rest)));
    } else if (args.positional.size() > params.size()) {
        throw JinjaError("macro '" + name + "' takes at most " + std::to_string(params.size()) +
                         " argument(s)");
    }
    for (const Arg* p : pending_defaults) scope->set(p->name, eval(*p->value, scope));
    return Value::string(render_body(body, scope));
}

CallArgs Interpreter::eval_args(const std::vector<Arg>& args, const ScopePtr& scope) {
    CallArgs out;
    for (const Arg& a : args) {
        if (a.kind == ArgKind::kPositional) {
            out.positional.push_back(eval(*a.value, scope));
        } else if (a.kind == ArgKind::kSpread) {
            Value v = eval(*a.value, scope);
            if (!v.is_array())
                throw JinjaError(std::string("cannot unpack a ") + kind_name(v.kind()) +
                                 " with '*'");
            for (const auto& item : v.list()) out.positional.push_back(item);
        }
    }
    auto add = [&](const std::string& key, Value v) {
        if (out.kwarg(key))
            throw JinjaError("got multiple values for keyword argument '" + key + "'");
        out.keyword.push_back({key, std::move(v)});
    };
    for (const Arg& a : args) {
        if (a.kind == ArgKind::kKeyword) {
            add(a.name, eval(*a.value, scope));
        } else if (a.kind == ArgKind::kKeywordSpread) {
            Value v = eval(*a.value, scope);
            if (!v.is_object())
                throw JinjaError(std::string("argument after ** must be a dict, not ") +
                                 kind_name(v.kind()));
            for (const auto& [k, item] : v.map().items()) add(k, item);
        }
    }
    return out;
}

Value Interpreter::eval(const Node& node, const ScopePtr& scope) {
    DepthGuard guard(*this);
    charge(1);
    try {
        return eval_inner(node, scope);
    } catch (JinjaError& e) {
        if (e.pos == kNoPos) e.pos = node.pos;
        throw;
    }
}

Value Interpreter::eval_inner(const Node& node, const ScopePtr& scope) {
    switch (node.kind) {
        case NodeKind::kLiteral:
            return node.literal;
        case NodeKind::kName: {
            const Value* v = scope->lookup(node.text);
            return v ? *v : Value::undefined(node.text);
        }
        case NodeKind::kList:
        case NodeKind::kTuple: {
            ValueList items;
            items.reserve(node.kids.size());
            for (const auto& k : node.kids) items.push_back(eval(*k, scope));
            return Value::array(std::move(items));
        }
        case NodeKind::kDict: {
            ValueMap map;
            for (size_t i = 0; i + 1 < node.kids.size(); i += 2) {
                Value key = eval(*node.kids[i], scope);
                if (!key.is_string()) {
                    throw JinjaError(std::string("dict keys must be strings, not ") +
                                     kind_name(key.kind()));
                }
                map.set(key.str(), eval(*node.kids[i + 1], scope));
            }
            return Value::object(std::move(map));
        }
        case NodeKind::kAttribute:
            return eval_attribute(node, scope);
        case NodeKind::kIndex:
            return eval_index(node, scope);
        case NodeKind::kSlice:
            return eval_slice(node, scope);
        case NodeKind::kCall: {
            Value fn = eval(*node.kids[0], scope);
            CallArgs args = eval_args(node.args, scope);
            return call(fn, args, scope);
        }
        case NodeKind::kFilter: {
            Value operand = eval(*node.kids[0], scope);
            CallArgs args = eval_args(node.args, scope);
            return apply_filter(*this, node.text, operand, args, scope);
        }
        case NodeKind::kTest: {
            Value operand = eval(*node.kids[0], scope);
            CallArgs args = eval_args(node.args, scope);
            return Value::boolean(apply_test(*this, node.text, operand, args) != node.negate);
        }
        case NodeKind::kUnary: {
            Value v = eval(*node.kids[0], scope);
            if (node.unary_op == 'n') return Value::boolean(!v.truthy());
            int64_t sign = node.unary_op == '-' ? -1 : 1;
            if (v.is_float()) return Value::floating(static_cast<double>(sign) * v.as_float());
            if (v.is_int()) {
                if (v.as_int() == INT64_MIN && sign < 0) throw JinjaError("integer overflow");
                return Value::integer(sign * v.as_int());
            }
            if (v.is_bool()) return Value::integer(sign * (v.as_bool() ? 1 : 0));
            if (v.is_undefined()) throw JinjaError(undefined_message(v));
            throw JinjaError(std::string("bad operand for unary '") + node.unary_op +
                             "': " + kind_name(v.kind()));
        }
        case NodeKind::kBinary:
            return eval_binary(node, scope);
        case NodeKind::kAnd: {
            Value left = eval(*node.kids[0], scope);
            return left.truthy() ? eval(*node.kids[1], scope) : left;
        }
        case NodeKind::kOr: {
            Value left = eval(*node.kids[0], scope);
            return left.truthy() ? left : eval(*node.kids[1], scope);
        }
        case NodeKind::kTernary:
            return eval(*node.kids[0], scope).truthy() ? eval(*node.kids[1], scope)
                                                       : eval(*node.kids[2], scope);
        case NodeKind::kSelect:
            return eval(*node.kids[1], scope).truthy() ? eval(*node.kids[0], scope)
                                                       : Value::undefined("");
        default:
            throw JinjaError("statement used as an expression");
    }
}

Value Interpreter::eval_attribute(const Node& node, const ScopePtr& scope) {
    Value object = eval(*node.kids[0], scope);
    if (object.is_mapping_like()) {
        if (const Value* v = object.map().find(node.text)) return *v;
        if (object.is_object()) return member_of(object, node.text);
        return Value::undefined(node.text);
    }
    if (object.is_undefined()) throw JinjaError(undefined_message(object));
    if (object.is_string() || object.is_array()) return member_of(object, node.text);
    return Value::undefined(node.text);
}

namespace {

// Python indexing with negative indices; returns false when out of range.
bool normalize_index(int64_t index, size_t size, size_t* out) {
    int64_t n = static_cast<int64_t>(size);
    if (index < 0) index += n;
    if (index < 0 || index >= n) return false;
    *out = static_cast<size_t>(index);
    return true;
}

}  // namespace

Value Interpreter::eval_index(const Node& node, const ScopePtr& scope) {
    Value object = eval(*node.kids[0], scope);
    Value key = eval(*node.kids[1], scope);
    if (object.is_undefined()) throw JinjaError(undefined_message(object));
    if (object.is_mapping_like()) {
        if (!key.is_string()) return Value::undefined("");
        if (const Value* v = object.map().find(key.str())) return *v;
        if (object.is_object()) return member_of(object, key.str());
        return Value::undefined(key.str());
    }
    if (object.is_array() || object.is_string()) {
        if (key.is_int()) {
            size_t i = 0;
            if (object.is_array()) {
                if (!normalize_index(key.as_int(), object.list().size(), &i))
                    return Value::undefined("");
                return object.list()[i];
            }
            if (object.str().size() < 256 && utf8_length(object.str()) == object.str().size()) {
                // ASCII fast path.
                if (!normalize_index(key.as_int(), object.str().size(), &i))
                    return Value::undefined("");
                return Value::string(object.str().substr(i, 1));
            }
            charge_bytes(object.str().size());
            auto chars = utf8_chars(object.str());
            if (!normalize_index(key.as_int(), chars.size(), &i)) return Value::undefined("");
            return Value::string(std::string(chars[i]));
        }
        if (key.is_string()) return member_of(object, key.str());
        throw JinjaError(std::string("list indices must be integers, not ") +
                         kind_name(key.kind()));
    }
    return Value::undefined("");
}

namespace {

// Python slice semantics (the reference's `slice` helper).
std::vector<size_t> slice_indices(size_t size, const Value& start_v, const Value& stop_v,
                                  const Value& step_v) {
    auto get = [](const Value& v, const char* what, int64_t fallback, bool* given) -> int64_t {
        *given = false;
        if (v.is_undefined() || v.is_none()) return fallback;
        if (!v.is_int()) throw JinjaError(std::string("slice ") + what + " must be an integer");
        *given = true;
        return v.as_int();
    };
    bool given = false;
    int64_t step = get(step_v, "step", 1, &given);
    if (step == 0) throw JinjaError("slice step cannot be zero");
    const int64_t n = static_cast<int64_t>(size);
    int64_t start, stop;
    if (step > 0) {
        start = get(start_v, "start", 0, &given);
        start = start < 0 ? std::max<int64_t>(n + start, 0) : std::min(start, n);
        stop = get(stop_v, "stop", n, &given);
        stop = stop < 0 ? std::max<int64_t>(n + stop, 0) : std::min(stop, n);
    } else {
        start = get(start_v, "start", n - 1, &given);
        start = start < 0 ? std::max<int64_t>(n + start, -1) : std::min(start, n - 1);
        stop = get(stop_v, "stop", -1, &given);
        if (given) stop = stop < 0 ? std::max<int64_t>(n + stop, -1) : std::min(stop, n - 1);
    }
    std::vector<size_t> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        out.push_back(static_cast<size_t>(i));
    return out;
}

}  // namespace

Value Interpreter::eval_slice(const Node& node, const ScopePtr& scope) {
    Value object = eval(*node.kids[0], scope);
    Value parts[3];
    for (int i = 0; i < 3; ++i) {
        if (node.kids[static_cast<size_t>(i) + 1])
            parts[i] = eval(*node.kids[static_cast<size_t>(i) + 1], scope);
    }
    if (object.is_array()) {
        const ValueList& list = object.list();
        charge(list.size());
        ValueList out;
        for (size_t i : slice_indices(list.size(), parts[0], parts[1], parts[2]))
            out.push_back(list[i]);
        return Value::array(std::move(out));
    }
    if (object.is_string()) {
        charge_bytes(object.str().size());
        auto chars = utf8_chars(object.str());
        std::string out;
        for (size_t i : slice_indices(chars.size(), parts[0], parts[1], parts[2])) out += chars[i];
        return Value::string(std::move(out));
    }
    if (object.is_undefined()) throw JinjaError(undefined_message(object));
    throw JinjaError(std::string("cannot slice a ") + kind_name(object.kind()));
}

Value Interpreter::eval_binary(const Node& node, const ScopePtr& scope) {
    Value a = eval(*node.kids[0], scope);
    Value b = eval(*node.kids[1], scope);
    return binary_op(*this, node.op, a, b);
}

}  // namespace tandem::jinja
