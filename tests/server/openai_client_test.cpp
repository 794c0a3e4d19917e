// The official openai npm client against `tandem serve` (tests/node/openai_server_test.mjs):
// non-stream and stream, stop strings, usage, errors as exceptions, API keys, eight concurrent
// streams equal to their solo runs, a client that disconnects mid-stream; tool calls through
// each tool-call format (Qwen3's template, Llama 3.1's, and a template that renders no tools),
// structured output validated against its schema, and a second chat turn served from the
// prefix cache with the reply it gets without.
#include <gtest/gtest.h>

#include <string>

#include "server_process.h"
#include "support/oracle.h"

namespace tandem::testing {
namespace {

void run_scenario(const ServerProcess& server, const std::string& scenario,
                  const std::string& api_key = {}) {
    run_node_scenario(server, "openai_server_test.mjs", scenario, api_key);
}

TEST(OpenAiClient, ChatCompletionsStreamingStopsUsageAndErrors) {
    ServerProcess server({"--parallel", "2", "--ctx", "1024"});
    run_scenario(server, "api");
}

TEST(OpenAiClient, ApiKey) {
    ServerProcess server({"--api-key", "sesame"});
    run_scenario(server, "auth", "sesame");
}

TEST(OpenAiClient, EightConcurrentStreamsEqualSoloRuns) {
    ServerProcess server({"--parallel", "8", "--ctx", "512", "--batch", "64"});
    run_scenario(server, "concurrent");
}

TEST(OpenAiClient, DisconnectMidStreamFreesTheSlot) {
    ServerProcess server({"--parallel", "1", "--queue", "0", "--ctx", "16384"});
    run_scenario(server, "disconnect");
}

// Hermes <tool_call> JSON, rendered by Qwen3's template.
TEST(OpenAiClient, ToolCallsQwen3Template) {
    ServerProcess server(
        {"--parallel", "4", "--ctx", "4096", "--chat-template", qwen3_template_path()});
    EXPECT_NE(server.log().find("tool calls: hermes format"), std::string::npos) << server.log();
    run_scenario(server, "tools");
}

// Llama 3.1's JSON calls, rendered by its template.
TEST(OpenAiClient, ToolCallsLlama31Template) {
    ServerProcess server({"--parallel", "4", "--ctx", "4096", "--chat-template",
                          vendored_template_path("llama3_1_tools")});
    EXPECT_NE(server.log().find("tool calls: llama3_json format"), std::string::npos)
        << server.log();
    run_scenario(server, "tools");
}

// The test model's ChatML template renders no tools: they go into a system prompt.
TEST(OpenAiClient, ToolCallsTemplateWithoutTools) {
    ServerProcess server({"--parallel", "4", "--ctx", "4096"});
    EXPECT_NE(server.log().find("the template renders no tools"), std::string::npos)
        << server.log();
    run_scenario(server, "tools");
}

TEST(OpenAiClient, StructuredOutputValidatesAgainstTheSchema) {
    ServerProcess server({"--parallel", "6", "--ctx", "2048"});
    run_scenario(server, "structured");
}

TEST(OpenAiClient, SecondTurnReusesThePrefixCache) {
    ServerProcess server({"--parallel", "1", "--ctx", "2048"});
    run_scenario(server, "prefix");
}

}  // namespace
}  // namespace tandem::testing
