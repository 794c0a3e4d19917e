// JSON Schema to GBNF.
#include "text/json_schema_grammar.h"

#include <algorithm>
#include <vector>

#include "base/error.h"

namespace tandem {
namespace {

using ojson = nlohmann::ordered_json;

struct Primitive {
    const char* name;
    const char* body;
    std::vector<const char*> uses;
};

// JSON's lexical rules, as llama.cpp's json-schema-to-grammar writes them: whitespace after
// every value (bounded, so a model cannot pad forever), numbers of bounded length (exponents
// of two digits at most: 1e400 is valid JSON that parsers turn into an overflow or infinity).
const std::vector<Primitive>& primitives() {
    static const std::vector<Primitive> kPrimitives = {
        {"space", R"(| " " | "\n"{1,2} [ \t]{0,20})", {}},
        {"boolean", R"(("true" | "false") space)", {"space"}},
        {"null", R"("null" space)", {"space"}},
        {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
        {"decimal-part", R"([0-9]{1,16})", {}},
        {"integer", R"(("-"? integral-part) space)", {"integral-part", "space"}},
        {"number",
         R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)",
         {"integral-part", "decimal-part", "space"}},
        {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
        {"string", R"("\"" char* "\"" space)", {"char", "space"}},
        {"value",
         R"(object | array | string | number | boolean | null)",
         {"object", "array", "string", "number", "boolean", "null"}},
        {"object",
         R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)",
         {"string", "value", "space"}},
        {"array", R"("[" space ( value ("," space value)* )? "]" space)", {"value", "space"}},
        {"date",
         R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))",
         {}},
        {"time",
         R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
         {}},
        {"uuid",
         R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})",
         {}},
    };
    return kPrimitives;
}

// Keywords that restrict values in ways the grammar does not follow: refused, since ignoring
// them would let through documents the schema rejects.
const std::set<std::string>& unsupported_keywords() {
    static const std::set<std::string> kUnsupported = {
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minProperties",
        "maxProperties",
        "uniqueItems",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contentSchema",
    };
    return kUnsupported;
}

std::string sanitize(std::string_view hint) {
    std::string out;
    for (char c : hint) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        out += ok ? c : '-';
    }
    if (out.empty()) out = "r";
    return out;
}

std::string json_text(const ojson& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t count_field(const ojson& schema, const char* field, const std::string& path) {
    auto it = schema.find(field);
    if (it == schema.end()) return -1;
    if (!it->is_number_integer() && !it->is_number_unsigned()) {
        fail("json schema at {}: '{}' must be a non-negative integer", path, field);
    }
    const int64_t v = it->is_number_unsigned()
                          ? static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), 1u << 20))
                          : it->get<int64_t>();
    if (v < 0) fail("json schema at {}: '{}' must be a non-negative integer", path, field);
    if (v > 10000) fail("json schema at {}: '{}' above 10000 is not supported", path, field);
    return v;
}

// "{m,n}", "{m,}", or nothing for {1,1}.
std::string repeat(int64_t min, int64_t max) {
    if (max < 0) return min == 0 ? "*" : (min == 1 ? "+" : "{" + std::to_string(min) + ",}");
    if (min == 1 && max == 1) return "";
    if (min == 0 && max == 1) return "?";
    return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

}  // namespace

JsonGrammarBuilder::JsonGrammarBuilder() {
    // Reserved: helper rules never take these names, primitive() adds them when used.
    names_.insert("root");
    for (const Primitive& p : primitives()) names_.insert(p.name);
}

std::string JsonGrammarBuilder::literal(std::string_view text) {
    static const char* kHex = "0123456789ABCDEF";
    std::string out = "\"";
    for (char c : text) {
        const auto b = static_cast<uint8_t>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (b < 0x20 || b == 0x7F) {
            out += "\\x";
            out += kHex[b >> 4];
            out += kHex[b & 15];
        } else {
            out += c;  // UTF-8 passes through: GBNF literals are UTF-8
        }
    }
    return out + "\"";
}

std::string JsonGrammarBuilder::unique_name(std::string_view hint) {
    std::string base = sanitize(hint);
    std::string name = base;
    for (int i = 1; names_.count(name) || rules_.count(name); ++i)
        name = base + "-" + std::to_string(i);
    names_.insert(name);
    return name;
}

std::string JsonGrammarBuilder::add_rule(std::string_view name, const std::string& body) {
    const std::string n = unique_name(name);
    rules_[n] = body;
    return n;
}

std::string JsonGrammarBuilder::primitive(const std::string& name) {
    if (rules_.count(name)) return name;
    for (const Primitive& p : primitives()) {
        if (name != p.name) continue;
        rules_[name] = p.body;
        for (const char* u : p.uses) primitive(u);
        return name;
    }
    fail("json schema: no primitive rule '{}'", name);
}

std::string JsonGrammarBuilder::any_value() {
    return primitive("value");
}

std::string JsonGrammarBuilder::any_object() {
    return primitive("object");
}

namespace {

// Nesting deeper than any schema needs would only drive the visitor's recursion.
constexpr int kMaxSchemaDepth = 64;

// The nesting depth of a value, counted no further than `limit` + 1.
int nesting(const ojson& value, int limit) {
    if (limit < 0 || !value.is_structured()) return 0;
    int deepest = 0;
    for (const auto& child : value) deepest = std::max(deepest, nesting(child, limit - 1));
    return deepest + 1;
}

// Empties a set for a scope and gives its contents back after.
class LeadingRefsReset {
public:
    explicit LeadingRefsReset(std::set<std::string>& refs) : refs_(refs) { saved_.swap(refs_); }
    ~LeadingRefsReset() { saved_.swap(refs_); }
    LeadingRefsReset(const LeadingRefsReset&) = delete;
    LeadingRefsReset& operator=(const LeadingRefsReset&) = delete;

private:
    std::set<std::string>& refs_;
    std::set<std::string> saved_;
};

}  // namespace

std::string JsonGrammarBuilder::add_schema(const ojson& schema, std::string_view name) {
    if (nesting(schema, kMaxSchemaDepth) > kMaxSchemaDepth)
        fail("json schema: nested deeper than {} levels", kMaxSchemaDepth);
    const ojson* saved = document_;
    document_ = &schema;
    std::string rule;
    try {
        rule = visit(schema, std::string(name), "#");
    } catch (...) {
        document_ = saved;
        throw;
    }
    document_ = saved;
    return rule;
}

std::string JsonGrammarBuilder::visit(const ojson& schema, const std::string& name,
                                      const std::string& path) {
    if (schema.is_boolean()) {
        if (!schema.get<bool>())
            fail("json schema at {}: the schema 'false' accepts nothing", path);
        return any_value();
    }
    if (!schema.is_object())
        fail("json schema at {}: a schema must be an object or a boolean", path);
    for (const auto& [key, value] : schema.items()) {
        if (unsupported_keywords().count(key)) {
            fail("json schema at {}: '{}' is not supported (the output could not be held to it)",
                 path, key);
        }
    }
    if (auto ref = schema.find("$ref"); ref != schema.end()) {
        if (!ref->is_string()) fail("json schema at {}: '$ref' must be a string", path);
        return visit_ref(ref->get<std::string>(), path + "/$ref");
    }
    if (auto c = schema.find("const"); c != schema.end()) {
        return add_rule(name, literal(json_text(*c)) + " " + primitive("space"));
    }
    if (auto e = schema.find("enum"); e != schema.end()) {
        if (!e->is_array() || e->empty())
            fail("json schema at {}: 'enum' must be a non-empty array", path);
        std::string body = "(";
        for (size_t i = 0; i < e->size(); ++i) {
            if (i) body += " | ";
            body += literal(json_text((*e)[i]));
        }
        return add_rule(name, body + ") " + primitive("space"));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
        auto it = schema.find(key);
        if (it == schema.end()) continue;
        if (!it->is_array() || it->empty())
            fail("json schema at {}: '{}' must be a non-empty array", path, key);
        std::string body;
        for (size_t i = 0; i < it->size(); ++i) {
            if (i) body += " | ";
            body += visit((*it)[i], name + "-" + std::to_string(i),
                          path + "/" + key + "/" + std::to_string(i));
        }
        return add_rule(name, body);
    }
    if (auto all = schema.find("allOf"); all != schema.end()) {
        // Objects only: their properties and required lists together.
        if (!all->is_array() || all->empty())
            fail("json schema at {}: 'allOf' must be a non-empty array", path);
        ojson merged = {
            {"type", "object"}, {"properties", ojson::object()}, {"required", ojson::array()}};
        for (size_t i = 0; i < all->size(); ++i) {
            const ojson* part = &(*all)[i];
            const std::string at = path + "/allOf/" + std::to_string(i);
            if (part->is_object() && part->contains("$ref") && (*part)["$ref"].is_string()) {
                const std::string ref = (*part)["$ref"].get<std::string>();
                if (ref.rfind("#", 0) != 0)
                    fail("json schema at {}: only local '$ref's are supported", at);
                try {
                    part = &document_->at(nlohmann::ordered_json::json_pointer(ref.substr(1)));
                } catch (const std::exception&) {
                    fail("json schema at {}: '$ref' {} points nowhere", at, ref);
                }
            }
            if (!part->is_object() || !part->contains("properties"))
                fail("json schema at {}: 'allOf' is supported for object schemas only", at);
            for (const auto& [k, v] : (*part)["properties"].items()) merged["properties"][k] = v;
            if (auto r = part->find("required"); r != part->end() && r->is_array())
                for (const auto& k : *r) merged["required"].push_back(k);
        }
        return visit_object(merged, name, path);
    }
    auto type = schema.find("type");
    if (type != schema.end() && type->is_array()) {
        if (type->empty()) fail("json schema at {}: 'type' must not be an empty list", path);
        std::string body;
        for (size_t i = 0; i < type->size(); ++i) {
            ojson one = schema;
            one["type"] = (*type)[i];
            if (i) body += " | ";
            body += visit(one, name + "-" + std::to_string(i), path);
        }
        return add_rule(name, body);
    }
    std::string t;
    if (type != schema.end()) {
        if (!type->is_string()) fail("json schema at {}: 'type' must be a string or a list", path);
        t = type->get<std::string>();
    } else if (schema.contains("properties") || schema.contains("additionalProperties") ||
               schema.contains("required")) {
        t = "object";
    } else if (schema.contains("items") || schema.contains("prefixItems")) {
        t = "array";
    } else if (schema.contains("minLength") || schema.contains("maxLength")) {
        t = "string";
    }
    if (t.empty()) return any_value();
    if (t == "object") return visit_object(schema, name, path);
    if (t == "array") return visit_array(schema, name, path);
    if (t == "string") return visit_string(schema, name, path);
    if (t == "integer" || t == "number" || t == "boolean" || t == "null") return primitive(t);
    fail("json schema at {}: unknown type '{}'", path, t);
}

std::string JsonGrammarBuilder::visit_ref(const std::string& ref, const std::string& path) {
    if (leading_refs_.count(ref))
        fail("json schema at {}: '$ref' {} refers to itself before any value is read", path, ref);
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref.rfind("#", 0) != 0)
        fail("json schema at {}: only '$ref's into the same schema (#/...) are supported", path);
    const ojson* target = nullptr;
    try {
        target = &document_->at(nlohmann::ordered_json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
        fail("json schema at {}: '$ref' {} points nowhere", path, ref);
    }
    // Named before it is visited, so a recursive schema refers to its own rule.
    const std::string name = unique_name("ref-" + ref.substr(ref.rfind('/') + 1));
    refs_[ref] = name;
    rules_[name] = "";
    leading_refs_.insert(ref);
    try {
        rules_[name] = visit(*target, name + "-body", ref);
    } catch (...) {
        leading_refs_.erase(ref);
        throw;
    }
    leading_refs_.erase(ref);
    return name;
}

std::string JsonGrammarBuilder::visit_object(const ojson& schema, const std::string& name,
                                             const std::string& path) {
    // Inside the brackets, recursion is right recursion: it starts no left-recursive rule.
    const LeadingRefsReset inside_brackets(leading_refs_);
    const std::string space = primitive("space");
    std::vector<std::string> required_kv, optional_kv;
    std::set<std::string> required;
    if (auto r = schema.find("required"); r != schema.end()) {
        if (!r->is_array()) fail("json schema at {}: 'required' must be an array", path);
        for (const auto& k : *r) {
            if (!k.is_string()) fail("json schema at {}: 'required' must list strings", path);
            required.insert(k.get<std::string>());
        }
    }
    const ojson empty = ojson::object();
    const ojson* props = &empty;
    if (auto p = schema.find("properties"); p != schema.end()) {
        if (!p->is_object()) fail("json schema at {}: 'properties' must be an object", path);
        props = &*p;
    }
    auto kv = [&](const std::string& key, const ojson& sub, const std::string& at) {
        const std::string value = visit(sub, name + "-" + key, at);
        return add_rule(name + "-" + key + "-kv", literal(json_text(ojson(key))) + " " + space +
                                                      " \":\" " + space + " " + value);
    };
    for (const auto& [key, sub] : props->items()) {
        const std::string rule = kv(key, sub, path + "/properties/" + key);
        (required.count(key) ? required_kv : optional_kv).push_back(rule);
    }
    // Required names without a property schema take any value.
    for (const std::string& key : required) {
        if (!props->contains(key)) required_kv.push_back(kv(key, true, path + "/required"));
    }
    std::string inner;
    if (!required_kv.empty()) {
        for (size_t i = 0; i < required_kv.size(); ++i) {
            if (i) inner += " \",\" " + space + " ";
            inner += required_kv[i];
        }
        for (const std::string& o : optional_kv) inner += " (\",\" " + space + " " + o + ")?";
    } else if (!optional_kv.empty()) {
        // Whichever optional property comes first has no comma before it: first ::= O1 rest2 |
        // O2 rest3 | ..., rest_i ::= ("," O_i)? rest_i+1.
        std::vector<std::string> rest(optional_kv.size() + 1);
        for (size_t i = optional_kv.size(); i-- > 1;) {
            rest[i] = add_rule(name + "-rest", "(\",\" " + space + " " + optional_kv[i] + ")?" +
                                                   (rest[i + 1].empty() ? "" : " " + rest[i + 1]));
        }
        std::string first;
        for (size_t i = 0; i < optional_kv.size(); ++i) {
            if (i) first += " | ";
            first += optional_kv[i] + (rest[i + 1].empty() ? "" : " " + rest[i + 1]);
        }
        inner = "(" + first + ")?";
    }
    // additionalProperties as a schema, with no named properties: a map from any key.
    if (auto add = schema.find("additionalProperties");
        add != schema.end() && add->is_object() && props->empty() && required.empty()) {
        const std::string value = visit(*add, name + "-value", path + "/additionalProperties");
        const std::string entry =
            add_rule(name + "-entry", primitive("string") + " \":\" " + space + " " + value);
        inner = "(" + entry + " (\",\" " + space + " " + entry + ")*)?";
    } else if (add != schema.end() && !add->is_boolean() && !add->is_object()) {
        fail("json schema at {}: 'additionalProperties' must be a boolean or a schema", path);
    }
    return add_rule(name, "\"{\" " + space + " " + inner + " \"}\" " + space);
}

std::string JsonGrammarBuilder::visit_array(const ojson& schema, const std::string& name,
                                            const std::string& path) {
    // Inside the brackets, recursion is right recursion: it starts no left-recursive rule.
    const LeadingRefsReset inside_brackets(leading_refs_);
    const std::string space = primitive("space");
    const int64_t min = std::max<int64_t>(count_field(schema, "minItems", path), 0);
    const int64_t max = count_field(schema, "maxItems", path);
    if (max >= 0 && max < min) fail("json schema at {}: 'maxItems' is below 'minItems'", path);
    if (auto prefix = schema.find("prefixItems"); prefix != schema.end()) {
        if (!prefix->is_array()) fail("json schema at {}: 'prefixItems' must be an array", path);
        if (static_cast<int64_t>(prefix->size()) < min)
            fail("json schema at {}: 'minItems' beyond 'prefixItems' is not supported", path);
        std::string body = "\"[\" " + space;
        for (size_t i = 0; i < prefix->size(); ++i) {
            if (i) body += " \",\" " + space;
            body += " " + visit((*prefix)[i], name + "-" + std::to_string(i),
                                path + "/prefixItems/" + std::to_string(i));
        }
        return add_rule(name, body + " \"]\" " + space);
    }
    std::string item;
    if (auto items = schema.find("items"); items != schema.end()) {
        item = visit(*items, name + "-item", path + "/items");
    } else {
        item = any_value();
    }
    if (max == 0) return add_rule(name, "\"[\" " + space + " \"]\" " + space);
    const std::string more = "(\",\" " + space + " " + item + ")" +
                             repeat(std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1);
    std::string list = item + " " + more;
    if (min == 0) list = "(" + list + ")?";
    return add_rule(name, "\"[\" " + space + " " + list + " \"]\" " + space);
}

std::string JsonGrammarBuilder::visit_string(const ojson& schema, const std::string& name,
                                             const std::string& path) {
    const std::string space = primitive("space");
    if (auto f = schema.find("format"); f != schema.end() && f->is_string()) {
        const std::string format = f->get<std::string>();
        std::string body;
        if (format == "date") body = primitive("date");
        if (format == "time") body = primitive("time");
        if (format == "date-time") body = primitive("date") + " \"T\" " + primitive("time");
        if (format == "uuid") body = primitive("uuid");
        // Other formats are annotations (JSON Schema 2020-12): any string.
        if (!body.empty()) return add_rule(name, "\"\\\"\" " + body + " \"\\\"\" " + space);
    }
    const int64_t min = std::max<int64_t>(count_field(schema, "minLength", path), 0);
    const int64_t max = count_field(schema, "maxLength", path);
    if (max >= 0 && max < min) fail("json schema at {}: 'maxLength' is below 'minLength'", path);
    if (min == 0 && max < 0) return primitive("string");
    const std::string chars = primitive("char") + (min == 1 && max == 1 ? "" : repeat(min, max));
    return add_rule(name, "\"\\\"\" " + chars + " \"\\\"\" " + space);
}

std::string JsonGrammarBuilder::grammar(const std::string& root_body) const {
    std::string out = "root ::= " + root_body + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
}

TextWithoutMarks text_without_marks(JsonGrammarBuilder& b, const std::vector<std::string>& marks) {
    std::set<std::string> prefixes;  // proper prefixes of the marks, after their '<'
    for (const std::string& m : marks) {
        if (m.size() < 2 || m[0] != '<' || m.find('<', 1) != std::string::npos)
            fail("text_without_marks: '{}' is not a '<' and then characters other than '<'", m);
        for (const std::string& other : marks) {
            if (other.size() > m.size() && other.compare(0, m.size(), m) == 0)
                fail("text_without_marks: '{}' starts '{}'", m, other);
        }
        for (size_t n = 1; n < m.size(); ++n) prefixes.insert(m.substr(1, n - 1));
    }
    // A character of a class, escaped where the class would read it otherwise.
    const auto class_char = [](char c) {
        return c == '\\' || c == ']' || c == '^' || c == '-' ? std::string{'\\', c}
                                                             : std::string{c};
    };
    std::string partial, tail;
    for (const std::string& p : prefixes) {
        std::string next = "<";  // a '<' starts a mark afresh: the next piece takes it
        for (const std::string& m : marks) {
            if (m.compare(1, p.size(), p) == 0 && next.find(m[p.size() + 1]) == std::string::npos)
                next += m[p.size() + 1];
        }
        std::string excluded;
        for (char c : next) excluded += class_char(c);
        const std::string lit = p.empty() ? "" : JsonGrammarBuilder::literal(p) + " ";
        if (!partial.empty()) partial += " | ";
        partial += p.empty() ? "\"\"" : JsonGrammarBuilder::literal(p);
        if (!tail.empty()) tail += " | ";
        tail += lit + "[^" + excluded + "]";
    }
    TextWithoutMarks r;
    r.lt = b.add_rule("text-lt", "\"<\" (" + partial + ")");
    r.after = b.add_rule("text-after-lt", tail);
    r.text = b.add_rule("text", "([^<] | " + r.lt + "* \"<\" " + r.after + ")* " + r.lt + "*");
    return r;
}

std::string json_schema_grammar(const nlohmann::ordered_json& schema) {
    JsonGrammarBuilder b;
    const std::string rule = b.add_schema(schema, "schema");
    return b.grammar(rule);
}

std::string json_object_grammar() {
    JsonGrammarBuilder b;
    const std::string rule = b.any_object();
    return b.grammar(rule);
}

}  // namespace tandem
