// Unit tests of the Jinja interpreter: statements, expressions, scoping and whitespace control.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace tandem {
namespace {

using nlohmann::ordered_json;
using testing::render_jinja;

TEST(JinjaStatements, TextAndExpressions) {
    EXPECT_EQ(render_jinja("Hello {{ name }}!", {{"name", "World"}}), "Hello World!");
    EXPECT_EQ(render_jinja("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -7 // 2 }}"), "7 9 3 1 -4");
    EXPECT_EQ(render_jinja("{{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }}"), "3.5 2.0 1024 64");
    EXPECT_EQ(render_jinja("{{ 'a' ~ 1 ~ 2.5 ~ true }}"), "a12.5true");
    EXPECT_EQ(render_jinja("{{ 'a' + 'b' }} {{ 'n' + 1 }} {{ [1] + [2, 3] }}"), "ab n1 [1, 2, 3]");
    EXPECT_EQ(render_jinja("{{ \"x\" 'y' }}"), "xy");  // adjacent literals concatenate
    EXPECT_EQ(render_jinja("{{ none }}|{{ undefined_var }}|{{ true }}|{{ False }}|{{ 1.0 }}|{{ -0.5 }}"), "||true|false|1.0|-0.5");
    EXPECT_EQ(render_jinja("{{ [1, 'a', none] }} {{ {'k': [true]} }}"), "[1, \"a\", null] {\"k\": [true]}");
}

TEST(JinjaStatements, ComparisonsAndLogic) {
    EXPECT_EQ(render_jinja("{{ 1 < 2 }} {{ 2 <= 1 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 'a' < 'b' }}"), "true false true true true");
    EXPECT_EQ(render_jinja("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"), "true true true true");
    EXPECT_EQ(render_jinja("{{ 'x' in missing }} {{ 'x' not in missing }}"), "false true");
    EXPECT_EQ(render_jinja("{{ 0 or 'b' }} {{ 1 and 'c' }} {{ [] or 'empty' }} {{ not [] }} {{ not not 1 }}"), "b c empty true true");
    EXPECT_EQ(render_jinja("{{ 'y' if x else 'n' }}{{ 'y' if not x else 'n' }}{{ 'never' if x }}", {{"x", false}}), "ny");
    EXPECT_EQ(render_jinja("{{ 'a' if false else 'b' if true else 'c' }}"), "b");
    EXPECT_EQ(render_jinja("{{ missing == none }} {{ none == none }} {{ 1 == true }}"), "true true true");
}

TEST(JinjaStatements, AttributesSubscriptsAndSlices) {
    ordered_json vars = {{"m", {{"role", "user"}, {"items", 5}}}, {"xs", {10, 20, 30, 40}}, {"s", "héllo"}};
    EXPECT_EQ(render_jinja("{{ m.role }} {{ m['role'] }} {{ m.items }} {{ m.nope }}|", vars), "user user 5 |");
    EXPECT_EQ(render_jinja("{{ xs[0] }} {{ xs[-1] }} {{ xs.1 }} {{ xs[9] }}|", vars), "10 40 20 |");
    EXPECT_EQ(render_jinja("{{ xs[1:3] }} {{ xs[::-1] }} {{ xs[:2] }} {{ xs[2:] }} {{ xs[::2] }}", vars),
              "[20, 30] [40, 30, 20, 10] [10, 20] [30, 40] [10, 30]");
    EXPECT_EQ(render_jinja("{{ s[1] }} {{ s[::-1] }} {{ s[1:3] }} {{ s|length }} {{ s.length }}", vars), "é olléh él 5 5");
    EXPECT_EQ(render_jinja("{{ none.x }}|{{ (1).x }}|", vars), "||");
}

TEST(JinjaStatements, IfElifElse) {
    const char* tpl = "{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}many{% endif %}";
    EXPECT_EQ(render_jinja(tpl, {{"x", 1}}), "one");
    EXPECT_EQ(render_jinja(tpl, {{"x", 2}}), "two");
    EXPECT_EQ(render_jinja(tpl, {{"x", 3}}), "three");
    EXPECT_EQ(render_jinja(tpl, {{"x", 9}}), "many");
    EXPECT_EQ(render_jinja("{% if missing %}y{% endif %}|{% if missing is defined %}y{% endif %}"), "|");
}

TEST(JinjaStatements, ForLoopVariables) {
    ordered_json vars = {{"xs", {"a", "b", "c"}}};
    EXPECT_EQ(render_jinja("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                           "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ x }};{% endfor %}", vars),
              "1032truefalse3a;2121falsefalse3b;3210falsetrue3c;");
    EXPECT_EQ(render_jinja("{% for x in xs %}{{ loop.previtem }}>{{ x }}<{{ loop.nextitem }} {% endfor %}", vars),
              ">a<b a>b<c b>c< ");
    EXPECT_EQ(render_jinja("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
    EXPECT_EQ(render_jinja("{% for x in missing %}x{% else %}none{% endfor %}"), "none");
    EXPECT_EQ(render_jinja("{% for x in range(10) if x is odd %}{{ x }}{% endfor %}"), "13579");
    EXPECT_EQ(render_jinja("{% for x in range(10) if x > 20 %}{{ x }}{% else %}no{% endfor %}"), "no");
    EXPECT_EQ(render_jinja("{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "02");
    EXPECT_EQ(render_jinja("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}"), "3,7,");
    EXPECT_EQ(render_jinja("{% for (a, b) in [[1, 2]] %}{{ a }}{{ b }}{% endfor %}"), "12");
    EXPECT_EQ(render_jinja("{% for c in 'héj' %}[{{ c }}]{% endfor %}"), "[h][é][j]");
}

TEST(JinjaStatements, ForOverDicts) {
    ordered_json vars = {{"d", {{"b", 1}, {"a", 2}}}};
    EXPECT_EQ(render_jinja("{% for k in d %}{{ k }}{% endfor %}", vars), "ba");  // insertion order
    EXPECT_EQ(render_jinja("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", vars), "b=1;a=2;");
    EXPECT_EQ(render_jinja("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}", vars), "b=1;a=2;");
    EXPECT_EQ(render_jinja("{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %}", vars), "a=2;b=1;");
    EXPECT_EQ(render_jinja("{{ d.keys() }} {{ d.values() }} {{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }}", vars),
              "[\"b\", \"a\"] [1, 2] 2 dflt ");
}

TEST(JinjaStatements, SetAndScoping) {
    EXPECT_EQ(render_jinja("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
    // A for loop has its own scope: assignments inside do not leak out.
    EXPECT_EQ(render_jinja("{% set x = 1 %}{% for i in [1] %}{% set x = 5 %}{% endfor %}{{ x }}"), "1");
    EXPECT_EQ(render_jinja("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
    EXPECT_EQ(render_jinja("{% set block %}Hi {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[Hi 2]");
    EXPECT_EQ(render_jinja("{% set ns = namespace(n=0, s='') %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
                           "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}"),
              "3 012");
    EXPECT_EQ(render_jinja("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"), "12");
}

TEST(JinjaStatements, Macros) {
    EXPECT_EQ(render_jinja("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
                           "{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }}"),
              "Hello, Ann! Hi, Bob! Yo, Cy!");
    EXPECT_EQ(render_jinja("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
    EXPECT_EQ(render_jinja("{% macro f() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, k=3) }}"), "[1, 2]{\"k\": 3}");
    EXPECT_EQ(render_jinja("{% macro f(a) %}{{ a }}{% endmacro %}{% set out = f('x') %}{{ out ~ out }}"), "xx");
    EXPECT_EQ(render_jinja("{% macro f(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ f('x') }}"), "x!");
}

TEST(JinjaStatements, CallBlocksAndFilterBlocks) {
    EXPECT_EQ(render_jinja("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                           "{% call wrap('b') %}bold{% endcall %}"),
              "<b>bold</b>");
    EXPECT_EQ(render_jinja("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                           "{% call(item) each([1, 2]) %}({{ item }}){% endcall %}"),
              "(1)(2)");
    EXPECT_EQ(render_jinja("{% filter upper %}shout {{ 'it' }}{% endfilter %}"), "SHOUT IT");
    EXPECT_EQ(render_jinja("{% filter replace('a', 'o') %}banana{% endfilter %}"), "bonono");
}

TEST(JinjaStatements, LiteralsListsDictsTuples) {
    EXPECT_EQ(render_jinja("{{ [1, [2, 3], {'a': (4, 5)}] }}"), "[1, [2, 3], {\"a\": [4, 5]}]");
    EXPECT_EQ(render_jinja("{{ {'a': {'b': 1}} }}"), "{\"a\": {\"b\": 1}}");  // `}}` inside a dict literal
    EXPECT_EQ(render_jinja("{{ 'it\\'s' }} {{ \"tab\\there\" }} {{ '\\u00e9\\x41' }} {{ '\\ud83d\\ude00' }}"), "it's tab\there éA 😀");
    EXPECT_EQ(render_jinja("{{ (1, 2)|length }} {{ ()|length }} {{ (1,)|length }}"), "2 0 1");
}

TEST(JinjaStatements, WhitespaceControl) {
    // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before it goes.
    EXPECT_EQ(render_jinja("{% if true %}\n  yes\n{% endif %}\nafter"), "  yes\nafter");
    EXPECT_EQ(render_jinja("line\n    {% if true %}\nx\n    {% endif %}\nend"), "line\nx\nend");
    // `-` strips all whitespace on that side, newlines included.
    EXPECT_EQ(render_jinja("a   {{- 'b' -}}   c"), "abc");
    EXPECT_EQ(render_jinja("a \n {%- if true -%} \n b \n {%- endif -%} \n c"), "abc");
    EXPECT_EQ(render_jinja("a {#- comment -#} b"), "ab");
    EXPECT_EQ(render_jinja("a {# comment #} b"), "a  b");
    // Expressions do not trim the newline after them; one trailing newline of the template goes.
    EXPECT_EQ(render_jinja("{{ 'x' }}\ny\n"), "x\ny");
    EXPECT_EQ(render_jinja("  {{ 'x' }}"), "  x");  // lstrip_blocks leaves {{ alone
    // transformers' {% generation %} tags are removed.
    EXPECT_EQ(render_jinja("a{% generation %}b{% endgeneration %}c"), "abc");
}

TEST(JinjaStatements, ChatVariables) {
    ChatTemplate t("{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
                   "{% if tools is defined %}T{{ tools|length }}{% endif %}{% if add_generation_prompt %}>{% endif %}"
                   "{{ eos_token }}{{ custom }}",
                   "<s>", "</s>");
    ordered_json messages = {{{"role", "user"}, {"content", "hi"}}};
    EXPECT_EQ(t.render(messages, nullptr, true, {{"custom", "!"}}), "<s>user:hi;></s>!");
    EXPECT_EQ(t.render(messages, ordered_json::array({1, 2}), false, nullptr), "<s>user:hi;T2</s>");
}

TEST(JinjaStatements, StrftimeNowIsDeterministicWhenPinned) {
    ChatTemplateOptions options;
    options.now = 1741350896;  // 2025-03-07 12:34:56 UTC
    setenv("TZ", "UTC", 1);
    tzset();
    EXPECT_EQ(render_jinja("{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%B') }}",
                           ordered_json::object(), options),
              "2025-03-07 12:34 07 Mar 2025 March");
}

}  // namespace
}  // namespace tandem
