// Anthropic Messages requests read into chat requests without HTTP: system prompts, content
// blocks, tool_use and tool_result turns, tools and tool_choice, sampling and stop sequences;
// a 400 naming the field for each wrong one; errors in Anthropic's shape.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/anthropic_api.h"
#include "server/api_error.h"

namespace tandem::server {
namespace {

std::string param_of(const std::string& body, bool count_only = false) {
    try {
        parse_messages_request(body, count_only);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        return e.param();
    }
    return "(none)";
}

TEST(AnthropicRequest, SystemBlocksAndTools) {
    const CompletionRequest r = parse_messages_request(R"({
      "model": "m", "max_tokens": 100, "temperature": 0.5, "top_p": 0.9, "top_k": 5, "stream": true,
      "stop_sequences": ["END", "STOP"], "metadata": {"user_id": "u"},
      "system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
      "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object",
                 "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
      "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
      "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [
          {"type": "thinking", "thinking": "hmm", "signature": "s"},
          {"type": "text", "text": "Checking."},
          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "21 C"}]},
          {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true},
          {"type": "text", "text": "And tomorrow?"}]}]})");
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.max_tokens, 100);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 5);
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"END", "STOP"}));
    ASSERT_EQ(r.tool_specs.size(), 1u);
    EXPECT_EQ(r.tool_specs[0].name, "get_weather");
    EXPECT_EQ(r.tools[0]["function"]["parameters"]["required"][0], "city");
    EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
    EXPECT_FALSE(r.parallel_tool_calls);

    const auto& m = r.messages;
    ASSERT_EQ(m.size(), 6u) << m.dump(2);
    EXPECT_EQ(m[0], (nlohmann::ordered_json{{"role", "system"}, {"content", "Be brief."}}));
    EXPECT_EQ(m[1]["role"], "user");
    EXPECT_EQ(m[2]["role"], "assistant");
    EXPECT_EQ(m[2]["content"], "Checking.");
    EXPECT_EQ(m[2]["tool_calls"][0]["id"], "toolu_1");
    EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");
    EXPECT_EQ(m[3], (nlohmann::ordered_json{
                        {"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "21 C"}}));
    EXPECT_EQ(m[4]["content"], "Error: boom");
    EXPECT_EQ(m[5], (nlohmann::ordered_json{{"role", "user"}, {"content", "And tomorrow?"}}));
}

TEST(AnthropicRequest, ToolChoices) {
    const std::string tools = R"("tools": [{"name": "f", "input_schema": {"type": "object"}}])";
    auto choice = [&](const std::string& c) {
        return parse_messages_request(
            R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], )" + tools +
            ", \"tool_choice\": " + c + "}");
    };
    EXPECT_EQ(choice(R"({"type": "auto"})").tool_choice, ToolChoice::kAuto);
    EXPECT_TRUE(choice(R"({"type": "auto"})").parallel_tool_calls);
    EXPECT_EQ(choice(R"({"type": "none"})").tool_choice, ToolChoice::kNone);
    const CompletionRequest named = choice(R"({"type": "tool", "name": "f"})");
    EXPECT_EQ(named.tool_choice, ToolChoice::kFunction);
    EXPECT_EQ(named.tool_name, "f");
}

TEST(AnthropicRequest, BadFieldsAre400NamingTheField) {
    const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
    EXPECT_EQ(param_of("{" + user + "}"), "max_tokens");
    EXPECT_EQ(param_of("{" + user + "}", /*count_only=*/true), "(none)");
    EXPECT_EQ(param_of(R"({"max_tokens": 5})"), "messages");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "messages": []})"), "messages");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})"),
              "messages");
    EXPECT_EQ(param_of(R"({"max_tokens": 0, )" + user + "}"), "max_tokens");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "temperature": "warm", )" + user + "}"), "temperature");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "stop_sequences": "END", )" + user + "}"),
              "stop_sequences");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "stop_sequences": [""], )" + user + "}"),
              "stop_sequences");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "system": 3, )" + user + "}"), "system");
    EXPECT_EQ(
        param_of(
            R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})"),
        "messages");
    EXPECT_EQ(
        param_of(
            R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]})"),
        "messages");  // tool_use belongs to the assistant
    EXPECT_EQ(
        param_of(
            R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f"}]}]})"),
        "messages");  // no input
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "tools": [{"name": "f"}], )" + user + "}"), "tools");
    EXPECT_EQ(
        param_of(R"({"max_tokens": 5, "tools": [{"type": "bash_20250124", "name": "bash"}], )" +
                 user + "}"),
        "tools");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "tool_choice": {"type": "any"}, )" + user + "}"),
              "tool_choice");
    EXPECT_EQ(param_of(R"({"max_tokens": 5, "tool_choice": "auto", )" + user + "}"), "tool_choice");
    EXPECT_EQ(
        param_of(R"({"max_tokens": 5, "thinking": {"type": "enabled", "budget_tokens": 100}, )" +
                 user + "}"),
        "thinking");
}

TEST(AnthropicRequest, ErrorBodies) {
    const nlohmann::json e = nlohmann::json::parse(anthropic_error_body(400, "bad"));
    EXPECT_EQ(e,
              (nlohmann::json{{"type", "error"},
                              {"error", {{"type", "invalid_request_error"}, {"message", "bad"}}}}));
    EXPECT_EQ(nlohmann::json::parse(anthropic_error_body(401, "x"))["error"]["type"],
              "authentication_error");
    EXPECT_EQ(nlohmann::json::parse(anthropic_error_body(404, "x"))["error"]["type"],
              "not_found_error");
    EXPECT_EQ(nlohmann::json::parse(anthropic_error_body(413, "x"))["error"]["type"],
              "request_too_large");
    EXPECT_EQ(nlohmann::json::parse(anthropic_error_body(503, "x"))["error"]["type"],
              "overloaded_error");
    EXPECT_EQ(nlohmann::json::parse(anthropic_error_body(500, "x"))["error"]["type"], "api_error");
}

}  // namespace
}  // namespace tandem::server
