// Reading completion request bodies without HTTP: defaults, every accepted form of the fields,
// and a 400 naming the field for each wrong one.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/completion_request.h"

namespace tandem::server {
namespace {

int status_of(const std::string& body, bool chat = true) {
    try {
        chat ? parse_chat_request(body) : parse_completion_request(body);
    } catch (const ApiError& e) {
        return e.status();
    }
    return 200;
}

std::string param_of(const std::string& body) {
    try {
        parse_chat_request(body);
    } catch (const ApiError& e) {
        return e.param();
    }
    return "(none)";
}

const std::string kUser = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(CompletionRequest, OpenAiDefaults) {
    CompletionRequest r = parse_chat_request("{" + kUser + "}");
    EXPECT_EQ(r.sampling.temperature, 1.0f);
    EXPECT_EQ(r.sampling.top_p, 1.0f);
    EXPECT_EQ(r.sampling.top_k, 0);
    EXPECT_EQ(r.sampling.min_p, 0.0f);
    EXPECT_EQ(r.max_tokens, 0);
    EXPECT_FALSE(r.stream);
    EXPECT_FALSE(r.include_usage);
    EXPECT_FALSE(r.ignore_eos);
    EXPECT_TRUE(r.stop.empty());
    EXPECT_TRUE(r.tools.is_null());
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0]["content"], "hi");
}

TEST(CompletionRequest, Fields) {
    CompletionRequest r =
        parse_chat_request("{" + kUser +
                           R"(, "model": "m", "temperature": 0, "top_p": 0.5, "top_k": 7,
        "min_p": 0.1, "seed": -1, "max_tokens": 9, "max_completion_tokens": 5, "stop": "END", "stream": true,
        "stream_options": {"include_usage": true}, "n": 1, "presence_penalty": 0, "user": "u", "ignore_eos": true,
        "tools": [{"type": "function", "function": {"name": "f"}}], "chat_template_kwargs": {"enable_thinking": false}})");
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.sampling.temperature, 0.0f);
    EXPECT_EQ(r.sampling.top_p, 0.5f);
    EXPECT_EQ(r.sampling.top_k, 7);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
    EXPECT_EQ(r.sampling.seed, UINT64_MAX);
    EXPECT_EQ(r.max_tokens, 5);  // max_completion_tokens wins
    EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    EXPECT_TRUE(r.ignore_eos);
    EXPECT_EQ(r.tools.size(), 1u);
    EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
    EXPECT_EQ(parse_chat_request("{" + kUser + R"(, "stop": ["a", "b"], "top_k": -1})").stop.size(),
              2u);
    EXPECT_EQ(
        parse_chat_request("{" + kUser + R"(, "top_k": -1, "temperature": null})").sampling.top_k,
        0);
}

TEST(CompletionRequest, MessagesAreNormalised) {
    CompletionRequest r = parse_chat_request(R"({"messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "42", "tool_call_id": "1"}]})");
    ASSERT_EQ(r.messages.size(), 4u);
    EXPECT_EQ(r.messages[0]["role"], "system");
    EXPECT_EQ(r.messages[1]["content"], "ab");
    EXPECT_TRUE(r.messages[2]["content"].is_null());
    EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["name"], "f");
    EXPECT_EQ(r.messages[3]["tool_call_id"], "1");
}

TEST(CompletionRequest, BadFieldsAre400NamingTheField) {
    EXPECT_EQ(param_of("{" + kUser + R"(, "temperature": "hot"})"), "temperature");
    EXPECT_EQ(param_of("{" + kUser + R"(, "top_p": 0})"), "top_p");
    EXPECT_EQ(param_of("{" + kUser + R"(, "max_tokens": 1.5})"), "max_tokens");
    EXPECT_EQ(param_of("{" + kUser + R"(, "stop": [""]})"), "stop");
    EXPECT_EQ(param_of("{" + kUser + R"(, "seed": 1.5})"), "seed");
    EXPECT_EQ(param_of(R"({"messages": [{"role": "robot", "content": "x"}]})"), "messages");
    EXPECT_EQ(param_of(R"({"messages": [{"role": "assistant"}]})"), "messages");
    EXPECT_EQ(param_of("{" + kUser + R"(, "tools": {}})"), "tools");
    EXPECT_EQ(param_of("{" + kUser + R"(, "response_format": {"type": "json_object"}})"),
              "response_format");
    EXPECT_EQ(param_of("{" + kUser + R"(, "logit_bias": {"1": 2}})"), "logit_bias");
    EXPECT_EQ(
        status_of(
            "{" + kUser +
            R"(, "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})"),
        400);
    EXPECT_EQ(status_of("{"), 400);
    EXPECT_EQ(status_of("[]"), 400);
    EXPECT_EQ(status_of("\"text\""), 400);
}

TEST(CompletionRequest, Prompts) {
    EXPECT_EQ(parse_completion_request(R"({"prompt": "abc"})").prompt_text, "abc");
    EXPECT_EQ(parse_completion_request(R"({"prompt": ["abc"]})").prompt_text, "abc");
    CompletionRequest ids = parse_completion_request(R"({"prompt": [1, 2, 3]})");
    EXPECT_TRUE(ids.prompt_is_tokens);
    EXPECT_EQ(ids.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(parse_completion_request(R"({"prompt": [[4, 5]]})").prompt_tokens,
              (std::vector<int32_t>{4, 5}));
    EXPECT_EQ(status_of(R"({"prompt": ["a", "b"]})", false), 400);
    EXPECT_EQ(status_of(R"({"prompt": [1, "b"]})", false), 400);
    EXPECT_EQ(status_of(R"({"prompt": [1.5]})", false), 400);
    EXPECT_EQ(status_of(R"({"prompt": []})", false), 400);
    EXPECT_EQ(status_of(R"({"prompt": {}})", false), 400);
    EXPECT_EQ(status_of(R"({"prompt": "a", "best_of": 2})", false), 400);
    EXPECT_EQ(status_of(R"({"prompt": "a", "max_completion_tokens": "x"})", false),
              200);  // chat only: ignored
}

}  // namespace
}  // namespace tandem::server
