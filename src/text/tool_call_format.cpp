// The tool-call formats and the streaming split of a reply into content and calls.
#include "text/tool_call_format.h"

#include <algorithm>
#include <array>
#include <set>

#include "base/error.h"
#include "text/harmony.h"
#include "text/json_schema_grammar.h"
#include "text/reply_text.h"
#include "text/utf8.h"

namespace tandem {
namespace {

using ojson = nlohmann::ordered_json;

using reply_text::compact;
using reply_text::is_space;
using reply_text::trim;

// {"name": "...", "<args_key>": {...}}; arguments given as a JSON string are read too.
std::optional<ToolCall> call_from_json(const ojson& j,
                                       std::initializer_list<const char*> args_keys) {
    if (!j.is_object()) return std::nullopt;
    auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
        return std::nullopt;
    for (const auto& item : j.items()) {
        const std::string& key = item.key();
        const bool known = key == "name" || key == "type" ||
                           std::any_of(args_keys.begin(), args_keys.end(),
                                       [&](const char* k) { return key == k; });
        if (!known) return std::nullopt;
    }
    ojson args = ojson::object();
    for (const char* key : args_keys) {
        auto a = j.find(key);
        if (a == j.end()) continue;
        args = *a;
        if (args.is_string()) {
            args = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        }
        break;
    }
    if (!args.is_object()) return std::nullopt;
    return ToolCall{name->get<std::string>(), compact(args)};
}

// `{"name": "NAME", "KEY": ARGS}` for each tool, as alternatives of one rule.
std::string call_alternatives(JsonGrammarBuilder& b, const std::vector<ToolSpec>& tools,
                              const char* args_key) {
    std::string body;
    for (const ToolSpec& t : tools) {
        const std::string args = b.add_schema(arguments_schema(t), t.name + "-args");
        if (!body.empty()) body += " | ";
        body += JsonGrammarBuilder::literal("{\"name\": " + compact(ojson(t.name)) + ", \"" +
                                            args_key + "\": ") +
                " " + args + " \"}\"";
    }
    return b.add_rule("call", body);
}

// --- hermes: Qwen 2.5 / 3, Hermes 2 Pro ----------------------------------------------------

bool hermes_detect(std::string_view source) {
    return source.find("<tool_call>") != std::string_view::npos &&
           source.find("<function=") == std::string_view::npos;
}

std::optional<std::vector<ToolCall>> hermes_parse(std::string_view, std::string_view body) {
    const ojson j = ojson::parse(trim(body), nullptr, /*allow_exceptions=*/false);
    auto call = call_from_json(j, {"arguments", "parameters"});
    if (!call) return std::nullopt;
    return std::vector<ToolCall>{*call};
}

std::string hermes_grammar(const std::vector<ToolSpec>& tools, bool parallel) {
    JsonGrammarBuilder b;
    const std::string call = call_alternatives(b, tools, "arguments");
    const std::string block =
        b.add_rule("block", "\"<tool_call>\\n\" " + call + " \"\\n</tool_call>\"");
    return b.grammar(parallel ? block + " (\"\\n\" " + block + ")*" : block);
}

std::string hermes_system_prompt(const ojson& tools) {
    std::string out =
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
        "provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& t : tools) out += "\n" + compact(t);
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
    return out;
}

std::string hermes_render(const std::vector<ToolCall>& calls) {
    std::string out;
    for (const ToolCall& c : calls) {
        if (!out.empty()) out += "\n";
        out += "<tool_call>\n{\"name\": " + compact(ojson(c.name)) +
               ", \"arguments\": " + c.arguments + "}\n</tool_call>";
    }
    return out;
}

// --- llama3_json: Llama 3.1 / 3.2 / 3.3 --------------------------------------------------

bool llama3_detect(std::string_view source) {
    return source.find("ipython") != std::string_view::npos &&
           source.find("\"parameters\"") != std::string_view::npos;
}

// One object, or several separated by ';' (Llama 3.2 sometimes writes them so).
std::optional<std::vector<ToolCall>> llama3_parse(std::string_view opener, std::string_view body) {
    std::string text = (opener == "{" ? "{" : "") + std::string(body);
    std::vector<ToolCall> calls;
    std::string_view rest = trim(text);
    while (!rest.empty()) {
        // The object ends where a JSON parse of the longest balanced prefix succeeds.
        size_t end = std::string_view::npos;
        int depth = 0;
        bool in_string = false, escaped = false;
        for (size_t i = 0; i < rest.size(); ++i) {
            const char c = rest[i];
            if (in_string) {
                if (escaped)
                    escaped = false;
                else if (c == '\\')
                    escaped = true;
                else if (c == '"')
                    in_string = false;
            } else if (c == '"') {
                in_string = true;
            } else if (c == '{') {
                ++depth;
            } else if (c == '}') {
                if (--depth == 0) {
                    end = i + 1;
                    break;
                }
            }
        }
        if (end == std::string_view::npos) return std::nullopt;
        const ojson j = ojson::parse(rest.substr(0, end), nullptr, /*allow_exceptions=*/false);
        auto call = call_from_json(j, {"parameters", "arguments"});
        if (!call) return std::nullopt;
        calls.push_back(*call);
        rest = trim(rest.substr(end));
        if (!rest.empty() && rest.front() == ';') rest = trim(rest.substr(1));
    }
    if (calls.empty()) return std::nullopt;
    return calls;
}

std::string llama3_grammar(const std::vector<ToolSpec>& tools, bool) {
    // Llama 3.1's template refuses more than one call per turn: one call, whatever `parallel`.
    JsonGrammarBuilder b;
    return b.grammar(call_alternatives(b, tools, "parameters"));
}

std::string llama3_system_prompt(const ojson& tools) {
    std::string out =
        "Given the following functions, please respond with a JSON for a function call with its "
        "proper arguments that best answers the given prompt.\n\nRespond in the format "
        "{\"name\": function name, \"parameters\": dictionary of argument name and its value}. "
        "Do not use variables.\n";
    for (const auto& t : tools) out += "\n" + compact(t) + "\n";
    return out;
}

std::string llama3_render(const std::vector<ToolCall>& calls) {
    std::string out;
    for (const ToolCall& c : calls) {
        if (!out.empty()) out += "; ";
        out += "{\"name\": " + compact(ojson(c.name)) + ", \"parameters\": " + c.arguments + "}";
    }
    return out;
}

// --- qwen3_coder: Qwen3-Coder, Qwen3.5 (XML calls) ----------------------------------------
//
// <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call>
// A value is raw text; the template writes strings as they are and other values as JSON.

bool qwen3_coder_detect(std::string_view source) {
    return source.find("<tool_call>") != std::string_view::npos &&
           source.find("<function=") != std::string_view::npos &&
           source.find("<parameter=") != std::string_view::npos;
}

// What a parameter's text stands for. The parser does not see the tools' schemas, so it reads
// a value that is JSON other than a string (number, boolean, null, object, array) as that JSON
// (as llama.cpp does for parameters not typed string); anything else, quoted text included, is
// the string as written.
ojson qwen3_coder_value(std::string_view text) {
    ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && !j.is_string()) return j;
    return ojson(std::string(text));
}

bool consume(std::string_view& s, std::string_view prefix) {
    if (s.substr(0, prefix.size()) != prefix) return false;
    s.remove_prefix(prefix.size());
    return true;
}

// The text of `<TAG=NAME>` after its "<TAG=": NAME, which may not be empty or hold space or a
// tag mark.
std::optional<std::string> tag_name(std::string_view& s) {
    const size_t end = s.find('>');
    if (end == std::string_view::npos || end == 0) return std::nullopt;
    const std::string_view name = s.substr(0, end);
    if (std::any_of(name.begin(), name.end(), [](char c) { return is_space(c) || c == '<'; }))
        return std::nullopt;
    // Names go out in JSON: text that is not UTF-8 is no name.
    if (!is_valid_utf8(name)) return std::nullopt;
    s.remove_prefix(end + 1);
    return std::string(name);
}

std::optional<std::vector<ToolCall>> qwen3_coder_parse(std::string_view, std::string_view body) {
    std::string_view s = trim(body);
    if (!consume(s, "<function=")) return std::nullopt;
    auto name = tag_name(s);
    if (!name) return std::nullopt;
    ojson args = ojson::object();
    for (;;) {
        s = trim(s);
        if (consume(s, "</function>")) break;
        if (!consume(s, "<parameter=")) return std::nullopt;
        auto param = tag_name(s);
        if (!param || args.contains(*param)) return std::nullopt;
        const size_t end = s.find("</parameter>");
        if (end == std::string_view::npos) return std::nullopt;
        std::string_view value = s.substr(0, end);
        s.remove_prefix(end + std::string_view("</parameter>").size());
        // The template puts the value on lines of its own: one newline either side is markup.
        if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
        if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
        args[*param] = qwen3_coder_value(value);
    }
    if (!trim(s).empty()) return std::nullopt;
    return std::vector<ToolCall>{{*name, compact(args)}};
}

// A string parameter's value: free text, kept from reading back as other JSON (a number,
// true, false, null, an array or object) by what it may start with; blank at the start would
// be taken for markup. Narrower than the strings a model may mean, never wider. With
// minLength/maxLength, characters are counted, and the text holds no '<' (no mark to keep out).
std::string qwen3_coder_string_value(JsonGrammarBuilder& b, const TextWithoutMarks& x,
                                     const ojson& schema, const std::string& name) {
    if (schema.contains("pattern")) return b.add_schema(schema, name);  // refused there
    if (auto f = schema.find("format"); f != schema.end() && f->is_string()) {
        const std::string format = f->get<std::string>();
        if (format == "date" || format == "time" || format == "date-time" || format == "uuid")
            fail("json schema of parameter {}: format '{}' is not supported in XML calls", name,
                 format);
    }
    const char* first = "[^\\-0-9\\[{ \\t\\r\\n<tfn]";
    if (!schema.contains("minLength") && !schema.contains("maxLength")) {
        const std::string& t = x.text;
        return b.add_rule("xml-string", std::string(first) + " " + t + " | " + x.lt + "* \"<\" " +
                                            x.after + " " + t + " | " + x.lt +
                                            "+ | \"t\" ([^r \\t\\r\\n<] " + t +
                                            ")? | \"f\" ([^a \\t\\r\\n<] " + t +
                                            ")? | \"n\" ([^u \\t\\r\\n<] " + t + ")?");
    }
    auto count = [&](const char* key, int64_t fallback) {
        const auto v = schema.find(key);
        if (v == schema.end()) return fallback;
        if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 10000)
            fail("json schema of parameter {}: '{}' must be an integer from 0 to 10000", name, key);
        return v->get<int64_t>();
    };
    const int64_t lo = count("minLength", 0);
    const int64_t hi = count("maxLength", -1);  // -1: none
    if (hi >= 0 && hi < lo)
        fail("json schema of parameter {}: 'maxLength' is below 'minLength'", name);
    // `rest` more characters after `taken` ones.
    auto rest = [&](int64_t taken) {
        const int64_t a = std::max<int64_t>(lo - taken, 0);
        return "[^<]{" + std::to_string(a) + "," + (hi < 0 ? "" : std::to_string(hi - taken)) + "}";
    };
    std::string body;
    auto add = [&](const std::string& alt) { body += (body.empty() ? "" : " | ") + alt; };
    if (lo == 0) add("\"\"");
    if (hi != 0) {
        add(std::string(first) + " " + rest(1));
        if (lo <= 1) add("[tfn]");
    }
    if (hi < 0 || hi >= 2) add("(\"t\" [^r<] | \"f\" [^a<] | \"n\" [^u<]) " + rest(2));
    return b.add_rule(name, body);
}

// The grammar of one parameter's value (before its "\n</parameter>").
std::string qwen3_coder_param_value(JsonGrammarBuilder& b, const ojson& schema,
                                    const std::string& name, std::string& string_rule,
                                    const TextWithoutMarks& text) {
    if (schema.is_object()) {
        const auto e = schema.find("enum");
        if (e != schema.end() && e->is_array() && !e->empty() &&
            std::all_of(e->begin(), e->end(), [](const ojson& v) { return v.is_string(); })) {
            // Strings written raw, as the template writes them.
            std::string body;
            for (const auto& v : *e) {
                if (!body.empty()) body += " | ";
                body += JsonGrammarBuilder::literal(v.get<std::string>());
            }
            return b.add_rule(name, body);
        }
        const auto c = schema.find("const");
        if (c != schema.end() && c->is_string())
            return b.add_rule(name, JsonGrammarBuilder::literal(c->get<std::string>()));
        const auto t = schema.find("type");
        if (t != schema.end() && *t == "string") {
            const bool plain = !schema.contains("minLength") && !schema.contains("maxLength") &&
                               !schema.contains("pattern") && !schema.contains("format");
            if (!plain) return qwen3_coder_string_value(b, text, schema, name);
            if (string_rule.empty()) string_rule = qwen3_coder_string_value(b, text, schema, name);
            return string_rule;
        }
    }
    return b.add_schema(schema, name);
}

std::string qwen3_coder_grammar(const std::vector<ToolSpec>& tools, bool parallel) {
    JsonGrammarBuilder b;
    // Free text holds no "</parameter>" (which would end the value early) nor "</tool_call>"
    // (which would end the block).
    const TextWithoutMarks text = text_without_marks(b, {"</parameter>", "</tool_call>"});
    std::string string_rule;
    std::string calls;
    for (const ToolSpec& t : tools) {
        const ojson schema = arguments_schema(t);
        std::set<std::string> required;
        if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
            for (const auto& n : *r) {
                if (n.is_string()) required.insert(n.get<std::string>());
            }
        }
        // Parameters in schema order, the optional ones optional.
        std::string body = JsonGrammarBuilder::literal("<tool_call>\n<function=" + t.name + ">\n");
        if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
            for (const auto& [key, sub] : props->items()) {
                const std::string value =
                    qwen3_coder_param_value(b, sub, t.name + "-" + key, string_rule, text);
                const std::string param = JsonGrammarBuilder::literal("<parameter=" + key + ">\n") +
                                          " " + value + " " +
                                          JsonGrammarBuilder::literal("\n</parameter>\n");
                body += " " + (required.count(key) ? param : "(" + param + ")?");
            }
        }
        body += " " + JsonGrammarBuilder::literal("</function>\n</tool_call>");
        if (!calls.empty()) calls += " | ";
        calls += b.add_rule("call-" + t.name, body);
    }
    const std::string block = b.add_rule("block", calls);
    return b.grammar(parallel ? block + " (\"\\n\" " + block + ")*" : block);
}

std::string qwen3_coder_system_prompt(const ojson& tools) {
    std::string out = "# Tools\n\nYou have access to the following tools:\n\n<tools>";
    for (const auto& t : tools) out += "\n" + compact(t);
    out +=
        "\n</tools>\n\nIf you choose to call a tool ONLY reply in the following format with NO "
        "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_"
        "1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</"
        "function>\n</tool_call>";
    return out;
}

std::string qwen3_coder_render(const std::vector<ToolCall>& calls) {
    std::string out;
    for (const ToolCall& c : calls) {
        if (!out.empty()) out += "\n";
        out += "<tool_call>\n<function=" + c.name + ">\n";
        const ojson args = ojson::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
        if (args.is_object()) {
            for (const auto& [key, value] : args.items()) {
                out += "<parameter=" + key + ">\n" +
                       (value.is_string() ? value.get<std::string>() : compact(value)) +
                       "\n</parameter>\n";
            }
        }
        out += "</function>\n</tool_call>";
    }
    return out;
}

}  // namespace

ojson arguments_schema(const ToolSpec& tool) {
    if (tool.parameters.is_null())
        return ojson{{"type", "object"}, {"properties", ojson::object()}};
    return tool.parameters;
}

const std::vector<ToolCallFormat>& tool_call_formats() {
    static const std::vector<ToolCallFormat> kFormats = {
        // Before hermes: its templates write <tool_call> too.
        {"qwen3_coder",
         qwen3_coder_detect,
         {"<tool_call>"},
         false,
         "</tool_call>",
         qwen3_coder_parse,
         qwen3_coder_grammar,
         qwen3_coder_system_prompt,
         qwen3_coder_render},
        {"hermes",
         hermes_detect,
         {"<tool_call>"},
         false,
         "</tool_call>",
         hermes_parse,
         hermes_grammar,
         hermes_system_prompt,
         hermes_render},
        {"llama3_json",
         llama3_detect,
         {"<|python_tag|>", "{"},
         true,
         "",
         llama3_parse,
         llama3_grammar,
         llama3_system_prompt,
         llama3_render},
        // gpt-oss: its template writes none of the others' marks.
        {"harmony",
         harmony_detect,
         {},
         false,
         "",
         nullptr,
         harmony_grammar,
         harmony_system_prompt,
         harmony_render_calls,
         make_harmony_parser,
         "thinking",
         true,
         harmony_content_grammar},
    };
    return kFormats;
}

const ToolCallFormat& tool_call_format_for_template(std::string_view source) {
    for (const ToolCallFormat& f : tool_call_formats()) {
        if (f.detect(source)) return f;
    }
    return *find_tool_call_format("hermes");
}

const ToolCallFormat* find_tool_call_format(std::string_view name) {
    for (const ToolCallFormat& f : tool_call_formats()) {
        if (name == f.name) return &f;
    }
    return nullptr;
}

namespace {

// The formats of call blocks in free text (an opener, a body, a closer or the reply's end), read
// with the format's fields: content up to a block, then the block's calls, or the block as
// written where it does not parse.
class BlockParser final : public ReplyParser {
  public:
    explicit BlockParser(const ToolCallFormat& format) : format_(format) {}

    std::vector<ReplyEvent> feed(std::string_view text) override {
        std::vector<ReplyEvent> out;
        buffer_.append(text);
        for (;;) {
            if (in_block_) {
                if (format_.closer.empty()) break;  // runs to the end of the reply
                const size_t end = buffer_.find(format_.closer, searched_);
                if (end == std::string::npos) {
                    searched_ = reply_text::resume_search_at(
                        buffer_.size(), std::array{std::string_view(format_.closer)});
                    break;
                }
                emit_block(std::string_view(buffer_).substr(0, end), /*final=*/false, out);
                buffer_.erase(0, end + format_.closer.size());
                in_block_ = false;
                continue;
            }
            const bool may_open = !format_.opens_at_start || (!said_something_ && n_calls_ == 0);
            if (!may_open) {
                emit_text(std::move(buffer_), out);
                buffer_.clear();
                break;
            }
            // The earliest opener; for formats that open only at the start, only after whitespace.
            size_t at = std::string::npos;
            const std::string* opener = nullptr;
            for (const std::string& o : format_.openers) {
                const size_t p = buffer_.find(o);
                if (p < at) {
                    at = p;
                    opener = &o;
                }
            }
            if (format_.opens_at_start && at != std::string::npos &&
                !std::all_of(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(at),
                             is_space)) {
                at = std::string::npos;
            }
            if (at != std::string::npos) {
                emit_text(buffer_.substr(0, at), out);
                opener_ = *opener;
                buffer_.erase(0, at + opener->size());
                in_block_ = true;
                searched_ = 0;
                continue;
            }
            // Hold back a tail that may still become an opener.
            size_t keep = reply_text::partial_mark_tail(buffer_, format_.openers);
            if (format_.opens_at_start) {
                // Nothing but whitespace so far: all of it may still precede an opener.
                const size_t first = buffer_.find_first_not_of(" \t\r\n");
                if (first == std::string::npos)
                    keep = buffer_.size();
                else if (keep == 0 || first + keep != buffer_.size()) {
                    // Content that cannot be a call: the reply is plain text.
                    said_something_ = true;
                    keep = 0;
                }
            }
            emit_text(buffer_.substr(0, buffer_.size() - keep), out);
            buffer_.erase(0, buffer_.size() - keep);
            break;
        }
        return out;
    }

    std::vector<ReplyEvent> finish() override {
        std::vector<ReplyEvent> out;
        if (in_block_) {
            // A block the reply ended in (a closer never came): a call only if it parses whole.
            emit_block(buffer_, /*final=*/true, out);
            in_block_ = false;
        } else {
            emit_text(std::move(buffer_), out);
        }
        buffer_.clear();
        // Trailing whitespace of a reply without calls is part of its content.
        if (n_calls_ == 0 && !space_.empty()) {
            std::string text = std::move(space_);
            space_.clear();
            if (!out.empty() && !out.back().call)
                out.back().text += text;
            else
                out.push_back({std::move(text), std::nullopt});
        }
        return out;
    }

    int n_calls() const override { return n_calls_; }

  private:
    void emit_text(std::string text, std::vector<ReplyEvent>& out) {
        if (text.empty()) return;
        // Trailing whitespace waits: dropped if a call follows it, sent before the next content
        // otherwise (so that how the text was split into pieces changes nothing).
        const size_t last = text.find_last_not_of(" \t\r\n");
        if (last == std::string::npos) {
            space_ += text;
            return;
        }
        std::string tail = text.substr(last + 1);
        text.resize(last + 1);
        text = std::move(space_) + text;
        space_ = std::move(tail);
        said_something_ = true;
        if (!out.empty() && !out.back().call) {
            out.back().text += text;
        } else {
            out.push_back({std::move(text), std::nullopt});
        }
    }

    void emit_block(std::string_view body, bool final, std::vector<ReplyEvent>& out) {
        auto calls = format_.parse_block(opener_, body);
        if (!calls) {
            std::string text = opener_ + std::string(body);
            if (!final) text += format_.closer;
            // Malformed: the model's text, as it wrote it.
            text = std::move(space_) + text;
            space_.clear();
            said_something_ = true;
            if (!out.empty() && !out.back().call) {
                out.back().text += text;
            } else {
                out.push_back({std::move(text), std::nullopt});
            }
            return;
        }
        space_.clear();
        for (ToolCall& c : *calls) {
            out.push_back({{}, std::move(c)});
            ++n_calls_;
        }
    }

    const ToolCallFormat& format_;
    std::string buffer_;  // not yet settled
    std::string space_;   // whitespace held until we know what follows it
    std::string opener_;  // the opener of the block being read
    bool in_block_ = false;
    size_t searched_ = 0;          // where the search for the block's closer resumes in buffer_
    bool said_something_ = false;  // content other than whitespace went out
    int n_calls_ = 0;
};

}  // namespace

ToolCallParser::ToolCallParser(const ToolCallFormat& format, bool parse_calls)
    : parser_(format.reply_parser ? format.reply_parser(parse_calls)
                                  : std::make_unique<BlockParser>(format)) {}

ParsedReply parse_tool_calls(const ToolCallFormat& format, std::string_view reply) {
    ToolCallParser parser(format);
    ParsedReply r;
    append_events(r, parser.feed(reply));
    append_events(r, parser.finish());
    return r;
}

void append_events(ParsedReply& r, std::vector<ReplyEvent> events) {
    for (ReplyEvent& e : events) {
        if (e.call)
            r.calls.push_back(std::move(*e.call));
        else if (e.reasoning)
            r.reasoning += e.text;
        else
            r.content += e.text;
    }
}

}  // namespace tandem
