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
        "stream_options": {"include_usage": true}, "n": 1, "presence_penalty": 0.5, "frequency_penalty": -1.25, "user": "u", "ignore_eos": true,
        "logit_bias": {"5": -2.5, "7": 100},
        "tools": [{"type": "function", "function": {"name": "f"}}], "chat_template_kwargs": {"enable_thinking": false}})");
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.sampling.temperature, 0.0f);
    EXPECT_EQ(r.sampling.top_p, 0.5f);
    EXPECT_EQ(r.sampling.top_k, 7);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
    EXPECT_EQ(r.sampling.seed, UINT64_MAX);
    EXPECT_EQ(r.sampling.presence_penalty, 0.5f);
    EXPECT_EQ(r.sampling.frequency_penalty, -1.25f);
    EXPECT_EQ(r.logprobs, -1);
    EXPECT_EQ(r.n, 1);
    EXPECT_EQ(parse_chat_request("{" + kUser + R"(, "n": 16})").n, 16);
    EXPECT_EQ(parse_chat_request("{" + kUser + R"(, "logprobs": true})").logprobs, 0);
    EXPECT_EQ(parse_chat_request("{" + kUser + R"(, "logprobs": true, "top_logprobs": 3})").logprobs,
              3);
    EXPECT_EQ(parse_completion_request(R"({"prompt": "a", "logprobs": 5})").logprobs, 5);
    EXPECT_EQ(r.sampling.logit_bias,
              (std::vector<std::pair<int32_t, float>>{{5, -2.5f}, {7, 100.0f}}));
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
    EXPECT_EQ(param_of("{" + kUser + R"(, "response_format": {"type": "xml"}})"),
              "response_format");
    EXPECT_EQ(param_of("{" + kUser + R"(, "n": 17})"), "n");
    EXPECT_EQ(param_of("{" + kUser + R"(, "top_logprobs": 2})"), "top_logprobs");
    EXPECT_EQ(param_of("{" + kUser + R"(, "logprobs": true, "top_logprobs": 21})"),
              "top_logprobs");
    EXPECT_EQ(param_of("{" + kUser + R"(, "logprobs": 2})"), "logprobs");
    for (const char* bias : {R"({"x": 2})", R"({"-1": 2})", R"({"1": 100.5})", R"({"1": "a"})",
                             R"([1, 2])", R"({"1x": 2})"}) {
        EXPECT_EQ(param_of("{" + kUser + R"(, "logit_bias": )" + bias + "}"), "logit_bias")
            << bias;
    }
    EXPECT_EQ(
        status_of(
            "{" + kUser +
            R"(, "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})"),
        400);
    EXPECT_EQ(status_of("{"), 400);
    EXPECT_EQ(status_of("[]"), 400);
    EXPECT_EQ(status_of("\"text\""), 400);
}

const std::string kTools = R"("tools": [
    {"type": "function", "function": {"name": "get_weather", "description": "d",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])";

TEST(CompletionRequest, ToolsAndToolChoice) {
    CompletionRequest r = parse_chat_request("{" + kUser + ", " + kTools + "}");
    ASSERT_EQ(r.tool_specs.size(), 2u);
    EXPECT_EQ(r.tool_specs[0].name, "get_weather");
    EXPECT_EQ(r.tool_specs[0].parameters["required"][0], "city");
    EXPECT_TRUE(r.tool_specs[1].parameters.is_null());
    // The client's property order is kept (templates print schemas as given).
    EXPECT_EQ(r.tools[0]["function"]["parameters"].begin().key(), "type");
    EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
    EXPECT_TRUE(r.parallel_tool_calls);
    EXPECT_EQ(
        parse_chat_request("{" + kUser + ", " + kTools + R"(, "tool_choice": "none"})").tool_choice,
        ToolChoice::kNone);
    r = parse_chat_request("{" + kUser + ", " + kTools +
                           R"(, "tool_choice": "required", "parallel_tool_calls": false})");
    EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
    EXPECT_FALSE(r.parallel_tool_calls);
    r = parse_chat_request(
        "{" + kUser + ", " + kTools +
        R"(, "tool_choice": {"type": "function", "function": {"name": "now"}}})");
    EXPECT_EQ(r.tool_choice, ToolChoice::kFunction);
    EXPECT_EQ(r.tool_name, "now");

    EXPECT_EQ(param_of("{" + kUser + R"(, "tool_choice": "required"})"), "tool_choice");
    EXPECT_EQ(param_of("{" + kUser + ", " + kTools + R"(, "tool_choice": "sometimes"})"),
              "tool_choice");
    EXPECT_EQ(param_of("{" + kUser + ", " + kTools +
                       R"(, "tool_choice": {"type": "function", "function": {"name": "later"}}})"),
              "tool_choice");
    EXPECT_EQ(param_of("{" + kUser + R"(, "tools": [{"type": "retrieval"}]})"), "tools");
    EXPECT_EQ(param_of("{" + kUser + R"(, "tools": [{"type": "function", "function": {}}]})"),
              "tools");
    EXPECT_EQ(
        param_of(
            "{" + kUser +
            R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})"),
        "tools");
    EXPECT_EQ(param_of("{" + kUser +
                       R"(, "tools": [{"function": {"name": "f"}}, {"function": {"name": "f"}}]})"),
              "tools");
    EXPECT_EQ(
        param_of("{" + kUser + ", " + kTools +
                 R"(, "tool_choice": "required", "response_format": {"type": "json_object"}})"),
        "tool_choice");
}

TEST(CompletionRequest, OutputFormatsBecomeGrammars) {
    EXPECT_TRUE(parse_chat_request("{" + kUser + "}").grammar.empty());
    EXPECT_TRUE(parse_chat_request("{" + kUser + R"(, "response_format": {"type": "text"}})")
                    .grammar.empty());
    CompletionRequest r =
        parse_chat_request("{" + kUser + R"(, "response_format": {"type": "json_object"}})");
    EXPECT_NE(r.grammar.find("root ::= object"), std::string::npos) << r.grammar;
    EXPECT_EQ(r.grammar_param, "response_format");
    r = parse_chat_request("{" + kUser + R"(, "response_format": {"type": "json_schema",
        "json_schema": {"name": "n", "strict": true, "schema": {"type": "object",
        "properties": {"b": {"type": "boolean"}, "a": {"type": "integer"}}, "required": ["b", "a"]}}}})");
    // Properties in the schema's order, not sorted.
    const std::string object_rule = r.grammar.substr(r.grammar.find("schema ::="));
    EXPECT_LT(object_rule.find("schema-b-kv"), object_rule.find("schema-a-kv")) << r.grammar;
    r = parse_completion_request(R"({"prompt": "x", "json_schema": {"type": "integer"}})");
    EXPECT_EQ(r.grammar_param, "json_schema");
    r = parse_completion_request(R"({"prompt": "x", "grammar": "root ::= \"yes\" | \"no\""})");
    EXPECT_EQ(r.grammar, R"(root ::= "yes" | "no")");
    EXPECT_EQ(r.grammar_param, "grammar");

    EXPECT_EQ(param_of("{" + kUser + R"(, "response_format": {"type": "json_schema"}})"),
              "response_format");
    // A schema the grammar cannot enforce is refused, naming the field and the keyword.
    try {
        parse_chat_request("{" + kUser + R"(, "response_format": {"type": "json_schema",
            "json_schema": {"name": "n", "schema": {"type": "object", "properties":
            {"age": {"type": "integer", "minimum": 0}}}}}})");
        ADD_FAILURE() << "accepted";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.param(), "response_format");
        EXPECT_NE(std::string(e.what()).find("'minimum' is not supported"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(param_of("{" + kUser + R"(, "grammar": 3})"), "grammar");
    EXPECT_EQ(
        param_of("{" + kUser +
                 R"(, "response_format": {"type": "json_object"}, "grammar": "root ::= \"a\""})"),
        "grammar");
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
