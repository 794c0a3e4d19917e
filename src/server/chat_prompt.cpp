// Chat messages to prompt tokens.
#include "server/chat_prompt.h"

#include "base/error.h"

namespace tandem::server {
namespace {

constexpr const char* kProbeTool = "tandem_probe_tool_7f3a";

std::string special_text(const Tokenizer& tokenizer, TokenId id) {
    return id >= 0 && id < tokenizer.n_tokens()
               ? tokenizer.token_to_piece(id, /*render_special=*/true)
               : std::string();
}

ChatTemplate parse(const std::string& source, const std::string& origin,
                   const Tokenizer& tokenizer) {
    try {
        return ChatTemplate(source, special_text(tokenizer, tokenizer.bos()),
                            special_text(tokenizer, tokenizer.eos()));
    } catch (const Error& e) {
        fail("chat template ({}): {}", origin, e.what());
    }
}

}  // namespace

ChatPrompt::ChatPrompt(const std::string& source, const std::string& origin,
                       const Tokenizer& tokenizer)
    : template_(parse(source, origin, tokenizer)),
      tool_format_(&tool_call_format_for_template(source)),
      source_(source),
      origin_(origin),
      tokenizer_(tokenizer) {
    const nlohmann::ordered_json probe =
        nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}}});
    try {
        if (render(probe, nullptr, nullptr).empty()) fail("renders a conversation as nothing");
    } catch (const Error& e) {
        fail("chat template ({}) cannot render a one-message conversation: {}", origin, e.what());
    }
    // Does the template show the model its tools? (Many templates ignore them.)
    const nlohmann::ordered_json tools = nlohmann::ordered_json::array(
        {{{"type", "function"},
          {"function",
           {{"name", kProbeTool},
            {"description", "probe"},
            {"parameters",
             {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}}}}}}});
    try {
        renders_tools_ = render(probe, tools, nullptr).find(kProbeTool) != std::string::npos;
    } catch (const Error&) {
        renders_tools_ = false;
    }
}

std::string ChatPrompt::render_chat(const nlohmann::ordered_json& messages,
                                    const nlohmann::ordered_json& tools,
                                    const nlohmann::ordered_json& extra_context) const {
    using ojson = nlohmann::ordered_json;
    const bool describe_tools = !tools.is_null() && !renders_tools_;
    ojson out = ojson::array();
    for (const ojson& m : messages) {
        ojson message = m;
        // An assistant turn that only calls tools has null content; templates test it with
        // `in` and string methods (Qwen3's does), which fail on null (llama.cpp also sends "").
        if (message.contains("content") && message["content"].is_null()) message["content"] = "";
        // A template that reads past reasoning under another name gets it there (gpt-oss's
        // reads `thinking`, and refuses both content and thinking beside a call, so the call's
        // turn keeps the reasoning, as llama.cpp does).
        // (Read from `m`: adding a key to the ordered object `message` may move its values.)
        const auto reasoning = m.find("reasoning_content");
        if (tool_format_->reasoning_field && reasoning != m.end() && reasoning->is_string()) {
            const auto c = m.find("tool_calls");
            const bool has_calls = c != m.end() && c->is_array() && !c->empty();
            message[tool_format_->reasoning_field] = *reasoning;
            if (has_calls && tool_format_->call_turns_drop_content_beside_reasoning)
                message.erase("content");
        }
        // Found after the last key added to `message`.
        const auto calls = message.find("tool_calls");
        if (calls != message.end() && calls->is_array()) {
            std::vector<ToolCall> written;
            for (ojson& call : *calls) {
                if (!call.is_object()) continue;
                auto fn = call.find("function");
                if (fn == call.end() || !fn->is_object()) continue;
                // OpenAI sends arguments as a JSON string; templates iterate or re-dump them.
                auto args = fn->find("arguments");
                if (args != fn->end() && args->is_string()) {
                    ojson parsed = ojson::parse(args->get<std::string>(), nullptr, false);
                    if (parsed.is_object()) *args = std::move(parsed);
                }
                if (describe_tools && fn->contains("name") && (*fn)["name"].is_string()) {
                    const ojson a = args != fn->end() ? *args : ojson::object();
                    written.push_back({(*fn)["name"].get<std::string>(),
                                       a.is_string() ? a.get<std::string>() : a.dump()});
                }
            }
            if (describe_tools) {
                std::string content =
                    message["content"].is_string() ? message["content"].get<std::string>() : "";
                const std::string text = tool_format_->render_calls(written);
                message["content"] = content.empty() ? text : content + "\n" + text;
                message.erase("tool_calls");
            }
        }
        if (describe_tools && message.value("role", "") == "tool") {
            // Templates that know no tools may refuse the role: the result as a user turn.
            message = {{"role", "user"},
                       {"content",
                        "<tool_response>\n" +
                            (message["content"].is_string() ? message["content"].get<std::string>()
                                                            : std::string()) +
                            "\n</tool_response>"}};
        }
        out.push_back(std::move(message));
    }
    if (!describe_tools) return render(out, tools, extra_context);
    // The tools in a system prompt, after the client's own system prompt if there is one.
    const std::string described = tool_format_->system_prompt(tools);
    if (!out.empty() && out[0].value("role", "") == "system" && out[0]["content"].is_string()) {
        out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + described;
    } else {
        out.insert(out.begin(), ojson{{"role", "system"}, {"content", described}});
    }
    return render(out, nullptr, extra_context);
}

std::string ChatPrompt::render(const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools,
                               const nlohmann::ordered_json& extra_context,
                               bool add_generation_prompt) const {
    return template_.render(messages, tools, add_generation_prompt, extra_context);
}

std::vector<int32_t> ChatPrompt::tokenize(const std::string& text) const {
    std::vector<int32_t> tokens =
        tokenizer_.encode(text, /*add_special=*/false, /*parse_special=*/true);
    // Templates usually write {{ bos_token }} themselves; adding another would double it.
    if (tokenizer_.add_bos() && tokenizer_.bos() >= 0 &&
        (tokens.empty() || tokens.front() != tokenizer_.bos())) {
        tokens.insert(tokens.begin(), tokenizer_.bos());
    }
    return tokens;
}

}  // namespace tandem::server
