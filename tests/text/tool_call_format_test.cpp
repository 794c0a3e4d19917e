// Tool-call formats on fixed strings: replies split into content and calls, whole and streamed
// in every split, malformed calls kept as text; the forcing grammar accepts the calls a format
// writes, and whatever a walk through it writes parses back into calls that fit the tools.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "base/error.h"
#include "text/grammar.h"
#include "text/grammar_matcher.h"
#include "text/tool_call_format.h"

namespace tandem {
namespace {

using ojson = nlohmann::ordered_json;

const ToolCallFormat& format(const char* name) {
    const ToolCallFormat* f = find_tool_call_format(name);
    EXPECT_NE(f, nullptr) << name;
    return *f;
}

// Feeds the reply in pieces of `step` bytes; returns the events merged like parse_tool_calls.
ParsedReply streamed(const ToolCallFormat& f, const std::string& reply, size_t step,
                     std::string* leaked = nullptr, bool parse_calls = true) {
    ToolCallParser p(f, parse_calls);
    ParsedReply r;
    auto take = [&](std::vector<ToolCallParser::Event> events) {
        if (leaked) {
            for (const auto& e : events) {
                if (!e.call && !e.reasoning) *leaked += e.text;
            }
        }
        append_events(r, std::move(events));
    };
    for (size_t i = 0; i < reply.size(); i += step) take(p.feed(reply.substr(i, step)));
    take(p.finish());
    return r;
}

void expect_same(const ParsedReply& a, const ParsedReply& b, const std::string& context) {
    EXPECT_EQ(a.content, b.content) << context;
    EXPECT_EQ(a.reasoning, b.reasoning) << context;
    ASSERT_EQ(a.calls.size(), b.calls.size()) << context;
    for (size_t i = 0; i < a.calls.size(); ++i) {
        EXPECT_EQ(a.calls[i].name, b.calls[i].name) << context;
        EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << context;
    }
}

// Every split of the reply gives the whole-reply answer.
ParsedReply parse_every_way(const ToolCallFormat& f, const std::string& reply) {
    const ParsedReply whole = parse_tool_calls(f, reply);
    for (size_t step = 1; step <= reply.size(); ++step) {
        expect_same(streamed(f, reply, step), whole, "step " + std::to_string(step));
    }
    return whole;
}

TEST(HermesToolCalls, ContentThenCalls) {
    const ParsedReply r = parse_every_way(
        format("hermes"),
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
        "\"arguments\": {}}\n</tool_call>\n");
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","days":2})");
    EXPECT_EQ(r.calls[1].name, "get_time");
    EXPECT_EQ(r.calls[1].arguments, "{}");
}

TEST(HermesToolCalls, PlainTextAndMalformedCallsStayText) {
    const ToolCallFormat& f = format("hermes");
    for (const std::string& reply : {
             std::string("Just an answer, with <b>tags</b> and a < sign.\n\n"),
             std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>"),
             std::string("<tool_call>\n{\"arguments\": {}}\n</tool_call> after"),
             std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": 3}\n</tool_call>"),
             std::string("<tool_call>{\"name\": \"f\", \"arguments\": {}, \"x\": 1}</tool_call>"),
             std::string("ends in an opener prefix <tool_ca"),
             std::string("unterminated <tool_call>\n{\"name\": \"f\", \"argu"),
         }) {
        const ParsedReply r = parse_every_way(f, reply);
        EXPECT_EQ(r.content, reply);
        EXPECT_TRUE(r.calls.empty()) << reply;
    }
    // A block cut short of its closer is still a call when it parses whole.
    const ParsedReply cut =
        parse_every_way(f, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n");
    ASSERT_EQ(cut.calls.size(), 1u);
    EXPECT_EQ(cut.calls[0].arguments, R"({"a":1})");
    EXPECT_EQ(cut.content, "");
    // A malformed block between good ones stays as text in its place.
    const ParsedReply mixed = parse_every_way(
        f,
        "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>oops</tool_call>"
        "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>");
    ASSERT_EQ(mixed.calls.size(), 2u);
    EXPECT_EQ(mixed.content, "<tool_call>oops</tool_call>");
}

TEST(HermesToolCalls, NoOpenerPrefixLeaksIntoContent) {
    std::string leaked;
    const std::string reply =
        "Sure<tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"<tool_call>\"}}</tool_call>";
    const ParsedReply r = streamed(format("hermes"), reply, 1, &leaked);
    EXPECT_EQ(leaked, "Sure");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"q":"<tool_call>"})");
}

// A long call, its arguments full of the closer's beginnings: the search for the closer resumes
// where the last piece's left off (not from the body's start), and still finds it split across
// pieces, and never in a near miss.
TEST(HermesToolCalls, LongCallsWithNearMissClosersParseInAnyPieces) {
    std::string text;
    for (int i = 0; i < 300; ++i) text += "</tool_cal" + std::string(i % 7, 'x') + "</tool_";
    const std::string reply = "<tool_call>\n{\"name\": \"write\", \"arguments\": {\"text\": \"" + text +
                              "\"}}\n</tool_call>";
    const ParsedReply whole = parse_tool_calls(format("hermes"), reply);
    ASSERT_EQ(whole.calls.size(), 1u);
    EXPECT_EQ(whole.calls[0].arguments, ojson({{"text", text}}).dump());
    for (size_t step : {1, 2, 3, 5, 10, 11, 12, 64, 1000})
        expect_same(streamed(format("hermes"), reply, step), whole, "step " + std::to_string(step));
}

TEST(Llama3ToolCalls, WholeReplyIsTheCall) {
    const ToolCallFormat& f = format("llama3_json");
    const ParsedReply r =
        parse_every_way(f, "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(r.content, "");
    const ParsedReply two = parse_every_way(
        f,
        "{\"type\": \"function\", \"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", "
        "\"parameters\": {\"x\": [1, {\"y\": \"}\"}]}}");
    ASSERT_EQ(two.calls.size(), 2u);
    EXPECT_EQ(two.calls[1].arguments, R"({"x":[1,{"y":"}"}]})");
    for (const std::string& text :
         {std::string("The answer is {\"name\": \"a\", \"parameters\": {}}"),
          std::string("{\"answer\": 42}"),
          std::string("{\"name\": \"a\", \"parameters\": {}} trailing"), std::string("Hello!\n"),
          std::string("  \n")}) {
        const ParsedReply plain = parse_every_way(f, text);
        EXPECT_EQ(plain.content, text);
        EXPECT_TRUE(plain.calls.empty()) << text;
    }
}

std::vector<ToolSpec> weather_tools();

// Qwen3-Coder's XML calls, as its template writes past ones.
TEST(Qwen3CoderToolCalls, ContentThenCalls) {
    const ParsedReply r = parse_every_way(
        format("qwen3_coder"),
        "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSt. Paul <MN>\n"
        "</parameter>\n<parameter=days>\n2\n</parameter>\n<parameter=opts>\n{\"a\": [1, null]}\n"
        "</parameter>\n<parameter=exact>\ntrue\n</parameter>\n<parameter=quoted>\n\"x\"\n"
        "</parameter>\n<parameter=note>\n\nline one\nline two\n\n</parameter>\n"
        "<parameter=empty>\n\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
        "<function=now>\n</function>\n</tool_call>\n");
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    // One newline either side of a value is markup; text that is JSON other than a string is
    // that JSON; the rest, quotes and all, is a string.
    EXPECT_EQ(r.calls[0].arguments,
              R"({"city":"St. Paul <MN>","days":2,"opts":{"a":[1,null]},"exact":true,)"
              R"("quoted":"\"x\"","note":"\nline one\nline two\n","empty":""})");
    EXPECT_EQ(r.calls[1].name, "now");
    EXPECT_EQ(r.calls[1].arguments, "{}");
}

TEST(Qwen3CoderToolCalls, MalformedCallsStayText) {
    const ToolCallFormat& f = format("qwen3_coder");
    for (const std::string& reply : {
             std::string("Use <function=f> and <parameter=x> in C++: #include <functional>\n"),
             std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"),
             std::string("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>"),
             std::string("<tool_call>\n<function=>\n</function>\n</tool_call>"),
             std::string("<tool_call>\n<function=a b>\n</function>\n</tool_call>"),
             std::string("<tool_call>\n<function=a\xff>\n</function>\n</tool_call>"),
             std::string("<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>"),
             std::string("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>"
                         "\n2\n</parameter>\n</function>\n</tool_call>"),
             std::string("<tool_call>\n<function=f>\nstray\n</function>\n</tool_call>"),
             std::string("<tool_call>\n<function=f>\n</function>\ntrailing\n</tool_call> after"),
             std::string("ends in an opener prefix <tool_ca"),
             std::string("unterminated <tool_call>\n<function=f>\n<parameter=a>\n1"),
         }) {
        const ParsedReply r = parse_every_way(f, reply);
        EXPECT_EQ(r.content, reply);
        EXPECT_TRUE(r.calls.empty()) << reply;
    }
    // A block cut short of its closer is still a call when it parses whole.
    const ParsedReply cut = parse_every_way(
        f, "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n");
    ASSERT_EQ(cut.calls.size(), 1u);
    EXPECT_EQ(cut.calls[0].arguments, R"({"a":1})");
    EXPECT_EQ(cut.content, "");
}

TEST(Qwen3CoderToolCalls, WrittenCallsReadBack) {
    const ToolCallFormat& f = format("qwen3_coder");
    const std::vector<ToolCall> calls = {
        {"edit", R"({"path":"a.cpp","text":"if (a < b) {\n  x = \"</b>\";\n}","n":3})"},
        {"list", R"({"dirs":["src","tests"],"deep":false,"filter":null})"},
        {"now", "{}"},
    };
    const ParsedReply r = parse_every_way(f, f.render_calls(calls));
    EXPECT_EQ(r.content, "");
    ASSERT_EQ(r.calls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(r.calls[i].name, calls[i].name);
        EXPECT_EQ(r.calls[i].arguments, calls[i].arguments);
    }
    EXPECT_NE(
        f.system_prompt(ojson::array({{{"type", "function"}, {"function", {{"name", "now"}}}}}))
            .find("<function=example_function_name>"),
        std::string::npos);
}

TEST(Qwen3CoderToolCalls, GrammarKeepsStringsStringsAndMarksOut) {
    const ToolCallFormat& f = format("qwen3_coder");
    const std::vector<ToolSpec> tools = {{"get_weather", ojson::parse(R"({"type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"]})")}};
    GrammarMatcher m(std::make_shared<const Grammar>(Grammar::parse(f.grammar(tools, false))));
    auto call = [](const std::string& city) {
        return "<tool_call>\n<function=get_weather>\n<parameter=city>\n" + city +
               "\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n"
               "</tool_call>";
    };
    for (const std::string& ok :
         {std::string("Paris"), std::string("<b>a</b> </para"), std::string("\"Oslo\""),
          std::string("the <</tool_call"), std::string("x\n\ny"), std::string("<"),
          std::string("t"), std::string("nice")}) {
        EXPECT_TRUE(m.matches(call(ok))) << ok;
        const ParsedReply r = parse_tool_calls(f, call(ok));
        ASSERT_EQ(r.calls.size(), 1u) << ok;
        EXPECT_TRUE(ojson::parse(r.calls[0].arguments)["city"].is_string()) << ok;
    }
    // Values that would read back as other JSON, or would end the value or block early.
    for (const std::string& bad :
         {std::string("42"), std::string("true"), std::string("null"), std::string("[1]"),
          std::string("{}"), std::string("a</parameter>b"), std::string("a<</tool_call>b"),
          std::string(" Paris")}) {
        EXPECT_FALSE(m.matches(call(bad))) << bad;
    }
    EXPECT_FALSE(
        m.matches("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                  "</parameter>\n<parameter=unit>\nkelvin\n</parameter>\n</function>\n"
                  "</tool_call>"));
    // Lengths are counted (weather_tools' city has at most 10 characters).
    GrammarMatcher bounded(
        std::make_shared<const Grammar>(Grammar::parse(f.grammar(weather_tools(), false))));
    EXPECT_TRUE(bounded.matches(call("Paris")));
    EXPECT_TRUE(bounded.matches(call("f")));
    EXPECT_TRUE(bounded.matches(call("fresno ca")));
    EXPECT_FALSE(bounded.matches(call("Paris, France")));
    EXPECT_FALSE(bounded.matches(call("false")));
    EXPECT_TRUE(bounded.matches(call("")));  // no minLength: the empty string
    // Constraints the grammar cannot follow are refused, not ignored.
    const std::vector<ToolSpec> dated = {
        {"f", ojson::parse(R"({"properties": {"d": {"type": "string", "format": "date"}}})")}};
    EXPECT_THROW(f.grammar(dated, false), Error);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(ToolCallFormats, DetectedFromTemplates) {
    const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/text/data/chat/templates/";
    EXPECT_STREQ(tool_call_format_for_template(read_file(dir + "llama3_1_tools.jinja")).name,
                 "llama3_json");
    EXPECT_STREQ(tool_call_format_for_template(read_file(dir + "llama3_2.jinja")).name,
                 "llama3_json");
    EXPECT_STREQ(tool_call_format_for_template(read_file(dir + "gpt_oss.jinja")).name, "harmony");
    // Qwen3-Coder's XML calls, which Qwen3.5 writes too.
    EXPECT_STREQ(tool_call_format_for_template(read_file(dir + "qwen3_coder.jinja")).name,
                 "qwen3_coder");
    EXPECT_STREQ(tool_call_format_for_template(read_file(dir + "qwen3_5.jinja")).name,
                 "qwen3_coder");
    EXPECT_STREQ(tool_call_format_for_template(
                     "{{- '<tool_call>\\n{\"name\": <function-name>, \"arguments\": ...}' }}")
                     .name,
                 "hermes");
    // Unknown templates get the default.
    EXPECT_STREQ(tool_call_format_for_template("{{ messages }}").name, "hermes");
    EXPECT_EQ(find_tool_call_format("nope"), nullptr);
}

std::vector<ToolSpec> weather_tools() {
    return {
        {"get_weather", ojson::parse(R"({"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 10},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}}, "required": ["city", "unit"]})")},
        {"now", nullptr},
    };
}

// The forcing grammar accepts what the format writes, and what a walk through it writes
// parses into calls of the offered tools with arguments of their schema.
TEST(ToolCallFormats, GrammarForcesWellFormedCalls) {
    for (const ToolCallFormat& f : tool_call_formats()) {
        SCOPED_TRACE(f.name);
        const auto tools = weather_tools();
        for (bool parallel : {false, true}) {
            const std::string gbnf = f.grammar(tools, parallel);
            GrammarMatcher m(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
            const std::vector<ToolCall> one = {
                {"get_weather", R"({"city":"Paris","unit":"celsius"})"}};
            EXPECT_TRUE(m.matches(f.render_calls(one))) << gbnf << "\n" << f.render_calls(one);
            EXPECT_TRUE(m.matches(f.render_calls({{"now", "{}"}})));
            EXPECT_FALSE(m.matches(f.render_calls({{"later", "{}"}})));
            EXPECT_FALSE(m.matches(f.render_calls({{"get_weather", R"({"city":"Paris"})"}})));
            EXPECT_FALSE(m.matches("Sure!"));
            // Harmony's calls may follow free reasoning, which a random walk would never end:
            // the walks start after some, at the call's recipient.
            const std::string prefix =
                std::string(f.name) == "harmony"
                    ? "<|channel|>analysis<|message|>Weather?<|end|><|start|>"
                      "assistant<|channel|>commentary to=functions."
                    : "";
            // Qwen3-Coder's values are free text that a walk of random bytes would never end:
            // it is steered to the mark that ends one.
            const std::string mark = std::string(f.name) == "qwen3_coder" ? "\n</parameter>" : "";
            std::mt19937 rng(3);
            for (int i = 0; i < 50; ++i) {
                std::string out = prefix;
                size_t steer = 0;  // bytes of the mark written
                GrammarMatcher::State s = m.advance(m.start(), prefix);
                while (!m.accepting(s) || (m.can_continue(s) && rng() % 3 != 0)) {
                    std::vector<uint8_t> next;
                    for (int b = 0; b < 256; ++b) {
                        if (m.advance(s, static_cast<uint8_t>(b)) != GrammarMatcher::kDead)
                            next.push_back(static_cast<uint8_t>(b));
                    }
                    ASSERT_FALSE(next.empty());
                    uint8_t b = next[rng() % next.size()];
                    for (uint8_t c : next) {
                        if ((c == '"' || c == '}') && rng() % 6 == 0) b = c;
                    }
                    if (!mark.empty()) {
                        // Now and then the mark, byte by byte while the grammar allows it.
                        auto allowed = [&](char c) {
                            return std::find(next.begin(), next.end(), static_cast<uint8_t>(c)) !=
                                   next.end();
                        };
                        if (steer > 0 && steer < mark.size() && allowed(mark[steer])) {
                            b = static_cast<uint8_t>(mark[steer++]);
                        } else if (allowed(mark[0]) && rng() % 8 == 0) {
                            b = static_cast<uint8_t>(mark[0]);
                            steer = 1;
                        } else {
                            steer = 0;
                        }
                    }
                    out += static_cast<char>(b);
                    s = m.advance(s, b);
                    ASSERT_LT(out.size(), 5000u);
                }
                ASSERT_NE(s, GrammarMatcher::kDead);
                const ParsedReply r = parse_tool_calls(f, out);
                ASSERT_GE(r.calls.size(), 1u) << out;
                EXPECT_EQ(r.content, "") << out;
                const std::string name = f.name;
                if (!parallel || (name != "hermes" && name != "qwen3_coder")) {
                    EXPECT_EQ(r.calls.size(), 1u);
                }
                for (const ToolCall& c : r.calls) {
                    const ojson args = ojson::parse(c.arguments);
                    if (c.name == "now") {
                        EXPECT_EQ(args, ojson::object()) << out;
                    } else {
                        ASSERT_EQ(c.name, "get_weather") << out;
                        EXPECT_TRUE(args["city"].is_string()) << out;
                        EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit");
                        EXPECT_TRUE(!args.contains("days") || args["days"].is_number_integer());
                    }
                }
            }
        }
    }
}

// gpt-oss: what it writes after the template's "<|start|>assistant". <|call|> and <|return|>
// end the generation, so a reply never shows them.
const std::string kAnalysis = "<|channel|>analysis<|message|>";
const std::string kNext = "<|end|><|start|>assistant";

TEST(HarmonyReplies, ReasoningApartFromTheFinalAnswer) {
    const ToolCallFormat& f = format("harmony");
    const ParsedReply r = parse_every_way(
        f, kAnalysis + "The user greets; a < sign, <|en and <b>tags</b> in thought." + kNext +
               "<|channel|>final<|message|>Hello! How can I help?\n");
    EXPECT_EQ(r.reasoning, "The user greets; a < sign, <|en and <b>tags</b> in thought.");
    EXPECT_EQ(r.content, "Hello! How can I help?\n");
    EXPECT_TRUE(r.calls.empty());
    // Whatever the pieces, no marker leaks into the content as it streams.
    for (size_t step = 1; step < 12; ++step) {
        std::string leaked;
        streamed(f, kAnalysis + "hm" + kNext + "<|channel|>final<|message|>Hi", step, &leaked);
        EXPECT_EQ(leaked, "Hi") << step;
    }
    // Without tools the reply is still taken apart.
    const ParsedReply plain =
        parse_tool_calls(f, kAnalysis + "x" + kNext + "<|channel|>final" + "<|message|>y");
    EXPECT_EQ(plain.content, "y");
    EXPECT_EQ(plain.reasoning, "x");
    // gpt-oss-20b sometimes opens with a stray commentary header; a preamble to the user (a
    // commentary message to no one) is content.
    const ParsedReply stray =
        parse_every_way(f, "<|channel|>commentary to=assistant<|channel|>analysis<|message|>think" +
                               kNext + "<|channel|>commentary<|message|>Checking. " + kNext +
                               "<|channel|>final<|message|>Done");
    EXPECT_EQ(stray.reasoning, "think");
    EXPECT_EQ(stray.content, "Checking. Done");
    // Text with no header at all (e.g. held to a JSON grammar) is content.
    const ParsedReply bare = parse_every_way(f, "{\"a\": \"to=x <|\"}");
    EXPECT_EQ(bare.content, "{\"a\": \"to=x <|\"}");
    EXPECT_EQ(bare.reasoning, "");
}

TEST(HarmonyReplies, CallsInEitherPlaceOfTheRecipient) {
    const ToolCallFormat& f = format("harmony");
    // Recipient in the channel header, as the model usually writes it.
    const ParsedReply a = parse_every_way(
        f, kAnalysis + "Need the weather." + kNext +
               "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
               "{\"city\": \"Paris\", \"days\": 2}");
    EXPECT_EQ(a.reasoning, "Need the weather.");
    EXPECT_EQ(a.content, "");
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].name, "get_weather");
    EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris","days":2})");
    // Recipient in the role header, as the template writes past calls; also first thing.
    const ParsedReply b =
        parse_every_way(f, " to=functions.get_time<|channel|>commentary json<|message|>{}");
    ASSERT_EQ(b.calls.size(), 1u);
    EXPECT_EQ(b.calls[0].name, "get_time");
    EXPECT_EQ(b.calls[0].arguments, "{}");
    EXPECT_EQ(b.content, "");
    const ParsedReply c =
        parse_every_way(f, kAnalysis +
                               "x<|end|><|start|>assistant to=functions.f<|channel|>commentary "
                               "<|constrain|>json<|message|>{\"q\": \"<|end\"}");
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].arguments, R"({"q":"<|end"})");
    // Calls written back with their <|call|> ends (render_calls) parse into as many calls.
    const ParsedReply two =
        parse_every_way(f, f.render_calls({{"a", "{}"}, {"b", R"({"x":[1]})"}}));
    ASSERT_EQ(two.calls.size(), 2u);
    EXPECT_EQ(two.calls[1].name, "b");
    EXPECT_EQ(two.calls[1].arguments, R"({"x":[1]})");
}

// A long call's body, held whole until its end, full of near misses of the ends: found in any
// pieces, the search resuming where the last piece's stopped.
TEST(HarmonyReplies, LongCallsWithNearMissEndsParseInAnyPieces) {
    const ToolCallFormat& f = format("harmony");
    std::string text;
    for (int i = 0; i < 300; ++i) text += "<|end" + std::string(i % 5, 'y') + "<|cal<|ret";
    const std::string reply = kAnalysis + "Write it." + kNext +
                              "<|channel|>commentary to=functions.write <|constrain|>json"
                              "<|message|>{\"text\": \"" +
                              text + "\"}<|call|>";
    const ParsedReply whole = parse_tool_calls(f, reply);
    ASSERT_EQ(whole.calls.size(), 1u);
    EXPECT_EQ(whole.calls[0].arguments, ojson({{"text", text}}).dump());
    for (size_t step : {1, 2, 3, 6, 7, 8, 64, 1000})
        expect_same(streamed(f, reply, step), whole, "step " + std::to_string(step));
}

TEST(HarmonyReplies, MalformedMessagesStayText) {
    const ToolCallFormat& f = format("harmony");
    const std::string call = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>";
    for (const std::string& body : {std::string("{\"a\": "), std::string("[1, 2]"),
                                    std::string("not json"), std::string("")}) {
        const ParsedReply r = parse_every_way(f, call + body);
        EXPECT_EQ(r.content, call + body);
        EXPECT_TRUE(r.calls.empty()) << body;
    }
    // A message to a tool we do not run, and a header never finished: as written.
    const std::string browse =
        "<|channel|>commentary to=browser.search <|constrain|>json<|message|>{\"q\": 1}";
    EXPECT_EQ(parse_every_way(f, browse).content, browse);
    EXPECT_EQ(parse_every_way(f, "<|channel|>fin").content, "<|channel|>fin");
    // A header cut by a message end, or one far too long: its mark goes out as text.
    EXPECT_EQ(parse_every_way(f, "<|channel|>final<|end|>Hi").content, "<|channel|>finalHi");
    const std::string junk = "<|channel|>" + std::string(300, 'x') + "<|message|>y";
    EXPECT_EQ(parse_every_way(f, junk).content, junk);
    // Without tools offered a call is text too.
    const std::string reply = call + "{\"a\": 1}";
    for (size_t step : {size_t{1}, size_t{7}, reply.size()}) {
        const ParsedReply r = streamed(f, reply, step, nullptr, /*parse_calls=*/false);
        EXPECT_EQ(r.content, reply);
        EXPECT_TRUE(r.calls.empty());
    }
}

// Random mixes of harmony's marks and text: the same answer whole and in pieces of every size
// (what fuzz/tool_call_fuzz.cpp checks for every format, here with the reasoning too).
TEST(HarmonyReplies, AnySplitGivesTheWholeReplysAnswer) {
    const ToolCallFormat& f = format("harmony");
    const std::vector<std::string> parts = {
        "<|channel|>", "<|message|>", "<|start|>",  "<|end|>", "<|call|>", "<|constrain|>",
        "analysis",    "final",       "commentary", " to=",    "to=",      "functions.f",
        "assistant",   " json",       "{\"a\": 1}", "{",       "<|",       "<",
        "|",           "x",           " ",          "\n"};
    std::mt19937 rng(7);
    for (int i = 0; i < 400; ++i) {
        std::string reply;
        const int n = 1 + static_cast<int>(rng() % 14);
        for (int k = 0; k < n; ++k) reply += parts[rng() % parts.size()];
        const ParsedReply whole = parse_tool_calls(f, reply);
        for (size_t step = 1; step <= 16; ++step)
            expect_same(streamed(f, reply, step), whole, reply + " step " + std::to_string(step));
    }
}

TEST(HarmonyReplies, GrammarAllowsReasoningThenOneCall) {
    const ToolCallFormat& f = format("harmony");
    const std::string gbnf = f.grammar(weather_tools(), true);
    GrammarMatcher m(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
    const std::string args = R"({"city": "Paris", "unit": "celsius"})";
    for (const std::string& ok : std::vector<std::string>{
             "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + args,
             " to=functions.get_weather<|channel|>commentary json<|message|>" + args,
             "<|channel|>analysis to=functions.now<|message|>{}",
             kAnalysis + "Tricky: a < b, <| x, <|en, <|end <<|end| y<" + kNext +
                 "<|channel|>commentary<|message|>One moment." + kNext +
                 "<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}",
         }) {
        EXPECT_TRUE(m.matches(ok)) << ok << "\n" << gbnf;
        EXPECT_EQ(parse_tool_calls(f, ok).calls.size(), 1u) << ok;
    }
    for (const std::string& bad : std::vector<std::string>{
             "<|channel|>final<|message|>Sunny.",
             kAnalysis + "a<|end|>b" + kNext +
                 "<|channel|>commentary to=functions.now<|message|>{}",
             kAnalysis + "unfinished thought",
             "<|channel|>commentary to=functions.get_weather<|message|>{\"city\": 3}",
             "<|channel|>commentary to=functions.later<|message|>{}",
             "<|channel|>commentary to=functions.now<|message|>{}<|end|>",
         }) {
        EXPECT_FALSE(m.matches(bad)) << bad;
    }
}

TEST(HarmonyReplies, ContentGrammarHoldsTheFinalMessageAfterReasoning) {
    const ToolCallFormat& f = format("harmony");
    ASSERT_NE(f.content_grammar, nullptr);
    // A user grammar whose rule names collide with the added ones ("text", "prelude"), whose
    // literals, classes, counts and comments hold words that are not rule names.
    const std::string user = R"(root ::= "{" ws text ws "}"  # "root" text [prelude]
text ::= "\"root\" " [a-z\]]{1,3} prelude
prelude ::= "!" | "?"
ws ::= " "?)";
    const std::string gbnf = f.content_grammar(user);
    GrammarMatcher m(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
    const std::string answer = R"({ "root" ab]! })";
    for (const std::string& ok : std::vector<std::string>{
             "<|channel|>final<|message|>" + answer,
             kAnalysis + "Think <|en first." + kNext + "<|channel|>final<|message|>" + answer,
             kAnalysis + "a" + kNext + kAnalysis + "b" + kNext +
                 "<|channel|>final <|constrain|>json<|message|>{\"root\" z?}",
             "<|channel|>final json<|message|>" + answer,
         }) {
        EXPECT_TRUE(m.matches(ok)) << ok << "\n" << gbnf;
        EXPECT_EQ(parse_tool_calls(f, ok).content.substr(0, 1), "{") << ok;
    }
    for (const std::string& bad : std::vector<std::string>{
             answer,                                           // no channel header
             "<|channel|>final<|message|>{ \"root\" abcd! }",  // four letters: {1,3}
             "<|channel|>final<|message|>{ \"root\" a }",      // no prelude rule's mark
             kAnalysis + "unfinished" + "<|channel|>final<|message|>" + answer,
             "<|channel|>analysis<|message|>" + answer,  // not the final channel
             // A preamble: llama.cpp's grammar for a response format has none either.
             "<|channel|>commentary<|message|>b" + kNext + "<|channel|>final<|message|>" + answer,
         }) {
        EXPECT_FALSE(m.matches(bad)) << bad << "\n" << gbnf;
    }
    // Formats whose replies are all content leave a grammar as it is.
    EXPECT_EQ(format("hermes").content_grammar, nullptr);
}

}  // namespace
}  // namespace tandem
