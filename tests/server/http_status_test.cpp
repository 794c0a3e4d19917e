// Plain curl against `tandem serve`: the endpoints answer, and every error status (400, 401, 404,
// 413, 503 loading and queue full) comes in OpenAI's JSON shape while the server goes on serving.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "server_process.h"
#include "support/oracle.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

const std::string kHello =
    R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":4,"temperature":0})";

// Checks an error response: the status, OpenAI's error object, and the code when given.
void expect_error(const HttpResponse& r, int status, const std::string& code = {},
                  const std::string& context = {}) {
    SCOPED_TRACE(context);
    EXPECT_EQ(r.status, status) << r.body;
    json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    const json& e = j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
    EXPECT_TRUE(e["type"].is_string()) << r.body;
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
    if (!code.empty()) {
        EXPECT_EQ(e["code"], code) << r.body;
    }
}

class Served : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        server_ = new ServerProcess({"--parallel", "2", "--ctx", "256", "--max-body", "4096"});
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static HttpResponse post(const std::string& path, const std::string& body) {
        return http_request("POST", server_->url(path), body);
    }
    static ServerProcess* server_;
};
ServerProcess* Served::server_ = nullptr;

TEST_F(Served, HealthModelsAndTokenizer) {
    HttpResponse h = http_request("GET", server_->url("/health"));
    ASSERT_EQ(h.status, 200);
    json health = json::parse(h.body);
    EXPECT_EQ(health["status"], "ok");
    EXPECT_EQ(health["slots_total"], 2);

    HttpResponse m = http_request("GET", server_->url("/v1/models"));
    ASSERT_EQ(m.status, 200);
    json models = json::parse(m.body);
    EXPECT_EQ(models["object"], "list");
    EXPECT_EQ(models["data"][0]["id"], served_model_id());

    HttpResponse t = post("/tokenize", R"({"content":"Hello <|im_end|>"})");
    ASSERT_EQ(t.status, 200) << t.body;
    json tokens = json::parse(t.body)["tokens"];
    ASSERT_TRUE(tokens.is_array() && tokens.size() >= 2);
    HttpResponse d = post("/detokenize", json{{"tokens", tokens}}.dump());
    ASSERT_EQ(d.status, 200) << d.body;
    EXPECT_EQ(json::parse(d.body)["content"], "Hello <|im_end|>");
    HttpResponse p = post("/tokenize", R"({"content":"Hi","with_pieces":true})");
    ASSERT_EQ(p.status, 200);
    EXPECT_EQ(json::parse(p.body)["tokens"][0]["piece"], "H");
}

TEST_F(Served, ChatAndCompletionAnswer) {
    HttpResponse c = post("/v1/chat/completions", kHello);
    ASSERT_EQ(c.status, 200) << c.body;
    json chat = json::parse(c.body);
    EXPECT_EQ(chat["object"], "chat.completion");
    EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
    EXPECT_LE(chat["usage"]["completion_tokens"].get<int>(), 4);

    HttpResponse s = post(
        "/v1/chat/completions",
        R"({"messages":[{"role":"user","content":"Hello"}],"max_tokens":4,"temperature":0,"stream":true})");
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(s.body.rfind("data: [DONE]\n\n"), s.body.size() - 14) << s.body;
    EXPECT_NE(s.body.find("chat.completion.chunk"), std::string::npos);

    HttpResponse t = post("/v1/completions", R"({"prompt":"Once","max_tokens":3,"temperature":0})");
    ASSERT_EQ(t.status, 200) << t.body;
    EXPECT_EQ(json::parse(t.body)["object"], "text_completion");
}

// llama.cpp's /apply-template: the chat template's prompt for a conversation, exactly the one a
// chat completion of it reads (its token count is the completion's prompt_tokens).
TEST_F(Served, ApplyTemplateGivesTheChatsPrompt) {
    const json messages = {{{"role", "system"}, {"content", "Be brief."}},
                           {{"role", "user"}, {"content", "Hello"}}};
    HttpResponse a = post("/apply-template", json{{"messages", messages}}.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    const std::string prompt = json::parse(a.body)["prompt"];
    EXPECT_NE(prompt.find("Be brief."), std::string::npos) << prompt;
    EXPECT_NE(prompt.find("Hello"), std::string::npos) << prompt;
    HttpResponse c = post("/v1/chat/completions",
                          json{{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}}.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    HttpResponse t = post("/tokenize", json{{"content", prompt}}.dump());
    ASSERT_EQ(t.status, 200) << t.body;
    EXPECT_EQ(json::parse(t.body)["tokens"].size(),
              json::parse(c.body)["usage"]["prompt_tokens"].get<size_t>())
        << prompt;
    expect_error(post("/apply-template", R"({"messages": "Hello"})"), 400, {},
                 "apply-template without a message list");
}

// llama.cpp's /props: a slot's context (this server's --ctx 256), its two slots, the model's
// names and chat template, and the sampling a request that sets nothing gets.
TEST_F(Served, PropsDescribeTheSlotsAndTheModel) {
    HttpResponse r = http_request("GET", server_->url("/props"));
    ASSERT_EQ(r.status, 200) << r.body;
    const json props = json::parse(r.body);
    EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 256) << r.body;
    EXPECT_EQ(props["total_slots"], 2) << r.body;
    EXPECT_EQ(props["model_alias"], served_model_id());
    EXPECT_EQ(props["model_path"], served_model_path());
    EXPECT_NE(props["chat_template"].get<std::string>().find("<|im_start|>"), std::string::npos);
    EXPECT_EQ(props["default_generation_settings"]["params"]["temperature"], 1.0) << r.body;
}

// Log probabilities. Greedy, each token is the first of its alternatives, with the same log
// probability, best first. Steered to "x" by a logit bias of 100, the tokens spell the reply
// (whole, streamed, and as a completion with its offsets), and their log probabilities are the
// model's, before the bias (far below 0: the random model spreads over 151k tokens).
TEST_F(Served, LogprobsAreTheModelsAndSpellTheReply) {
    const json messages = {{{"role", "user"}, {"content", "Hello"}}};
    json body = {{"messages", messages}, {"max_tokens", 4},      {"temperature", 0},
                 {"ignore_eos", true},   {"logprobs", true}, {"top_logprobs", 3}};
    HttpResponse c = post("/v1/chat/completions", body.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    const json greedy = json::parse(c.body)["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(greedy.size(), 4u) << c.body;
    for (const json& t : greedy) {
        ASSERT_EQ(t["top_logprobs"].size(), 3u) << c.body;
        EXPECT_EQ(t["token"], t["top_logprobs"][0]["token"]) << c.body;
        EXPECT_EQ(t["bytes"], t["top_logprobs"][0]["bytes"]) << c.body;
        EXPECT_FLOAT_EQ(t["logprob"].get<float>(), t["top_logprobs"][0]["logprob"].get<float>());
        EXPECT_LE(t["logprob"].get<double>(), 0.0);
        EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(),
                  t["top_logprobs"][1]["logprob"].get<double>());
    }

    HttpResponse ids = post("/tokenize", R"({"content":"x"})");
    ASSERT_EQ(json::parse(ids.body)["tokens"].size(), 1u) << ids.body;
    const std::string x = std::to_string(json::parse(ids.body)["tokens"][0].get<int>());
    body["logit_bias"] = {{x, 100}};
    HttpResponse b = post("/v1/chat/completions", body.dump());
    ASSERT_EQ(b.status, 200) << b.body;
    const json steered = json::parse(b.body)["choices"][0];
    EXPECT_EQ(steered["message"]["content"], "xxxx") << b.body;
    std::string spelled;
    for (const json& t : steered["logprobs"]["content"]) {
        spelled += t["token"].get<std::string>();
        EXPECT_EQ(t["bytes"], json::array({'x'}));
        EXPECT_LT(t["logprob"].get<double>(), -1.0) << b.body;
    }
    EXPECT_EQ(spelled, "xxxx");

    body["stream"] = true;
    HttpResponse s = post("/v1/chat/completions", body.dump());
    ASSERT_EQ(s.status, 200);
    std::string streamed;
    for (size_t at = s.body.find("data: {"); at != std::string::npos;
         at = s.body.find("data: {", at + 1)) {
        const json chunk = json::parse(s.body.substr(at + 6, s.body.find("\n\n", at) - at - 6));
        if (chunk["choices"].empty() || chunk["choices"][0]["logprobs"].is_null()) continue;
        for (const json& t : chunk["choices"][0]["logprobs"]["content"])
            streamed += t["token"].get<std::string>();
    }
    EXPECT_EQ(streamed, "xxxx") << s.body;

    HttpResponse t = post("/v1/completions",
                          json{{"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0},
                               {"ignore_eos", true}, {"logprobs", 2}, {"logit_bias", {{x, 100}}}}
                              .dump());
    ASSERT_EQ(t.status, 200) << t.body;
    const json choice = json::parse(t.body)["choices"][0];
    EXPECT_EQ(choice["text"], "xxx");
    const json& lp = choice["logprobs"];
    EXPECT_EQ(lp["tokens"], json::array({"x", "x", "x"})) << t.body;
    EXPECT_EQ(lp["text_offset"], json::array({0, 1, 2})) << t.body;
    ASSERT_EQ(lp["top_logprobs"].size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(lp["top_logprobs"][i].size(), 2u) << t.body;
        EXPECT_LT(lp["token_logprobs"][i].get<double>(), -1.0) << t.body;
    }
}

// `n` choices: choice i is the request's generation with seed + i, whole or streamed (each
// choice's chunks tagged with its index and ended by its own finish_reason); the usage counts
// the prompt once and every choice's tokens.
TEST_F(Served, ChoicesAreGenerationsOfSuccessiveSeeds) {
    const json one = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                      {"max_tokens", 4},
                      {"temperature", 1},
                      {"ignore_eos", true}};
    auto content_with_seed = [&](int seed) {
        json body = one;
        body["seed"] = seed;
        HttpResponse r = post("/v1/chat/completions", body.dump());
        EXPECT_EQ(r.status, 200) << r.body;
        return json::parse(r.body)["choices"][0]["message"]["content"].get<std::string>();
    };
    json body = one;
    body["seed"] = 40;
    body["n"] = 3;
    HttpResponse c = post("/v1/chat/completions", body.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    const json reply = json::parse(c.body);
    ASSERT_EQ(reply["choices"].size(), 3u) << c.body;
    std::vector<std::string> contents;
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(reply["choices"][i]["index"], i);
        contents.push_back(reply["choices"][i]["message"]["content"]);
        EXPECT_EQ(contents.back(), content_with_seed(40 + i)) << i;
    }
    EXPECT_EQ(reply["usage"]["completion_tokens"], 12) << c.body;
    EXPECT_EQ(reply["usage"]["total_tokens"].get<int>(),
              reply["usage"]["prompt_tokens"].get<int>() + 12);

    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    HttpResponse s = post("/v1/chat/completions", body.dump());
    ASSERT_EQ(s.status, 200);
    std::vector<std::string> streamed(3);
    std::vector<int> finished(3, 0);
    int usage_chunks = 0;
    for (size_t at = s.body.find("data: {"); at != std::string::npos;
         at = s.body.find("data: {", at + 1)) {
        const json chunk = json::parse(s.body.substr(at + 6, s.body.find("\n\n", at) - at - 6));
        if (chunk["choices"].empty()) {
            ++usage_chunks;
            EXPECT_EQ(chunk["usage"]["completion_tokens"], 12) << s.body;
            continue;
        }
        const int i = chunk["choices"][0]["index"];
        ASSERT_TRUE(i >= 0 && i < 3) << s.body;
        const json& delta = chunk["choices"][0]["delta"];
        if (delta.contains("content")) streamed[i] += delta["content"].get<std::string>();
        if (!chunk["choices"][0]["finish_reason"].is_null()) ++finished[i];
    }
    EXPECT_EQ(streamed, contents) << s.body;
    EXPECT_EQ(finished, std::vector<int>({1, 1, 1})) << s.body;
    EXPECT_EQ(usage_chunks, 1);
    EXPECT_EQ(s.body.find("data: [DONE]"), s.body.rfind("data: [DONE]"));
}

// echo: a text completion's prompt comes back before its completion, whole and streamed, as text
// or as the text of token ids.
TEST_F(Served, EchoPutsThePromptBeforeTheCompletion) {
    const json plain = {{"prompt", "Once upon"}, {"max_tokens", 3}, {"temperature", 0}};
    HttpResponse p = post("/v1/completions", plain.dump());
    ASSERT_EQ(p.status, 200) << p.body;
    const std::string completion = json::parse(p.body)["choices"][0]["text"];

    json body = plain;
    body["echo"] = true;
    HttpResponse e = post("/v1/completions", body.dump());
    ASSERT_EQ(e.status, 200) << e.body;
    const json echoed = json::parse(e.body);
    EXPECT_EQ(echoed["choices"][0]["text"], "Once upon" + completion) << e.body;
    // The prompt counts as before (its cached part aside: the second request reuses the first's).
    for (const char* count : {"prompt_tokens", "completion_tokens"})
        EXPECT_EQ(echoed["usage"][count], json::parse(p.body)["usage"][count]) << count;

    body["stream"] = true;
    HttpResponse s = post("/v1/completions", body.dump());
    ASSERT_EQ(s.status, 200);
    std::string streamed;
    int chunks = 0;
    for (size_t at = s.body.find("data: {"); at != std::string::npos;
         at = s.body.find("data: {", at + 1)) {
        const json chunk = json::parse(s.body.substr(at + 6, s.body.find("\n\n", at) - at - 6));
        if (chunks++ == 0) {
            EXPECT_EQ(chunk["choices"][0]["text"], "Once upon") << s.body;
        }
        streamed += chunk["choices"][0]["text"].get<std::string>();
    }
    EXPECT_EQ(streamed, "Once upon" + completion) << s.body;

    // Token ids: their text, as /detokenize spells it.
    HttpResponse t = post("/tokenize", R"({"content":"Once upon"})");
    ASSERT_EQ(t.status, 200) << t.body;
    const json tokens = json::parse(t.body)["tokens"];
    HttpResponse d = post("/detokenize", json{{"tokens", tokens}}.dump());
    ASSERT_EQ(d.status, 200) << d.body;
    json ids = {{"prompt", tokens},
                {"max_tokens", 2},
                {"temperature", 0},
                {"ignore_eos", true},
                {"echo", true}};
    HttpResponse i = post("/v1/completions", ids.dump());
    ASSERT_EQ(i.status, 200) << i.body;
    const std::string text = json::parse(i.body)["choices"][0]["text"];
    const std::string prompt_text = json::parse(d.body)["content"];
    EXPECT_EQ(text.substr(0, prompt_text.size()), prompt_text) << i.body;
    EXPECT_EQ(json::parse(i.body)["usage"]["completion_tokens"], 2) << i.body;
}

// logit_bias: a +100 bias makes a token every greedy choice; an id past the vocabulary is a 400.
TEST_F(Served, LogitBiasSteersTheTokens) {
    HttpResponse t = post("/tokenize", R"({"content":"x"})");
    ASSERT_EQ(t.status, 200) << t.body;
    const json ids = json::parse(t.body)["tokens"];
    ASSERT_EQ(ids.size(), 1u) << t.body;
    const std::string id = std::to_string(ids[0].get<int>());
    HttpResponse c =
        post("/v1/completions", R"({"prompt":"Once","max_tokens":3,"temperature":0,"logit_bias":{")" +
                                    id + R"(":100}})");
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(json::parse(c.body)["choices"][0]["text"], "xxx") << c.body;
    expect_error(post("/v1/completions",
                      R"({"prompt":"Once","max_tokens":3,"logit_bias":{"99999999":1}})"),
                 400, {}, "logit_bias past the vocabulary");
}

TEST_F(Served, BadRequestsAre400) {
    const std::vector<std::pair<std::string, std::string>> chat_cases = {
        {"malformed JSON", R"({"messages": [)"},
        {"not an object", R"([1, 2, 3])"},
        {"empty body", " "},
        {"messages missing", R"({"max_tokens": 4})"},
        {"messages not an array", R"({"messages": "hello"})"},
        {"messages empty", R"({"messages": []})"},
        {"message not an object", R"({"messages": ["hello"]})"},
        {"role missing", R"({"messages": [{"content": "hi"}]})"},
        {"unknown role", R"({"messages": [{"role": "wizard", "content": "hi"}]})"},
        {"role not a string", R"({"messages": [{"role": 7, "content": "hi"}]})"},
        {"content missing", R"({"messages": [{"role": "user"}]})"},
        {"content wrong type", R"({"messages": [{"role": "user", "content": 12}]})"},
        {"image part",
         R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})"},
        {"temperature a string",
         R"({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})"},
        {"temperature negative",
         R"({"messages": [{"role": "user", "content": "hi"}], "temperature": -1})"},
        {"top_p out of range",
         R"({"messages": [{"role": "user", "content": "hi"}], "top_p": 1.5})"},
        {"top_k fractional", R"({"messages": [{"role": "user", "content": "hi"}], "top_k": 2.5})"},
        {"min_p a bool", R"({"messages": [{"role": "user", "content": "hi"}], "min_p": true})"},
        {"max_tokens a string",
         R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "10"})"},
        {"max_tokens zero",
         R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})"},
        {"stream not a bool",
         R"({"messages": [{"role": "user", "content": "hi"}], "stream": "yes"})"},
        {"stop a number", R"({"messages": [{"role": "user", "content": "hi"}], "stop": 5})"},
        {"stop list with a number",
         R"({"messages": [{"role": "user", "content": "hi"}], "stop": ["a", 5]})"},
        {"seed a string", R"({"messages": [{"role": "user", "content": "hi"}], "seed": "x"})"},
        {"n = 17", R"({"messages": [{"role": "user", "content": "hi"}], "n": 17})"},
        {"n = 0", R"({"messages": [{"role": "user", "content": "hi"}], "n": 0})"},
        {"top_logprobs without logprobs",
         R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})"},
        {"presence_penalty past 2",
         R"({"messages": [{"role": "user", "content": "hi"}], "presence_penalty": 2.5})"},
        {"frequency_penalty below -2",
         R"({"messages": [{"role": "user", "content": "hi"}], "frequency_penalty": -3})"},
        {"model a number", R"({"model": 3, "messages": [{"role": "user", "content": "hi"}]})"},
        {"stream_options a string",
         R"({"messages": [{"role": "user", "content": "hi"}], "stream_options": "x"})"},
        {"prompt plus max_tokens beyond the context",
         R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 250})"},
        {"prompt beyond the context",
         json{{"messages", {{{"role", "user"}, {"content", std::string(600, 'x')}}}}}.dump()},
    };
    for (const auto& [what, body] : chat_cases)
        expect_error(post("/v1/chat/completions", body), 400, {}, what);

    const std::vector<std::pair<std::string, std::string>> completion_cases = {
        {"prompt missing", R"({"max_tokens": 2})"},
        {"prompt a number", R"({"prompt": 5})"},
        {"several prompts", R"({"prompt": ["a", "b"]})"},
        {"token id outside the vocabulary", R"({"prompt": [1, 2, 100000]})"},
        {"negative token id", R"({"prompt": [1, -2]})"},
        {"echo with logprobs", R"({"prompt": "a", "echo": true, "logprobs": 1})"},
        {"prompt plus max_tokens beyond the context", R"({"prompt": "a", "max_tokens": 300})"},
    };
    for (const auto& [what, body] : completion_cases)
        expect_error(post("/v1/completions", body), 400, {}, what);

    expect_error(post("/tokenize", R"({"text": "a"})"), 400, {}, "tokenize without content");
    expect_error(post("/tokenize", "nope"), 400, {}, "tokenize malformed");
    expect_error(post("/detokenize", R"({"tokens": [1, 999999]})"), 400, {}, "detokenize bad id");
    expect_error(post("/detokenize", R"({"tokens": "abc"})"), 400, {}, "detokenize wrong type");

    // The field at fault is named.
    HttpResponse r = post("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "hi"}], "top_p": 2})");
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "top_p");
    // And the server is still there.
    EXPECT_EQ(post("/v1/chat/completions", kHello).status, 200);
}

TEST_F(Served, UnknownPathsAndModelsAre404) {
    expect_error(http_request("GET", server_->url("/v1/nothing")), 404, "unknown_url",
                 "unknown path");
    expect_error(post("/v2/chat/completions", kHello), 404, "unknown_url", "unknown version");
    expect_error(http_request("DELETE", server_->url("/v1/models")), 404, {}, "wrong method");
    expect_error(
        post(
            "/v1/chat/completions",
            R"({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})"),
        404, "model_not_found", "unknown model");
    expect_error(post("/v1/completions", R"({"model": "gpt-9", "prompt": "a", "max_tokens": 2})"),
                 404, "model_not_found", "unknown model, completions");
    // Its own name, and the file name, are fine.
    EXPECT_EQ(post("/v1/chat/completions",
                   R"({"model": ")" + served_model_id() +
                       R"(", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})")
                  .status,
              200);
}

TEST_F(Served, BodyOverTheLimitIs413) {
    const std::string big =
        R"({"messages": [{"role": "user", "content": ")" + std::string(10000, 'a') + R"("}]})";
    expect_error(post("/v1/chat/completions", big), 413, "request_too_large", "chat");
    expect_error(post("/tokenize", R"({"content": ")" + std::string(5000, 'a') + R"("})"), 413, {},
                 "tokenize");
    EXPECT_EQ(post("/v1/chat/completions", kHello).status, 200);
}

TEST_F(Served, GarbageNeverTakesTheServerDown) {
    const std::vector<std::string> junk = {
        "",
        "\x01\x02\xff",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}",
        "null",
        "{\"messages\": null}",
        "{\"messages\": [null]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": [1]}]}",
        "1e999",
        std::string(3000, '[')};
    for (const std::string& body : junk) {
        for (const char* path : {"/v1/chat/completions", "/v1/completions", "/tokenize",
                                 "/detokenize", "/v1/messages", "/v1/messages/count_tokens"}) {
            HttpResponse r = post(path, body);
            EXPECT_GE(r.status, 400) << path << " " << body.substr(0, 40);
            EXPECT_LT(r.status, 500) << path << " " << body.substr(0, 40) << ": " << r.body;
        }
    }
    EXPECT_EQ(http_request("GET", server_->url("/health")).status, 200);
    EXPECT_EQ(post("/v1/chat/completions", kHello).status, 200);
}

// Grammars and schemas are outside input too: each bad one is a 400 naming its field.
TEST_F(Served, BadGrammarsAndSchemasAre400) {
    const std::string user = R"("messages": [{"role": "user", "content": "hi"}], "max_tokens": 4)";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"("grammar": "root ::= root \"a\"")", "grammar"},
        {R"x("grammar": "root ::= (((\"a\")")x", "grammar"},
        {R"("grammar": "root ::= undefined")", "grammar"},
        {R"("grammar": "root ::= \"a\"{99999999}")", "grammar"},
        {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "maximum": 3}}})",
         "response_format"},
        {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/nowhere"}}})",
         "response_format"},
        {R"("json_schema": {"type": "array", "minItems": 5, "maxItems": 1})", "json_schema"},
        {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "x"}}}], "tool_choice": "required")",
         "tools"},
    };
    for (const auto& [field, param] : cases) {
        expect_error(post("/v1/chat/completions", "{" + user + ", " + field + "}"), 400, {}, field);
        const json e =
            json::parse(post("/v1/chat/completions", "{" + user + ", " + field + "}").body);
        EXPECT_EQ(e["error"]["param"], param) << field;
    }
    // Nested past any sensible schema: refused, not a stack overflow.
    std::string deep = R"({"type": "array", "items": )";
    std::string close = "}";
    for (int i = 0; i < 80; ++i) {
        deep += R"({"type": "array", "items": )";
        close += "}";
    }
    const std::string schema = deep + R"({"type": "integer"})" + close;
    expect_error(post("/v1/completions", R"({"prompt": "x", "json_schema": )" + schema + "}"), 400,
                 {}, "deep schema");
    EXPECT_EQ(post("/v1/chat/completions", kHello).status, 200);
}

// A body nested deeper than any request needs is refused before it is parsed: copying or
// dumping such a value recursed until the server ran out of stack and died.
TEST(ServerBodies, DeeplyNestedJsonIs400) {
    ServerProcess server({});
    const std::string deep = std::string(200000, '[') + std::string(200000, ']');
    for (const char* path :
         {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/tokenize"}) {
        const std::string body = R"({"messages": [{"role": "user", "content": )" + deep +
                                 R"(}], "prompt": )" + deep + R"(, "content": )" + deep + "}";
        const HttpResponse r = http_request("POST", server.url(path), body);
        EXPECT_EQ(r.status, 400) << path << ": " << r.body.substr(0, 200);
        EXPECT_NE(r.body.find("nests deeper than"), std::string::npos)
            << path << ": " << r.body.substr(0, 200);
    }
    EXPECT_EQ(http_request("POST", server.url("/v1/chat/completions"), kHello).status, 200);
}

TEST(ServerAuth, ApiKeyRequiredExceptForHealth) {
    ServerProcess server({"--api-key", "sesame"});
    expect_error(http_request("POST", server.url("/v1/chat/completions"), kHello), 401,
                 "invalid_api_key", "no key");
    expect_error(http_request("POST", server.url("/v1/chat/completions"), kHello,
                              {"Authorization: Bearer wrong"}),
                 401, "invalid_api_key", "wrong key");
    expect_error(http_request("GET", server.url("/v1/models"), {}, {"Authorization: sesame"}), 401,
                 "invalid_api_key", "not a bearer");
    expect_error(http_request("POST", server.url("/tokenize"), R"({"content":"a"})"), 401, {},
                 "tokenize");
    EXPECT_EQ(http_request("GET", server.url("/health")).status, 200);
    EXPECT_EQ(http_request("POST", server.url("/v1/chat/completions"), kHello,
                           {"Authorization: Bearer sesame"})
                  .status,
              200);
    EXPECT_EQ(
        http_request("GET", server.url("/v1/models"), {}, {"Authorization: Bearer sesame"}).status,
        200);
}

TEST(ServerLoading, Answers503UntilTheModelIsLoaded) {
    ServerProcess server({}, /*wait_ready=*/false, {{"TANDEM_TEST_LOAD_DELAY_MS", "3000"}});
    HttpResponse h = http_request("GET", server.url("/health"));
    EXPECT_EQ(h.status, 503);
    EXPECT_EQ(json::parse(h.body)["status"], "loading");
    expect_error(http_request("POST", server.url("/v1/chat/completions"), kHello), 503,
                 "model_loading", "chat");
    expect_error(http_request("GET", server.url("/v1/models")), 503, "model_loading", "models");
    ASSERT_TRUE(server.wait_ready());
    EXPECT_EQ(http_request("POST", server.url("/v1/chat/completions"), kHello).status, 200);
}

// A curl child streaming a long chat completion into out_path (-1 if fork failed).
pid_t start_long_stream(const ServerProcess& server, const std::string& out_path) {
    const std::string body =
        R"({"messages":[{"role":"user","content":"Go on"}],"max_tokens":16000,"ignore_eos":true,"stream":true})";
    const std::string url = server.url("/v1/chat/completions");
    const pid_t curl = fork();
    if (curl == 0) {
        execlp("curl", "curl", "-sS", "-N", "--max-time", "120", "-o", out_path.c_str(), "-H",
               "Content-Type: application/json", "-d", body.c_str(), url.c_str(),
               static_cast<char*>(nullptr));
        _exit(127);
    }
    return curl;
}

TEST(ServerQueue, FullQueueIs503) {
    // One slot and no queue: while a long stream holds the slot, the next request is refused.
    ServerProcess server({"--parallel", "1", "--queue", "0", "--ctx", "16384"});
    TempDir dir;
    const std::string stream_out = dir.file("stream");
    const pid_t curl = start_long_stream(server, stream_out);
    ASSERT_GE(curl, 0);
    // Wait (bounded) for the stream's first content: the slot is taken.
    bool streaming = false;
    for (int i = 0; i < 600 && !streaming; ++i) {
        std::ifstream in(stream_out);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        streaming = text.find("\"content\"") != std::string::npos;
        if (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(streaming);
    expect_error(http_request("POST", server.url("/v1/chat/completions"), kHello), 503,
                 "queue_full", "queue full");
    kill(curl, SIGTERM);
    waitpid(curl, nullptr, 0);
    // The stream's client is gone: its slot frees and requests are served again.
    bool served = false;
    for (int i = 0; i < 200 && !served; ++i) {
        served = http_request("POST", server.url("/v1/chat/completions"), kHello).status == 200;
        if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(served);
}

TEST(ServerShutdown, SigtermStopsCleanlyWithAStreamOpen) {
    ServerProcess server({"--parallel", "1", "--ctx", "16384"});
    TempDir dir;
    const std::string stream_out = dir.file("stream");
    const pid_t curl = start_long_stream(server, stream_out);
    ASSERT_GE(curl, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(server.stop(), 0) << server.log();
    int status = 0;
    waitpid(curl, &status, 0);
    std::ifstream in(stream_out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("data: [DONE]"), std::string::npos) << text.substr(0, 200);
}

}  // namespace
}  // namespace tandem::testing
