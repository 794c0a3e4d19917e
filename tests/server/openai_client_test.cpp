// The official openai npm client against `tandem serve` (tests/node/openai_server_test.mjs):
// non-stream and stream, stop strings, usage, errors as exceptions, API keys, eight concurrent
// streams equal to their solo runs, a client that disconnects mid-stream; tool calls through
// each tool-call format (Qwen3's template, Llama 3.1's, and a template that renders no tools),
// structured output validated against its schema, a second chat turn served from the prefix
// cache with the reply it gets without (from a slot, and from host memory when conversations
// outnumber the slots), and a long shared prefix computed once: the second request computes only
// its new tokens and its first token comes several times sooner.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server_process.h"
#include "support/oracle.h"

namespace tandem::testing {
namespace {

void run_scenario(const ServerProcess& server, const std::string& scenario,
                  const std::string& api_key = {}, const std::vector<std::string>& extra = {}) {
    run_node_scenario(server, "openai_server_test.mjs", scenario, api_key, extra);
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

// Qwen3-Coder's XML calls, rendered by its template.
TEST(OpenAiClient, ToolCallsQwen3CoderTemplate) {
    ServerProcess server({"--parallel", "4", "--ctx", "4096", "--chat-template",
                          vendored_template_path("qwen3_coder")});
    EXPECT_NE(server.log().find("tool calls: qwen3_coder format"), std::string::npos)
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

// The slots only: a request of another conversation takes the slot and its kept tokens are gone.
TEST(OpenAiClient, SecondTurnReusesThePrefixCache) {
    ServerProcess server({"--parallel", "1", "--ctx", "2048", "--cache-mem", "0"});
    run_scenario(server, "prefix");
}

// Two conversations on one slot: the prefix cache in host memory keeps the one that is not in
// the slot; the replies are those of a server that computes every prompt whole.
TEST(OpenAiClient, ConversationsBeyondTheSlotsComeBackFromHostMemory) {
    ServerProcess server({"--parallel", "1", "--ctx", "2048"});
    ServerProcess reference({"--parallel", "1", "--ctx", "2048", "--cache-reuse", "off"});
    EXPECT_NE(server.log().find("prefix cache:"), std::string::npos) << server.log();
    run_scenario(server, "hostcache", {}, {"--reference", reference.base()});
}

TEST(OpenAiClient, SharedLongPrefixComputesOnlyTheNewTokensAndAnswersSooner) {
    ServerProcess server({"--parallel", "1", "--ctx", "8192"});
    run_scenario(server, "prefixspeed");
}

}  // namespace
}  // namespace tandem::testing
