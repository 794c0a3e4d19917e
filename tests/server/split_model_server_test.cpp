// `tandem serve` on a split model: given any part it serves the whole model under the parts'
// common name, and answers exactly what it answers from the whole file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server_process.h"
#include "support/oracle.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

std::string greedy_reply(const ServerProcess& server, const std::string& text) {
    HttpResponse r = http_request(
        "POST", server.url("/v1/chat/completions"),
        json{{"messages", json::array({{{"role", "user"}, {"content", text}}})}, {"max_tokens", 12}, {"temperature", 0}}
            .dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["choices"][0]["message"]["content"];
}

TEST(SplitModelServer, ServesTheWholeModelFromAnyPart) {
    TempDir dir;
    // The served model's synth arguments (server_process.cpp), as three parts.
    std::string out;
    ASSERT_EQ(run_command(shell_quote(tandem_binary()) +
                              " synth --arch qwen3moe --layers 2 --embd 128 --heads 4 --kv-heads 2 --head-dim 32"
                              " --experts 4 --experts-used 2 --expert-ffn 64 --ctx 32768 --seed 3 --split 3 --out " +
                              shell_quote(dir.file("tiny-chat.gguf")),
                          &out),
              0)
        << out;
    ServerProcess whole({"--parallel", "1", "--ctx", "512"});
    const std::string part = dir.file("tiny-chat-00002-of-00003.gguf");
    for (const std::vector<std::string>& flags :
         {std::vector<std::string>{}, std::vector<std::string>{"--no-mmap"}, std::vector<std::string>{"--mlock"}}) {
        std::vector<std::string> args = {"--parallel", "1", "--ctx", "512"};
        args.insert(args.end(), flags.begin(), flags.end());
        ServerProcess split(args, true, {}, part);
        HttpResponse m = http_request("GET", split.url("/v1/models"));
        ASSERT_EQ(m.status, 200) << m.body;
        EXPECT_EQ(json::parse(m.body)["data"][0]["id"], "tiny-chat");
        for (const char* text : {"Hello", "What is the weather like?"}) {
            EXPECT_EQ(greedy_reply(split, text), greedy_reply(whole, text)) << text;
        }
        EXPECT_NE(split.log().find("from 3 parts in"), std::string::npos) << split.log();
    }
}

}  // namespace
}  // namespace tandem::testing
