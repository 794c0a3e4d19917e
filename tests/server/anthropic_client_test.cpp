// The official @anthropic-ai/sdk client against `tandem serve`
// (tests/node/anthropic_server_test.mjs): messages whole and streamed, system prompts, stop
// sequences, token counting, errors in Anthropic's shape, tool use with a round trip through a
// tool result, and the x-api-key header.
#include <gtest/gtest.h>

#include <string>

#include "server_process.h"

namespace tandem::testing {
namespace {

void run_scenario(const ServerProcess& server, const std::string& scenario,
                  const std::string& api_key = {}) {
    run_node_scenario(server, "anthropic_server_test.mjs", scenario, api_key);
}

TEST(AnthropicClient, MessagesWholeStreamedStopsAndErrors) {
    ServerProcess server({"--parallel", "2", "--ctx", "1024"});
    run_scenario(server, "messages");
}

TEST(AnthropicClient, ToolUseQwen3Template) {
    ServerProcess server(
        {"--parallel", "2", "--ctx", "4096", "--chat-template", qwen3_template_path()});
    run_scenario(server, "tools");
}

TEST(AnthropicClient, ToolUseTemplateWithoutTools) {
    ServerProcess server({"--parallel", "2", "--ctx", "4096"});
    run_scenario(server, "tools");
}

TEST(AnthropicClient, ApiKeyHeader) {
    ServerProcess server({"--api-key", "sesame"});
    run_scenario(server, "auth", "sesame");
}

}  // namespace
}  // namespace tandem::testing
