// Reading and checking completion request bodies.
#include "server/completion_request.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <random>

#include "base/error.h"
#include "engine/request.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "text/json_schema_grammar.h"

namespace tandem::server {
namespace {

constexpr size_t kMaxStops = 16;
constexpr int64_t kMaxChoices = 16;  // `n`: each choice takes a slot of its own
constexpr int64_t kMaxTokensLimit = 1 << 24;

}  // namespace

// OpenAI's defaults (temperature 1, nucleus off), with llama.cpp's extras off unless asked for:
// a client that sends nothing gets plain sampling from the model's distribution.
SamplingParams default_sampling() {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.top_k = 0;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    // No seed: every request draws differently, as with OpenAI.
    p.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
    return p;
}

namespace {

uint64_t read_seed(const nlohmann::json& v) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
            return static_cast<uint64_t>(static_cast<int64_t>(d));
        }
    }
    bad_request("'seed' must be an integer", "seed");
}

void read_sampling(const nlohmann::json& body, CompletionRequest& r) {
    SamplingParams& p = r.sampling;
    p = default_sampling();
    if (auto v = get_number(body, "temperature")) {
        if (!(*v >= 0.0 && *v <= 100.0))
            bad_request("'temperature' must be in [0, 100]", "temperature");
        p.temperature = static_cast<float>(*v);
    }
    if (auto v = get_number(body, "top_p")) {
        if (!(*v > 0.0 && *v <= 1.0)) bad_request("'top_p' must be in (0, 1]", "top_p");
        p.top_p = static_cast<float>(*v);
    }
    // -1 is vLLM's "off"; 0 is llama.cpp's.
    if (auto v = get_integer(body, "top_k", -1, 1 << 30))
        p.top_k = *v < 0 ? 0 : static_cast<int>(*v);
    if (auto v = get_number(body, "min_p")) {
        if (!(*v >= 0.0 && *v <= 1.0)) bad_request("'min_p' must be in [0, 1]", "min_p");
        p.min_p = static_cast<float>(*v);
    }
    for (const char* field : {"repetition_penalty", "repeat_penalty"}) {
        if (auto v = get_number(body, field)) {
            if (!(*v > 0.0 && *v <= 100.0))
                bad_request(std::string("'") + field + "' must be in (0, 100]", field);
            p.repeat_penalty = static_cast<float>(*v);
        }
    }
    if (auto v = get_integer(body, "repeat_last_n", 0, 1 << 20))
        p.repeat_last_n = static_cast<int>(*v);
    if (auto it = body.find("seed"); it != body.end() && !it->is_null()) p.seed = read_seed(*it);
    // OpenAI's additive penalties, over the same recent tokens as the repetition penalty (as
    // llama.cpp's server applies them).
    for (auto [field, value] : {std::pair{"frequency_penalty", &p.frequency_penalty},
                                std::pair{"presence_penalty", &p.presence_penalty}}) {
        if (auto v = get_number(body, field)) {
            if (!(*v >= -2.0 && *v <= 2.0))
                bad_request(std::string("'") + field + "' must be in [-2, 2]", field);
            *value = static_cast<float>(*v);
        }
    }
}

void read_common(const nlohmann::json& body, CompletionRequest& r, bool chat) {
    if (auto v = get_string(body, "model")) r.model = *v;
    read_sampling(body, r);
    // max_completion_tokens is the newer name; when both are given it wins, as with OpenAI.
    if (auto v = get_integer(body, "max_tokens", 1, kMaxTokensLimit))
        r.max_tokens = static_cast<int>(*v);
    if (chat) {
        if (auto v = get_integer(body, "max_completion_tokens", 1, kMaxTokensLimit)) {
            r.max_tokens = static_cast<int>(*v);
        }
    }
    if (auto v = get_integer(body, "n", 1, kMaxChoices)) r.n = static_cast<int>(*v);
    if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
        if (it->is_string()) {
            r.stop.push_back(it->get<std::string>());
        } else if (it->is_array()) {
            for (const auto& s : *it) {
                if (!s.is_string())
                    bad_request("'stop' must be a string or an array of strings", "stop");
                r.stop.push_back(s.get<std::string>());
            }
        } else {
            bad_request(std::string("'stop' must be a string or an array of strings, not ") +
                            json_type_name(*it),
                        "stop");
        }
        if (r.stop.size() > kMaxStops) bad_request("'stop' has more than 16 strings", "stop");
        for (const std::string& s : r.stop) {
            if (s.empty()) bad_request("'stop' strings must not be empty", "stop");
        }
    }
    r.stream = get_bool(body, "stream").value_or(false);
    r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
    if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) bad_request("'stream_options' must be an object", "stream_options");
        r.include_usage = get_bool(*it, "include_usage").value_or(false);
    }
    // Chat: `logprobs` true, with `top_logprobs` alternatives; completions: `logprobs` N.
    if (chat) {
        const bool wanted = get_bool(body, "logprobs").value_or(false);
        const auto top = get_integer(body, "top_logprobs", 0, kMaxTopLogprobs);
        if (top && !wanted)
            bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
        if (wanted) r.logprobs = static_cast<int>(top.value_or(0));
    } else if (auto n = get_integer(body, "logprobs", 0, kMaxTopLogprobs)) {
        r.logprobs = static_cast<int>(*n);
    }
    // OpenAI's {"token id": bias}, the bias in [-100, 100] (the ids are checked against the
    // vocabulary with the model, in generation_job).
    if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) bad_request("'logit_bias' must be an object", "logit_bias");
        for (const auto& [key, value] : it->items()) {
            int64_t id = -1;
            const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
            if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX)
                bad_request("'logit_bias' keys must be token ids, not '" + key + "'", "logit_bias");
            if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0))
                bad_request("'logit_bias' values must be numbers in [-100, 100]", "logit_bias");
            r.sampling.logit_bias.emplace_back(static_cast<int32_t>(id),
                                               static_cast<float>(value.get<double>()));
        }
    }
}

// A JSON schema's grammar; a schema the grammar cannot follow is a 400 naming `param`.
std::string schema_grammar(const nlohmann::ordered_json& schema, const char* param) {
    try {
        return json_schema_grammar(schema);
    } catch (const Error& e) {
        bad_request(std::string("'") + param + "': " + e.what(), param);
    }
}

// response_format (OpenAI), json_schema and grammar (llama.cpp's extensions): at most one.
void read_output_format(const nlohmann::ordered_json& body, CompletionRequest& r) {
    auto set = [&](std::string grammar, const char* param, bool raw = false) {
        if (!r.grammar.empty()) {
            bad_request(
                std::string("'") + param + "' cannot be combined with '" + r.grammar_param + "'",
                param);
        }
        r.grammar = std::move(grammar);
        r.grammar_param = param;
        r.grammar_is_raw = raw;
    };
    if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) bad_request("'response_format' must be an object", "response_format");
        const std::string type = get_string(*it, "type").value_or("text");
        if (type == "json_object") {
            // llama.cpp also takes a schema here.
            auto schema = it->find("schema");
            set(schema != it->end() && !schema->is_null()
                    ? schema_grammar(*schema, "response_format")
                    : json_object_grammar(),
                "response_format");
        } else if (type == "json_schema") {
            auto js = it->find("json_schema");
            if (js == it->end() || !js->is_object()) {
                bad_request("'response_format' of type json_schema needs a 'json_schema' object",
                            "response_format");
            }
            auto schema = js->find("schema");
            set(schema != js->end() && !schema->is_null()
                    ? schema_grammar(*schema, "response_format")
                    : json_object_grammar(),
                "response_format");
        } else if (type != "text") {
            bad_request("'response_format' type '" + type +
                            "' is unknown (expected text, json_object or json_schema)",
                        "response_format");
        }
    }
    if (auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
        set(schema_grammar(*it, "json_schema"), "json_schema");
    }
    if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) bad_request("'grammar' must be a string (GBNF)", "grammar");
        if (!it->get<std::string>().empty()) set(it->get<std::string>(), "grammar", /*raw=*/true);
    }
}

// tool_choice: "auto", "none", "required", or {"type": "function", "function": {"name": …}}.
void read_tool_choice(const nlohmann::ordered_json& body, CompletionRequest& r) {
    auto it = body.find("tool_choice");
    if (it == body.end() || it->is_null()) return;
    if (it->is_string()) {
        const std::string v = it->get<std::string>();
        if (v == "auto")
            r.tool_choice = ToolChoice::kAuto;
        else if (v == "none")
            r.tool_choice = ToolChoice::kNone;
        else if (v == "required")
            r.tool_choice = ToolChoice::kRequired;
        else
            bad_request("'tool_choice' must be auto, none, required or a function", "tool_choice");
        return;
    }
    if (!it->is_object()) bad_request("'tool_choice' must be a string or an object", "tool_choice");
    auto fn = it->find("function");
    if (get_string(*it, "type").value_or("") != "function" || fn == it->end() || !fn->is_object() ||
        !get_string(*fn, "name")) {
        bad_request(
            "'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
            "{\"name\": …}}",
            "tool_choice");
    }
    r.tool_choice = ToolChoice::kFunction;
    r.tool_name = *get_string(*fn, "name");
}

// Roles the chat templates know; "developer" is OpenAI's newer name for "system".
std::string checked_role(const nlohmann::json& message, size_t i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    auto it = message.find("role");
    if (it == message.end() || it->is_null())
        bad_request(where + ": 'role' is missing", "messages");
    if (!it->is_string()) bad_request(where + ": 'role' must be a string", "messages");
    const std::string role = it->get<std::string>();
    if (role == "developer") return "system";
    if (role == "system" || role == "user" || role == "assistant" || role == "tool") return role;
    bad_request(where + ": unknown role '" + role +
                    "' (expected system, developer, user, assistant or tool)",
                "messages");
}

// A message's content as the templates expect it: a string, or null for an assistant turn that
// only calls tools. Text parts are joined; other parts (images, audio) cannot be served.
nlohmann::ordered_json checked_content(const nlohmann::ordered_json& message,
                                       const std::string& role, size_t i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    auto it = message.find("content");
    if (it == message.end() || it->is_null()) {
        if (role == "assistant" && message.contains("tool_calls")) return nullptr;
        bad_request(where + ": 'content' is missing", "messages");
    }
    if (it->is_string()) return *it;
    if (!it->is_array()) {
        bad_request(
            where + ": 'content' must be a string or an array of parts, not " + json_type_name(*it),
            "messages");
    }
    std::string text;
    for (const auto& part : *it) {
        if (!part.is_object()) bad_request(where + ": content parts must be objects", "messages");
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string() || *type != "text") {
            bad_request(where + ": only text content parts are supported", "messages");
        }
        const auto t = part.find("text");
        if (t == part.end() || !t->is_string())
            bad_request(where + ": a text part needs a string 'text'", "messages");
        text += t->get<std::string>();
    }
    return text;
}

}  // namespace

namespace {

// Deeper JSON than any request needs; nlohmann's parser keeps its own stack, but copying,
// dumping and visiting a value recurse, and a body of 8 MB of '[' ran the handler out of stack
// (the server died).
constexpr int kMaxJsonDepth = 256;

void check_nesting(const std::string& body) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (char c : body) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                bad_request("the request body nests deeper than " + std::to_string(kMaxJsonDepth) +
                            " levels");
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
}

}  // namespace

nlohmann::ordered_json parse_ordered_object(const std::string& body) {
    check_nesting(body);
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(body);
    } catch (const nlohmann::json::exception& e) {
        bad_request(std::string("malformed JSON: ") + e.what());
    }
    if (!j.is_object()) bad_request("the request body must be a JSON object");
    return j;
}

void read_tools(const nlohmann::ordered_json& tools, CompletionRequest& r, const char* param) {
    if (!tools.is_array()) bad_request(std::string("'") + param + "' must be an array", param);
    for (size_t i = 0; i < tools.size(); ++i) {
        const auto& t = tools[i];
        const std::string where = std::string(param) + "[" + std::to_string(i) + "]";
        if (!t.is_object()) bad_request(where + " must be an object", param);
        if (get_string(t, "type").value_or("function") != "function")
            bad_request(where + ": only tools of type 'function' are supported", param);
        auto fn = t.find("function");
        if (fn == t.end() || !fn->is_object())
            bad_request(where + ": 'function' must be an object", param);
        auto name = fn->find("name");
        if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
            bad_request(where + ".function: 'name' must be a non-empty string", param);
        ToolSpec spec{name->get<std::string>(), nullptr};
        for (const ToolSpec& other : r.tool_specs) {
            if (other.name == spec.name)
                bad_request(where + ": a second function named '" + spec.name + "'", param);
        }
        if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
            if (!p->is_object())
                bad_request(where + ".function: 'parameters' must be a JSON schema object", param);
            spec.parameters = *p;
        }
        r.tool_specs.push_back(std::move(spec));
    }
    if (!tools.empty()) r.tools = tools;
}

void check_tool_choice(const CompletionRequest& r, const char* param) {
    if (r.tool_choice == ToolChoice::kRequired && r.tool_specs.empty())
        bad_request("a required tool call needs 'tools'", param);
    if (r.tool_choice == ToolChoice::kFunction) {
        const bool found = std::any_of(r.tool_specs.begin(), r.tool_specs.end(),
                                       [&](const ToolSpec& t) { return t.name == r.tool_name; });
        if (!found) bad_request("the function '" + r.tool_name + "' is not among the tools", param);
    }
}

nlohmann::json parse_json_object(const std::string& body) {
    check_nesting(body);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(body);
    } catch (const nlohmann::json::exception& e) {
        bad_request(std::string("malformed JSON: ") + e.what());
    }
    if (!j.is_object()) bad_request("the request body must be a JSON object");
    return j;
}

CompletionRequest parse_chat_request(const std::string& text) {
    // Ordered: a template may iterate over a tool's parameters, whose order the client chose.
    const nlohmann::ordered_json body = parse_ordered_object(text);
    CompletionRequest r;
    read_common(nlohmann::json::parse(text), r, /*chat=*/true);
    auto messages = body.find("messages");
    if (messages == body.end() || messages->is_null())
        bad_request("'messages' is missing", "messages");
    if (!messages->is_array()) bad_request("'messages' must be an array", "messages");
    if (messages->empty()) bad_request("'messages' must not be empty", "messages");
    r.messages = nlohmann::ordered_json::array();
    for (size_t i = 0; i < messages->size(); ++i) {
        const auto& m = (*messages)[i];
        if (!m.is_object())
            bad_request("messages[" + std::to_string(i) + "] must be an object", "messages");
        nlohmann::ordered_json out = m;
        const std::string role = checked_role(m, i);
        out["role"] = role;
        out["content"] = checked_content(m, role, i);
        r.messages.push_back(std::move(out));
    }
    if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
        read_tools(*tools, r, "tools");
    }
    read_tool_choice(body, r);
    check_tool_choice(r, "tool_choice");
    r.parallel_tool_calls = get_bool(body, "parallel_tool_calls").value_or(true);
    read_output_format(body, r);
    if (!r.grammar.empty() &&
        (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction)) {
        bad_request("a required tool call cannot be combined with '" + r.grammar_param + "'",
                    "tool_choice");
    }
    if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
        if (!kw->is_object())
            bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
        r.template_kwargs = *kw;
    }
    return r;
}

CompletionRequest parse_completion_request(const std::string& text) {
    const nlohmann::json body = parse_json_object(text);
    CompletionRequest r;
    read_common(body, r, /*chat=*/false);
    read_output_format(nlohmann::ordered_json::parse(text), r);
    auto prompt = body.find("prompt");
    if (prompt == body.end() || prompt->is_null()) bad_request("'prompt' is missing", "prompt");
    // A one-element batch is the same as its element; several prompts would need n choices.
    nlohmann::json p = *prompt;
    if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array()))
        p = nlohmann::json(p[0]);
    if (p.is_string()) {
        r.prompt_text = p.get<std::string>();
    } else if (p.is_array() && !p.empty() && p[0].is_number()) {
        r.prompt_is_tokens = true;
        for (const auto& id : p) {
            if (!id.is_number_integer() && !id.is_number_unsigned()) {
                bad_request("'prompt' token ids must be integers", "prompt");
            }
            const int64_t v =
                id.is_number_unsigned()
                    ? static_cast<int64_t>(std::min<uint64_t>(id.get<uint64_t>(), INT32_MAX))
                    : id.get<int64_t>();
            if (v < 0 || v > INT32_MAX)
                bad_request("'prompt' token id " + std::to_string(v) + " is out of range",
                            "prompt");
            r.prompt_tokens.push_back(static_cast<int32_t>(v));
        }
    } else if (p.is_array() && p.size() > 1) {
        bad_request("only one prompt per request is supported", "prompt");
    } else {
        bad_request("'prompt' must be a string or an array of token ids", "prompt");
    }
    if (auto echo = get_bool(body, "echo"); echo && *echo) {
        if (r.logprobs >= 0) {
            bad_request("'echo' with 'logprobs' is not supported (the prompt tokens' log "
                        "probabilities are not computed)",
                        "echo");
        }
        r.echo = true;
    }
    if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty()) {
        bad_request("'suffix' is not supported", "suffix");
    }
    if (auto best = get_integer(body, "best_of", 1, 1 << 20); best && *best != 1) {
        bad_request("only 'best_of' = 1 is supported", "best_of");
    }
    return r;
}

}  // namespace tandem::server
