// gpt-oss's harmony replies through `tandem serve` with gpt-oss's chat template: the analysis
// channel comes back as reasoning_content and the final one as content (whole and as stream
// deltas kept apart), a call to a function as tool_calls, a forced call held to the harmony call
// grammar, and past calls with their reasoning rendered back through the template. The test
// model's vocabulary spells the markers in plain bytes; `grammar` makes it write a given reply.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "The weather in a city"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                           {"required", {"city"}}}}}}};

// A GBNF grammar that admits exactly `text`.
std::string exactly(const std::string& text) {
    return "root ::= " + json(text).dump();
}

class Harmony : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = new ServerProcess({"--parallel", "2", "--ctx", "4096", "--chat-template",
                                     vendored_template_path("gpt_oss")});
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static json chat(json body) {
        body["messages"] =
            body.value("messages", json::array({{{"role", "user"}, {"content", "Weather?"}}}));
        const HttpResponse r =
            http_request("POST", server_->url("/v1/chat/completions"), body.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body, nullptr, false);
    }
    // The stream's deltas, each a JSON object, in order.
    static std::vector<json> stream(json body) {
        body["stream"] = true;
        body["messages"] = json::array({{{"role", "user"}, {"content", "Weather?"}}});
        const HttpResponse r =
            http_request("POST", server_->url("/v1/chat/completions"), body.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        std::vector<json> deltas;
        std::istringstream lines(r.body);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("data: {", 0) != 0) continue;
            const json chunk = json::parse(line.substr(6));
            if (!chunk["choices"].empty()) deltas.push_back(chunk["choices"][0]);
        }
        return deltas;
    }
    static ServerProcess* server_;
};
ServerProcess* Harmony::server_ = nullptr;

const std::string kReply =
    "<|channel|>analysis<|message|>The user asks about <b>weather</b>; no tool.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>It is sunny.";

TEST_F(Harmony, TemplateChoosesTheHarmonyFormat) {
    EXPECT_NE(server_->log().find("tool calls: harmony format"), std::string::npos)
        << server_->log();
}

TEST_F(Harmony, AnalysisIsReasoningAndFinalIsContent) {
    const json r = chat({{"grammar", exactly(kReply)}, {"max_tokens", 200}});
    const json& m = r["choices"][0]["message"];
    EXPECT_EQ(m["content"], "It is sunny.") << r.dump();
    EXPECT_EQ(m["reasoning_content"], "The user asks about <b>weather</b>; no tool.") << r.dump();
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");

    std::string content, reasoning;
    for (const json& choice : stream({{"grammar", exactly(kReply)}, {"max_tokens", 200}})) {
        const json& d = choice["delta"];
        EXPECT_FALSE(d.contains("content") && d.contains("reasoning_content")) << d.dump();
        if (d.contains("content")) content += d["content"].get<std::string>();
        if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    }
    EXPECT_EQ(content, "It is sunny.");
    EXPECT_EQ(reasoning, "The user asks about <b>weather</b>; no tool.");
}

TEST_F(Harmony, CallsBecomeToolCalls) {
    const std::string call =
        "<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}";
    const json r = chat({{"grammar", exactly(call)}, {"tools", {kWeather}}, {"max_tokens", 200}});
    const json& m = r["choices"][0]["message"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
    EXPECT_TRUE(m["content"].is_null()) << r.dump();
    EXPECT_EQ(m["reasoning_content"], "Need it.");
    ASSERT_EQ(m["tool_calls"].size(), 1u) << r.dump();
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");

    // Streamed: the id and name, then the arguments; nothing of the markers as content.
    std::string names, args;
    for (const json& choice :
         stream({{"grammar", exactly(call)}, {"tools", {kWeather}}, {"max_tokens", 200}})) {
        const json& d = choice["delta"];
        if (d.contains("content")) {
            EXPECT_EQ(d["content"], "") << d.dump();
        }
        if (!d.contains("tool_calls")) continue;
        const json& f = d["tool_calls"][0]["function"];
        if (f.contains("name")) names += f["name"].get<std::string>();
        args += f.value("arguments", "");
    }
    EXPECT_EQ(names, "get_weather");
    EXPECT_EQ(args, R"({"city":"Oslo"})");

    // Without tools a call is text, and the reply ends as any other.
    const json plain = chat({{"grammar", exactly(call)}, {"max_tokens", 200}});
    EXPECT_EQ(plain["choices"][0]["finish_reason"], "stop");
    EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
}

// tool_choice "required" holds the random model to the call grammar: whatever reasoning it
// writes first, when it stops the call parses and fits the schema.
TEST_F(Harmony, RequiredCallFollowsTheGrammar) {
    int calls = 0;
    for (int seed = 1; seed <= 6; ++seed) {
        const json r = chat({{"tools", {kWeather}},
                             {"tool_choice", "required"},
                             {"max_tokens", 300},
                             {"seed", seed}});
        const json& choice = r["choices"][0];
        const json& m = choice["message"];
        if (choice["finish_reason"] == "length") continue;  // still reasoning
        ++calls;
        EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.dump();
        ASSERT_EQ(m["tool_calls"].size(), 1u) << r.dump();
        EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
        const json args =
            json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>());
        EXPECT_TRUE(args["city"].is_string()) << r.dump();
        const std::string city = args["city"].get<std::string>();
        const auto code_points =
            std::count_if(city.begin(), city.end(), [](char c) { return (c & 0xC0) != 0x80; });
        EXPECT_LE(code_points, 12) << city;
    }
    EXPECT_GT(calls, 0);
    std::printf("harmony: %d of 6 forced replies reached their call in 300 tokens\n", calls);
}

// A schema (response_format) holds the final channel's message, after any reasoning or
// preamble, as llama.cpp does for gpt-oss: each reply is read as harmony messages (its headers
// never reach the content), and one that ends holds a JSON object of the schema. Held to the
// schema whole, as a raw `grammar` would hold it, every reply would be the bare object at once;
// this random model, given the headers, talks on in its first channel instead.
TEST_F(Harmony, ResponseFormatHoldsTheFinalMessage) {
    const json format = {
        {"type", "json_schema"},
        {"json_schema",
         {{"name", "weather"},
          {"schema",
           {{"type", "object"},
            {"properties", {{"sky", {{"type", "string"}, {"enum", {"sunny", "rainy"}}}}}},
            {"required", {"sky"}},
            {"additionalProperties", false}}}}}};
    int headed = 0, ended = 0;
    for (int seed = 1; seed <= 12; ++seed) {
        const json r = chat({{"response_format", format}, {"max_tokens", 200}, {"seed", seed}});
        const json& m = r["choices"][0]["message"];
        const std::string content = m.value("content", "");
        const std::string reasoning = m.value("reasoning_content", "");
        EXPECT_EQ(content.find("<|"), std::string::npos) << r.dump();
        EXPECT_EQ(reasoning.find("<|"), std::string::npos) << r.dump();
        if (!reasoning.empty() || content.substr(0, 1) != "{") ++headed;
        if (r["choices"][0]["finish_reason"] == "stop") {
            ++ended;
            const json answer = json::parse(content, nullptr, false);
            ASSERT_TRUE(answer.is_object()) << r.dump();
            EXPECT_TRUE(answer["sky"] == "sunny" || answer["sky"] == "rainy") << r.dump();
        }
    }
    EXPECT_GT(headed, 0);
    // Some replies end (2 of 12 with every CPU kernel set), so the schema check above is not
    // vacuous.
    EXPECT_GT(ended, 0);
    std::printf("harmony: %d of 12 schema-held replies ended in 200 tokens\n", ended);
}

// A past call (with its reasoning, as clients send it back) and its result go back through the
// template: gpt-oss's refuses content beside reasoning in a call's turn, so the reasoning is
// given as `thinking` and the content left out, as llama.cpp does.
TEST_F(Harmony, PastCallsGoBackThroughTheTemplate) {
    const json messages = json::array(
        {{{"role", "user"}, {"content", "Weather in Oslo?"}},
         {{"role", "assistant"},
          {"content", "Let me check."},
          {"reasoning_content", "Need the weather."},
          {"tool_calls",
           {{{"id", "call_1"},
             {"type", "function"},
             {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Oslo"})"}}}}}}},
         {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}});
    const json r = chat({{"messages", messages},
                         {"tools", {kWeather}},
                         {"grammar", exactly(kReply)},
                         {"max_tokens", 200}});
    EXPECT_EQ(r["choices"][0]["message"]["content"], "It is sunny.") << r.dump();
    // The rendered prompt differs from the one without the past turn's reasoning.
    json without = messages;
    without[1].erase("reasoning_content");
    const json r2 = chat({{"messages", without},
                          {"tools", {kWeather}},
                          {"grammar", exactly(kReply)},
                          {"max_tokens", 200}});
    EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 0);
    EXPECT_NE(r["usage"]["prompt_tokens"], r2["usage"]["prompt_tokens"]);
    // The template renders a call turn's content, when it has no thinking, as its analysis: the
    // reasoning given as content makes the same prompt as the reasoning given as reasoning.
    json as_content = without;
    as_content[1]["content"] = "Need the weather.";
    const json r3 = chat({{"messages", as_content},
                          {"tools", {kWeather}},
                          {"grammar", exactly(kReply)},
                          {"max_tokens", 200}});
    EXPECT_EQ(r["usage"]["prompt_tokens"], r3["usage"]["prompt_tokens"]);
}

}  // namespace
}  // namespace tandem::testing
