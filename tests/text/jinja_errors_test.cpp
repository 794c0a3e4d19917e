// Unit tests of the Jinja interpreter's failure modes: syntax and runtime errors name the line
// and column, raise_exception surfaces its message, and hostile templates hit limits instead
// of crashing or hanging.
#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "jinja_test_util.h"

namespace tandem {
namespace {

using nlohmann::ordered_json;
using testing::jinja_error;
using testing::render_jinja;

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
    EXPECT_THROW(ChatTemplate("{% if x %}"), Error);
    EXPECT_EQ(jinja_error("line one\n{% if x %}\nno end"),
              "chat template: line 2 col 1: unclosed 'if' block (missing {% endif %})");
    EXPECT_EQ(jinja_error("{{ 1 + }}"), "chat template: line 1 col 8: unexpected '}}'");
    EXPECT_EQ(jinja_error("ab\n  {{ x | }}"), "chat template: line 2 col 10: expected a filter name after '|', found '}}'");
    EXPECT_EQ(jinja_error("{% frobnicate %}"), "chat template: line 1 col 1: unknown statement 'frobnicate'");
    EXPECT_EQ(jinja_error("{{ 'abc }}"), "chat template: line 1 col 4: unterminated string literal");
    EXPECT_EQ(jinja_error("{# never closed"), "chat template: line 1 col 1: unterminated comment (missing #})");
    EXPECT_EQ(jinja_error("{{ a ! b }}"), "chat template: line 1 col 6: unexpected character '!'");
    EXPECT_EQ(jinja_error("{% break %}"), "chat template: line 1 col 1: 'break' outside of a loop");
    EXPECT_EQ(jinja_error("{{ f(a=1, 2) }}"), "chat template: line 1 col 11: positional argument follows keyword argument");
    EXPECT_EQ(jinja_error("{{ x[] }}"), "chat template: line 1 col 5: empty subscript '[]'");
    EXPECT_EQ(jinja_error("{{ 99999999999999999999 }}"), "chat template: line 1 col 4: integer literal out of range: 99999999999999999999");
    EXPECT_EQ(jinja_error("{% for 1 in x %}{% endfor %}"), "chat template: line 1 col 8: expected a name or a tuple of names after 'for'");
    EXPECT_EQ(jinja_error("{% endif %}"), "chat template: line 1 col 1: unknown statement 'endif'");
}

TEST(JinjaErrors, RuntimeErrorsNameLineAndColumn) {
    EXPECT_EQ(jinja_error("ok\n{{ missing.attr }}"), "chat template: line 2 col 11: 'missing' is undefined");
    EXPECT_EQ(jinja_error("{{ missing() }}"), "chat template: line 1 col 4: 'missing' is undefined");
    EXPECT_EQ(jinja_error("{{ 1 / 0 }}"), "chat template: line 1 col 6: division by zero");
    EXPECT_EQ(jinja_error("{{ [1]|frob }}"), "chat template: line 1 col 8: unknown filter 'frob'");
    EXPECT_EQ(jinja_error("{{ 1 is frob }}"), "chat template: line 1 col 6: unknown test 'frob'");
    EXPECT_EQ(jinja_error("{{ 'a' - 1 }}"), "chat template: line 1 col 8: unsupported operand types for '-': string and integer");
    EXPECT_EQ(jinja_error("{% for x in 5 %}{% endfor %}"), "chat template: line 1 col 1: cannot iterate over integer");
    EXPECT_EQ(jinja_error("{% set x = 1 %}{% set x.y = 2 %}"), "chat template: line 1 col 16: cannot assign attribute 'y' on a integer (only on a namespace)");
    EXPECT_EQ(jinja_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "chat template: line 1 col 34: macro 'm' takes at most 1 argument(s)");
    EXPECT_EQ(jinja_error("{% for a, b in [[1]] %}{% endfor %}"), "chat template: line 1 col 1: too few values to unpack (expected 2, got 1)");
}

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplatesMessage) {
    EXPECT_EQ(jinja_error("{% if true %}\n  {{ raise_exception('Roles must alternate!') }}\n{% endif %}"),
              "chat template: line 2 col 6: raise_exception: Roles must alternate!");
    ChatTemplate t("{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
                   "{{ raise_exception('bad role ' ~ m.role) }}{% endif %}{% endfor %}");
    try {
        t.render(ordered_json::array({{{"role", "robot"}}}), nullptr, false, nullptr);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("raise_exception: bad role robot"), std::string::npos) << e.what();
    }
}

TEST(JinjaErrors, InfiniteWorkHitsTheStepLimit) {
    ChatTemplateOptions options;
    options.max_steps = 100000;
    std::string error = jinja_error("{% for i in range(1000) %}{% for j in range(1000) %}{{ '' }}{% endfor %}{% endfor %}",
                                    ordered_json::object(), options);
    EXPECT_NE(error.find("work limit"), std::string::npos) << error;
    // Exponential recursion ends too.
    error = jinja_error("{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ordered_json::object(), options);
    EXPECT_FALSE(error.empty());
}

TEST(JinjaErrors, DeepRecursionHitsTheDepthLimit) {
    std::string error = jinja_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    EXPECT_NE(error.find("recursion too deep"), std::string::npos) << error;
    // Deeply nested syntax is refused by the parser.
    std::string nested(5000, '(');
    EXPECT_NE(jinja_error("{{ " + nested + "1" + std::string(5000, ')') + " }}").find("nested too deeply"), std::string::npos);
    std::string ifs;
    for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
    EXPECT_NE(jinja_error(ifs).find("nested too deeply"), std::string::npos);
    EXPECT_NE(jinja_error("{{ " + std::string(100000, '-') + "1 }}").find("nested too deeply"), std::string::npos);
}

TEST(JinjaErrors, HugeOutputHitsTheSizeLimit) {
    ChatTemplateOptions options;
    options.max_output_bytes = 1 << 20;
    std::string error = jinja_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                                    ordered_json::object(), options);
    EXPECT_NE(error.find("exceeds"), std::string::npos) << error;
    error = jinja_error("{{ 'x' * 100000000 }}", ordered_json::object(), options);
    EXPECT_NE(error.find("exceeds"), std::string::npos) << error;
    error = jinja_error("{% for i in range(100000) %}{{ 'abcdefghijklmnop' }}{% endfor %}", ordered_json::object(), options);
    EXPECT_NE(error.find("exceeds"), std::string::npos) << error;
    // Lists that double grow past the item limit, and tojson of a list of huge strings stops early.
    error = jinja_error("{% set ns = namespace(l=[1]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}");
    EXPECT_NE(error.find("items"), std::string::npos) << error;
    EXPECT_NE(jinja_error("{{ range(100000000) }}").find("items"), std::string::npos);
    error = jinja_error("{% set s = 'x' * 500000 %}{{ [s, s, s, s, s]|tojson }}", ordered_json::object(), options);
    EXPECT_NE(error.find("exceeds"), std::string::npos) << error;
}

TEST(JinjaErrors, CyclicNamespacesDoNotCrash) {
    std::string error = jinja_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}");
    EXPECT_NE(error.find("nesting too deep"), std::string::npos) << error;
    error = jinja_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
    EXPECT_NE(error.find("nesting too deep"), std::string::npos) << error;
}

TEST(JinjaErrors, EscapedCallerCannotOutliveItsScope) {
    // caller() kept past its call block still works (scopes are shared, never dangling).
    EXPECT_EQ(render_jinja("{% set ns = namespace() %}{% macro keep() %}{% set ns.c = caller %}{% endmacro %}"
                           "{% call keep() %}kept{% endcall %}{{ ns.c() }}"),
              "kept");
}

// Random mutations of a realistic template: each one renders or throws tandem::Error, never
// crashes (the suite also runs under ASan/UBSan).
TEST(JinjaErrors, MutatedTemplatesNeverCrash) {
    const std::string base =
        "{%- set ns = namespace(first=true) -%}{%- for m in messages if m.role != 'x' -%}\n"
        "  {%- if m.role == 'system' %}<sys>{{ m.content|trim }}</sys>{% elif m.tool_calls %}"
        "{% for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments|tojson(indent=2) }}){% endfor %}"
        "{% else %}{{ '<' ~ m.role ~ '>' + m.content[:5] + (m.content.split(' ')|join('_'))|upper }}{% endif -%}\n"
        "{%- macro f(a, b=2) %}{{ a * b }}{{ caller() if caller is defined }}{% endmacro %}{{ f(loop.index) }}\n"
        "{%- endfor %}{{ messages|map(attribute='role')|unique|list|length }}{# done #}";
    ordered_json messages = ordered_json::parse(R"([
        {"role": "system", "content": " be nice "},
        {"role": "user", "content": "hello there world"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, 2]}}}]}
    ])");
    const std::string alphabet = "{}%#-+*/|~()[]:,.'\"=<>!abcdefgilmnorstux0123456789 \n\\";
    std::mt19937 rng(1234);
    ChatTemplateOptions options;
    options.max_steps = 200000;
    int rendered = 0, failed = 0;
    for (int round = 0; round < 3000; ++round) {
        std::string t = base;
        int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            size_t pos = rng() % t.size();
            switch (rng() % 3) {
                case 0: t.erase(pos, 1 + rng() % 3); break;
                case 1: t.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
                default: t[pos] = alphabet[rng() % alphabet.size()];
            }
            if (t.empty()) t = "x";
        }
        try {
            ChatTemplate ct(t, "<s>", "</s>", options);
            ct.render(messages, nullptr, round % 2 == 0, nullptr);
            ++rendered;
        } catch (const Error&) {
            ++failed;
        }
    }
    EXPECT_GT(rendered, 0);
    EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace tandem
