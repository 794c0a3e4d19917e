// Methods of strings, lists and dicts (`s.strip()`, `d.items()`, ...) and the global functions
// of the Jinja interpreter (range, namespace, dict, raise_exception, strftime_now).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <string_view>

#include "text/jinja_builtins.h"
#include "text/jinja_error.h"
#include "text/jinja_json.h"
#include "text/jinja_unicode.h"

namespace tandem::jinja {
namespace {

constexpr std::string_view kStringMethods[] = {
    "upper",      "lower",    "strip",   "lstrip",  "rstrip",       "title",        "capitalize",
    "startswith", "endswith", "split",   "rsplit",  "replace",      "find",         "rfind",
    "index",      "count",    "join",    "format",  "splitlines",   "isdigit",      "isalpha",
    "isalnum",    "isspace",  "islower", "isupper", "removeprefix", "removesuffix",
};
constexpr std::string_view kListMethods[] = {"append", "pop", "insert", "extend", "index", "count"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "dictsort"};

template <size_t N>
bool has(const std::string_view (&names)[N], std::string_view name) {
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

const std::string& string_arg(const CallArgs& args, size_t i, const char* method) {
    if (i >= args.positional.size() || !args.positional[i].is_string()) {
        throw JinjaError(std::string(method) + "() needs a string argument");
    }
    return args.positional[i].str();
}

const Value* opt_arg(const CallArgs& args, size_t i, const char* name) {
    const Value* v = args.get(i, name);
    return v && !v->is_none() && !v->is_undefined() ? v : nullptr;
}

// Byte offset to code point index (Python reports str positions in code points).
int64_t cp_index(const std::string& s, size_t byte) {
    return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte)));
}

bool affix_matches(const std::string& s, const Value& pattern, bool prefix, const char* method) {
    auto one = [&](const std::string& p) {
        if (p.size() > s.size()) return false;
        return prefix ? s.compare(0, p.size(), p) == 0
                      : s.compare(s.size() - p.size(), p.size(), p) == 0;
    };
    if (pattern.is_string()) return one(pattern.str());
    if (pattern.is_array()) {
        for (const auto& p : pattern.list()) {
            if (!p.is_string())
                throw JinjaError(std::string(method) + "() tuple elements must be strings");
            if (one(p.str())) return true;
        }
        return false;
    }
    throw JinjaError(std::string(method) + "() argument must be a string or a tuple of strings");
}

Value split(Interpreter& in, const std::string& s, const CallArgs& args, bool from_right) {
    const Value* sep = opt_arg(args, 0, "sep");
    const Value* max_v = opt_arg(args, 1, "maxsplit");
    int64_t maxsplit = max_v ? (max_v->is_int() ? max_v->as_int()
                                                : throw JinjaError("maxsplit must be an integer"))
                             : -1;
    std::vector<std::string> parts;
    if (!sep) {
        // Runs of whitespace separate; no empty strings at the ends.
        std::vector<std::pair<size_t, size_t>> words;
        size_t i = 0;
        while (i < s.size()) {
            while (size_t n = js_space_at(s, i)) i += n;
            if (i >= s.size()) break;
            size_t start = i;
            while (i < s.size() && js_space_at(s, i) == 0) ++i;
            words.emplace_back(start, i);
        }
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit) {
            // The remainder keeps its inner and outer whitespace, as in Python.
            size_t keep = static_cast<size_t>(maxsplit);
            if (!from_right) {
                for (size_t k = 0; k < keep; ++k)
                    parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
                parts.push_back(s.substr(words[keep].first));
            } else {
                size_t first_kept = words.size() - keep;
                parts.push_back(s.substr(0, words[first_kept - 1].second));
                for (size_t k = first_kept; k < words.size(); ++k)
                    parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
            }
        } else {
            for (auto [a, b] : words) parts.push_back(s.substr(a, b - a));
        }
    } else {
        if (!sep->is_string()) throw JinjaError("split() separator must be a string");
        const std::string& d = sep->str();
        if (d.empty()) throw JinjaError("split(): empty separator");
        std::vector<std::string> all;
        size_t start = 0;
        while (true) {
            size_t pos = s.find(d, start);
            if (pos == std::string::npos) break;
            all.push_back(s.substr(start, pos - start));
            start = pos + d.size();
            in.check_items(all.size());
        }
        all.push_back(s.substr(start));
        if (maxsplit < 0 || static_cast<int64_t>(all.size()) <= maxsplit + 1) {
            parts = std::move(all);
        } else if (!from_right) {
            size_t keep = static_cast<size_t>(maxsplit);
            parts.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep));
            std::string rest;
            for (size_t k = keep; k < all.size(); ++k) rest += (k > keep ? d : "") + all[k];
            parts.push_back(std::move(rest));
        } else {
            size_t head_count = all.size() - static_cast<size_t>(maxsplit);
            std::string head;
            for (size_t k = 0; k < head_count; ++k) head += (k ? d : "") + all[k];
            parts.push_back(std::move(head));
            parts.insert(parts.end(), all.begin() + static_cast<std::ptrdiff_t>(head_count),
                         all.end());
        }
    }
    in.check_items(parts.size());
    in.charge(parts.size());
    ValueList out;
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
    return Value::array(std::move(out));
}

Value replace(Interpreter& in, const std::string& s, const CallArgs& args) {
    if (args.positional.size() < 2) throw JinjaError("replace() needs two arguments");
    const std::string& from = string_arg(args, 0, "replace");
    const std::string& to = string_arg(args, 1, "replace");
    const Value* count_v = opt_arg(args, 2, "count");
    int64_t count =
        count_v ? (count_v->is_int() ? count_v->as_int()
                                     : throw JinjaError("replace() count must be an integer"))
                : -1;
    std::string out;
    int64_t done = 0;
    if (from.empty()) {
        // An empty pattern matches before every code point and at the end.
        auto chars = utf8_chars(s);
        for (size_t i = 0; i <= chars.size(); ++i) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            if (i < chars.size()) out += chars[i];
            in.check_size(out.size());
        }
    } else {
        size_t start = 0;
        while (count < 0 || done < count) {
            size_t pos = s.find(from, start);
            if (pos == std::string::npos) break;
            out.append(s, start, pos - start);
            out += to;
            start = pos + from.size();
            ++done;
            in.check_size(out.size());
        }
        out.append(s, start, std::string::npos);
    }
    in.check_size(out.size());
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
}

// Python str.format with {}, {0} and {name} fields; format specs after ':' are ignored.
Value str_format(Interpreter& in, const std::string& fmt, const CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            ++i;
        } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
            out += '}';
            ++i;
        } else if (c == '{') {
            size_t close = fmt.find('}', i);
            if (close == std::string::npos) throw JinjaError("format(): unmatched '{'");
            std::string field = fmt.substr(i + 1, close - i - 1);
            field = field.substr(0, field.find(':'));
            const Value* v = nullptr;
            if (field.empty()) {
                if (auto_index >= args.positional.size())
                    throw JinjaError("format(): not enough arguments");
                v = &args.positional[auto_index++];
            } else if (std::all_of(field.begin(), field.end(),
                                   [](char d) { return d >= '0' && d <= '9'; })) {
                size_t k = std::stoul(field.substr(0, 6));
                if (k >= args.positional.size())
                    throw JinjaError("format(): argument index out of range");
                v = &args.positional[k];
            } else {
                v = args.kwarg(field);
                if (!v) throw JinjaError("format(): missing argument '" + field + "'");
            }
            out += to_display(*v, in.limits().max_output_bytes);
            in.check_size(out.size());
            i = close;
        } else {
            out += c;
        }
    }
    return Value::string(std::move(out));
}

template <typename Pred>
Value all_chars(const std::string& s, Pred pred) {
    if (s.empty()) return Value::boolean(false);
    for (char c : s) {
        if (!pred(c)) return Value::boolean(false);
    }
    return Value::boolean(true);
}

Value string_method(Interpreter& in, const std::string& s, const std::string& name,
                    CallArgs& args) {
    in.charge_bytes(s.size());
    if (name == "upper") return Value::string(ascii_upper(s));
    if (name == "lower") return Value::string(ascii_lower(s));
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        bool left = name != "rstrip", right = name != "lstrip";
        // With characters: Python's strip(chars). Without: whitespace, as the reference trims.
        if (const Value* chars = opt_arg(args, 0, "chars")) {
            if (!chars->is_string()) throw JinjaError(name + "() argument must be a string");
            return Value::string(std::string(strip_chars(s, chars->str(), left, right)));
        }
        return Value::string(std::string(js_trim(s, left, right)));
    }
    if (name == "title" || name == "capitalize") {
        CallArgs none;
        return apply_filter(in, name, Value::string(s), none, nullptr);
    }
    if (name == "startswith" || name == "endswith") {
        if (args.positional.empty()) throw JinjaError(name + "() needs an argument");
        return Value::boolean(
            affix_matches(s, args.positional[0], name == "startswith", name.c_str()));
    }
    if (name == "split" || name == "rsplit") return split(in, s, args, name == "rsplit");
    if (name == "replace") return replace(in, s, args);
    if (name == "find" || name == "rfind" || name == "index") {
        const std::string& sub = string_arg(args, 0, name.c_str());
        size_t pos = name == "rfind" ? s.rfind(sub) : s.find(sub);
        if (pos == std::string::npos) {
            if (name == "index") throw JinjaError("index(): substring not found");
            return Value::integer(-1);
        }
        return Value::integer(cp_index(s, pos));
    }
    if (name == "count") {
        const std::string& sub = string_arg(args, 0, "count");
        if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
        int64_t n = 0;
        for (size_t pos = s.find(sub); pos != std::string::npos;
             pos = s.find(sub, pos + sub.size()))
            ++n;
        return Value::integer(n);
    }
    if (name == "join") {
        if (args.positional.empty() || !args.positional[0].is_array())
            throw JinjaError("join() needs a list");
        std::string out;
        const ValueList& items = args.positional[0].list();
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += s;
            out += concat_piece(items[i]);
            in.check_size(out.size());
        }
        in.charge(items.size());
        return Value::string(std::move(out));
    }
    if (name == "format") return str_format(in, s, args);
    if (name == "splitlines") {
        ValueList out;
        size_t start = 0;
        while (start < s.size()) {
            size_t end = s.find_first_of("\r\n", start);
            if (end == std::string::npos) {
                out.push_back(Value::string(s.substr(start)));
                break;
            }
            out.push_back(Value::string(s.substr(start, end - start)));
            start = end + (s.compare(end, 2, "\r\n") == 0 ? 2 : 1);
        }
        in.check_items(out.size());
        return Value::array(std::move(out));
    }
    if (name == "isdigit") return all_chars(s, [](char c) { return c >= '0' && c <= '9'; });
    if (name == "isalpha")
        return all_chars(s, [](char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; });
    if (name == "isalnum") return all_chars(s, [](char c) { return is_word_char(c) && c != '_'; });
    if (name == "isspace")
        return all_chars(s, [](char c) { return c == ' ' || (c >= 9 && c <= 13); });
    if (name == "islower" || name == "isupper") {
        bool lower = name == "islower", cased = false;
        for (char c : s) {
            if (c >= 'a' && c <= 'z') {
                if (!lower) return Value::boolean(false);
                cased = true;
            } else if (c >= 'A' && c <= 'Z') {
                if (lower) return Value::boolean(false);
                cased = true;
            }
        }
        return Value::boolean(cased);
    }
    if (name == "removeprefix" || name == "removesuffix") {
        const std::string& affix = string_arg(args, 0, name.c_str());
        bool prefix = name == "removeprefix";
        if (affix_matches(s, Value::string(affix), prefix, name.c_str())) {
            return Value::string(prefix ? s.substr(affix.size())
                                        : s.substr(0, s.size() - affix.size()));
        }
        return Value::string(s);
    }
    throw JinjaError("string has no method '" + name + "'");
}

Value list_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
    ValueList& list = self.list();
    in.charge(list.size());
    if (name == "append") {
        if (args.positional.size() != 1) throw JinjaError("append() takes one argument");
        in.check_items(list.size() + 1);
        in.note_mutation(self, args.positional[0]);
        list.push_back(args.positional[0]);
        return Value::none();
    }
    if (name == "extend") {
        if (args.positional.size() != 1 || !args.positional[0].is_array())
            throw JinjaError("extend() needs a list");
        ValueList extra = args.positional[0].list();
        in.check_items(list.size() + extra.size());
        for (const auto& item : extra) in.note_mutation(self, item);
        list.insert(list.end(), extra.begin(), extra.end());
        return Value::none();
    }
    if (name == "pop") {
        if (list.empty()) throw JinjaError("pop from empty list");
        int64_t i = args.positional.empty()
                        ? -1
                        : (args.positional[0].is_int()
                               ? args.positional[0].as_int()
                               : throw JinjaError("pop() index must be an integer"));
        if (i < 0) i += static_cast<int64_t>(list.size());
        if (i < 0 || i >= static_cast<int64_t>(list.size()))
            throw JinjaError("pop index out of range");
        Value v = list[static_cast<size_t>(i)];
        list.erase(list.begin() + i);
        return v;
    }
    if (name == "insert") {
        if (args.positional.size() != 2 || !args.positional[0].is_int())
            throw JinjaError("insert() takes an index and a value");
        in.check_items(list.size() + 1);
        int64_t n = static_cast<int64_t>(list.size());
        int64_t i = args.positional[0].as_int();
        if (i < 0) i = std::max<int64_t>(i + n, 0);
        i = std::min(i, n);
        in.note_mutation(self, args.positional[1]);
        list.insert(list.begin() + i, args.positional[1]);
        return Value::none();
    }
    if (name == "index" || name == "count") {
        if (args.positional.empty()) throw JinjaError(name + "() needs an argument");
        int64_t count = 0;
        for (size_t i = 0; i < list.size(); ++i) {
            if (strict_equals(list[i], args.positional[0])) {
                if (name == "index") return Value::integer(static_cast<int64_t>(i));
                ++count;
            }
        }
        if (name == "index") throw JinjaError("index(): value not in list");
        return Value::integer(count);
    }
    throw JinjaError("list has no method '" + name + "'");
}

Value dict_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
    const ValueMap& map = self.map();
    in.charge(map.size());
    if (name == "get") {
        if (args.positional.empty() || !args.positional[0].is_string())
            throw JinjaError("get() needs a string key");
        if (const Value* v = map.find(args.positional[0].str())) return *v;
        return args.positional.size() > 1 ? args.positional[1] : Value::none();
    }
    if (name == "items" || name == "keys" || name == "values") {
        ValueList out;
        for (const auto& [k, v] : map.items()) {
            if (name == "items") {
                out.push_back(Value::array({Value::string(k), v}));
            } else {
                out.push_back(name == "keys" ? Value::string(k) : v);
            }
        }
        return Value::array(std::move(out));
    }
    if (name == "dictsort") {
        bool case_sensitive = false, reverse = false;
        std::string by = "key";
        if (const Value* v = args.get(0, "case_sensitive")) case_sensitive = v->truthy();
        if (const Value* v = args.get(1, "by")) by = v->is_string() ? v->str() : "";
        if (const Value* v = args.get(2, "reverse")) reverse = v->truthy();
        if (by != "key" && by != "value") throw JinjaError("dictsort: by must be 'key' or 'value'");
        std::vector<std::pair<std::string, Value>> items = map.items();
        std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
            int c = by == "key" ? compare_values(Value::string(a.first), Value::string(b.first),
                                                 case_sensitive)
                                : compare_values(a.second, b.second, case_sensitive);
            return reverse ? c > 0 : c < 0;
        });
        ValueList out;
        for (auto& [k, v] : items) out.push_back(Value::array({Value::string(k), v}));
        return Value::array(std::move(out));
    }
    throw JinjaError("dict has no method '" + name + "'");
}

Value make_namespace(const CallArgs& args) {
    if (args.positional.size() > 1)
        throw JinjaError("namespace() takes at most one positional argument");
    ValueMap entries;
    if (!args.positional.empty()) {
        const Value& source = args.positional[0];
        if (source.is_object()) {
            for (const auto& [k, v] : source.map().items()) entries.set(k, v);
        } else if (source.is_array()) {
            for (const auto& pair : source.list()) {
                if (!pair.is_array() || pair.list().size() != 2 || !pair.list()[0].is_string()) {
                    throw JinjaError("namespace() expects a dict or a list of (key, value) pairs");
                }
                entries.set(pair.list()[0].str(), pair.list()[1]);
            }
        } else {
            throw JinjaError(std::string("namespace() cannot take a ") + kind_name(source.kind()));
        }
    }
    for (const auto& [k, v] : args.keyword) entries.set(k, v);
    return Value::name_space(std::move(entries));
}

Value make_range(Interpreter& in, const CallArgs& args) {
    std::vector<int64_t> n;
    for (const auto& a : args.positional) {
        if (!a.is_int()) throw JinjaError("range() arguments must be integers");
        n.push_back(a.as_int());
    }
    if (n.empty() || n.size() > 3) throw JinjaError("range() takes 1 to 3 arguments");
    int64_t start = n.size() == 1 ? 0 : n[0];
    int64_t stop = n.size() == 1 ? n[0] : n[1];
    int64_t step = n.size() == 3 ? n[2] : 1;
    if (step == 0) throw JinjaError("range() step must not be zero");
    // Count first (in floating point: no overflow), so a huge range fails before allocating.
    double count =
        std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                                static_cast<double>(step)));
    in.check_items(static_cast<size_t>(std::min(count, 1e18)));
    in.charge(static_cast<uint64_t>(count));
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        out.push_back(Value::integer(i));
    return Value::array(std::move(out));
}

}  // namespace

Value member_of(const Value& object, const std::string& name) {
    if (object.is_string()) {
        if (name == "length")
            return Value::integer(static_cast<int64_t>(utf8_length(object.str())));
        if (!has(kStringMethods, name)) return Value::undefined(name);
    } else if (object.is_array()) {
        if (name == "length") return Value::integer(static_cast<int64_t>(object.list().size()));
        if (!has(kListMethods, name)) return Value::undefined(name);
    } else if (object.is_object()) {
        if (!has(kDictMethods, name)) return Value::undefined(name);
    } else {
        return Value::undefined(name);
    }
    Value self = object;
    return Value::function(name, [self, name](Interpreter& in, const ScopePtr&, CallArgs& args) {
        if (self.is_string()) return string_method(in, self.str(), name, args);
        if (self.is_array()) return list_method(in, self, name, args);
        return dict_method(in, self, name, args);
    });
}

void install_globals(Scope& globals, const GlobalOptions& options) {
    globals.set("range",
                Value::function("range", [](Interpreter& in, const ScopePtr&, CallArgs& args) {
                    return make_range(in, args);
                }));
    globals.set("namespace",
                Value::function("namespace", [](Interpreter&, const ScopePtr&, CallArgs& args) {
                    return make_namespace(args);
                }));
    globals.set("dict", Value::function("dict", [](Interpreter&, const ScopePtr&, CallArgs& args) {
                    ValueMap map;
                    for (const auto& [k, v] : args.keyword) map.set(k, v);
                    return Value::object(std::move(map));
                }));
    globals.set("raise_exception",
                Value::function("raise_exception",
                                [](Interpreter&, const ScopePtr&, CallArgs& args) -> Value {
                                    JinjaError error(args.positional.empty()
                                                         ? std::string("raise_exception() called")
                                                         : to_display(args.positional[0], 4096));
                                    error.raised = true;
                                    throw error;
                                }));
    std::optional<std::time_t> now = options.now;
    globals.set(
        "strftime_now",
        Value::function("strftime_now", [now](Interpreter&, const ScopePtr&, CallArgs& args) {
            if (args.positional.empty() || !args.positional[0].is_string()) {
                throw JinjaError("strftime_now() needs a format string");
            }
            const std::string& fmt = args.positional[0].str();
            if (fmt.size() > 256) throw JinjaError("strftime_now(): format too long");
            std::time_t t = now ? *now : std::time(nullptr);
            std::tm tm{};
            localtime_r(&t, &tm);
            std::string buf(fmt.size() * 16 + 64, '\0');
            // strftime in the "C" locale gives English month and day names, as Python does.
            size_t n = fmt.empty() ? 0 : std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
            buf.resize(n);
            return Value::string(std::move(buf));
        }));
}

}  // namespace tandem::jinja
