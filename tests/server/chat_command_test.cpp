// `tandem chat` with stdin from a pipe: each line is a user message, each reply one line, and the
// replies are exactly what the server answers for the same conversation (greedy) — the chat's
// reuse of the cached prefix between turns changes nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server_process.h"
#include "support/oracle.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The server's greedy reply to `messages`, at most `n` tokens.
std::string server_reply(const ServerProcess& server, const json& messages, int n) {
    HttpResponse r =
        http_request("POST", server.url("/v1/chat/completions"),
                     json{{"messages", messages}, {"max_tokens", n}, {"temperature", 0}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["choices"][0]["message"]["content"];
}

TEST(ChatCommand, PipedTurnsMatchTheServer) {
    TempDir dir;
    const std::string out = dir.file("out"), err = dir.file("err");
    // In a subshell: run_command sends stderr to stdout after the whole command line.
    const std::string cmd = "(printf 'Hello\\n\\n/reset\\nHi there\\nAnd again\\n' | " +
                            shell_quote(tandem_binary()) + " chat -m " +
                            shell_quote(served_model_path()) +
                            " --temp 0 -n 12 --threads 2 --system 'Be brief.' > " +
                            shell_quote(out) + " 2> " + shell_quote(err) + ")";
    ASSERT_EQ(run_command(cmd), 0) << read_file(err);

    ServerProcess server({"--parallel", "1"});
    const json system = {{"role", "system"}, {"content", "Be brief."}};
    const std::string first =
        server_reply(server, json::array({system, {{"role", "user"}, {"content", "Hello"}}}), 12);
    // After /reset the conversation starts again; the third line continues the second.
    const json second_turn = json::array({system, {{"role", "user"}, {"content", "Hi there"}}});
    const std::string second = server_reply(server, second_turn, 12);
    json third_turn = second_turn;
    third_turn.push_back({{"role", "assistant"}, {"content", second}});
    third_turn.push_back({{"role", "user"}, {"content", "And again"}});
    const std::string third = server_reply(server, third_turn, 12);
    EXPECT_EQ(read_file(out), first + "\n" + second + "\n" + third + "\n");
}

TEST(ChatCommand, ClearErrors) {
    std::string output;
    EXPECT_NE(run_command(shell_quote(tandem_binary()) + " chat -m /nonexistent.gguf < /dev/null",
                          &output),
              0);
    EXPECT_NE(output.find("/nonexistent.gguf"), std::string::npos) << output;
    TempDir dir;
    const std::string bad = dir.file("bad.jinja");
    std::ofstream(bad) << "{% for m in messages %}{{ m.content }";
    EXPECT_NE(
        run_command(shell_quote(tandem_binary()) + " chat -m " + shell_quote(served_model_path()) +
                        " --chat-template " + shell_quote(bad) + " < /dev/null",
                    &output),
        0);
    EXPECT_NE(output.find("chat template"), std::string::npos) << output;
    EXPECT_NE(output.find("bad.jinja"), std::string::npos) << output;
}

TEST(ServeCommand, UnrenderableTemplateFailsAtLoad) {
    TempDir dir;
    const std::string bad = dir.file("raises.jinja");
    std::ofstream(bad) << "{{ raise_exception('no chat here') }}";
    std::string output;
    EXPECT_EQ(run_command("timeout 60 " + shell_quote(tandem_binary()) + " serve -m " +
                              shell_quote(served_model_path()) + " --port 0 --chat-template " +
                              shell_quote(bad),
                          &output),
              1);
    EXPECT_NE(output.find("no chat here"), std::string::npos) << output;
    EXPECT_NE(output.find("raises.jinja"), std::string::npos) << output;
}

}  // namespace
}  // namespace tandem::testing
