// gpt-oss's real vocabulary through the server's detokenizer and the harmony parser: the channel
// markers come out as text the parser sees (llama.cpp makes them user-defined tokens), <|call|>
// and <|return|> end the generation unseen, and no marker reaches the content.
#include <gtest/gtest.h>

#include <string>

#include "gguf/gguf_reader.h"
#include "support/oracle.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"
#include "text/tool_call_format.h"
#include "tokenizer_test_support.h"

namespace tandem {
namespace {

// The reply as the server sees it: tokens until the first end of generation, each decoded
// without rendering control tokens, fed to the parser piece by piece.
ParsedReply generate(const Tokenizer& t, const std::string& reply, std::string* streamed_text) {
    const std::vector<TokenId> ids = t.encode(reply, /*add_special=*/false, /*parse_special=*/true);
    StreamDecoder decoder(t, /*render_special=*/false);
    ToolCallParser parser(*find_tool_call_format("harmony"));
    ParsedReply r;
    for (TokenId id : ids) {
        if (t.is_eog(id)) break;
        const std::string piece = decoder.feed(id);
        *streamed_text += piece;
        append_events(r, parser.feed(piece));
    }
    append_events(r, parser.feed(decoder.flush()));
    append_events(r, parser.finish());
    return r;
}

TEST(HarmonyVocab, MarkersReachTheParserAndNotTheContent) {
    TANDEM_REQUIRE_ORACLE();
    if (testing::hf_tokenizer_json("gptoss").empty()) {
        if (testing::oracle_required()) FAIL() << "oracle kit set up without --all-tokenizers";
        GTEST_SKIP() << "oracle kit set up without --all-tokenizers";
    }
    const Tokenizer t = Tokenizer::from_gguf(*GgufFile::open(testing::real_vocab_gguf("gptoss")));
    for (const char* marker :
         {"<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>"}) {
        const TokenId id = testing::find_token(t, marker);
        ASSERT_NE(id, kNoToken) << marker;
        EXPECT_FALSE(t.is_eog(id)) << marker;
        EXPECT_EQ(t.token_to_piece(id, /*render_special=*/false), marker);
    }
    for (const char* end : {"<|call|>", "<|return|>"}) {
        const TokenId id = testing::find_token(t, end);
        ASSERT_NE(id, kNoToken) << end;
        EXPECT_TRUE(t.is_eog(id)) << end;
    }

    std::string text;
    const ParsedReply answer =
        generate(t,
                 "<|channel|>analysis<|message|>User says hi. Respond.<|end|><|start|>assistant"
                 "<|channel|>final<|message|>Hello there!<|return|>",
                 &text);
    EXPECT_NE(text.find("<|channel|>analysis<|message|>"), std::string::npos) << text;
    EXPECT_EQ(answer.reasoning, "User says hi. Respond.");
    EXPECT_EQ(answer.content, "Hello there!");
    EXPECT_TRUE(answer.calls.empty());

    text.clear();
    const ParsedReply call = generate(
        t,
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
        "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"
        "<|call|>ignored after the end",
        &text);
    EXPECT_EQ(text.find("<|call|>"), std::string::npos) << text;
    EXPECT_EQ(call.reasoning, "Need the weather.");
    EXPECT_EQ(call.content, "");
    ASSERT_EQ(call.calls.size(), 1u);
    EXPECT_EQ(call.calls[0].name, "get_weather");
    EXPECT_EQ(call.calls[0].arguments, R"({"city":"Paris"})");
}

}  // namespace
}  // namespace tandem
