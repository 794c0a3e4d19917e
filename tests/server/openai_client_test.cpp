// The official openai npm client against `tandem serve` (tests/node/openai_server_test.mjs):
// non-stream and stream, stop strings, usage, errors as exceptions, API keys, eight concurrent
// streams equal to their solo runs, and a client that disconnects mid-stream.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "server_process.h"
#include "support/oracle.h"

namespace tandem::testing {
namespace {

const std::string kNodeDir = std::string(TANDEM_SOURCE_DIR) + "/tests/node";

// Runs one scenario of the node script against the server; its output explains a failure.
void run_scenario(const ServerProcess& server, const std::string& scenario,
                  const std::string& api_key = {}) {
    ASSERT_TRUE(std::filesystem::exists(kNodeDir + "/node_modules/openai/package.json"))
        << "the openai npm package is missing: run tests/node/setup.sh";
    std::string cmd = "cd " + shell_quote(kNodeDir) +
                      " && timeout 300 node openai_server_test.mjs --base " +
                      shell_quote(server.base()) + " --model " + shell_quote(served_model_id()) +
                      " --scenario " + scenario;
    if (!api_key.empty()) cmd += " --api-key " + shell_quote(api_key);
    std::string out;
    const int status = run_command(cmd, &out);
    std::printf("%s", out.c_str());
    EXPECT_EQ(status, 0) << out << "\nserver log:\n" << server.log();
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

}  // namespace
}  // namespace tandem::testing
