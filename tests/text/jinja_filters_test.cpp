// Unit tests of the Jinja builtins: filters, tests, and methods of strings, lists and dicts.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace tandem {
namespace {

using nlohmann::ordered_json;
using testing::render_jinja;

TEST(JinjaFilters, Tojson) {
    ordered_json vars = {{"v", {{"name", "x\"y"}, {"list", {1, 2.5, true, nullptr}}, {"empty", ordered_json::object()},
                                {"uni", "é😀\n\u0001"}}}};
    EXPECT_EQ(render_jinja("{{ v|tojson }}", vars),
              "{\"name\": \"x\\\"y\", \"list\": [1, 2.5, true, null], \"empty\": {}, \"uni\": \"é😀\\n\\u0001\"}");
    EXPECT_EQ(render_jinja("{{ v.list|tojson(indent=2) }}", vars), "[\n  1,\n  2.5,\n  true,\n  null\n]");
    EXPECT_EQ(render_jinja("{{ {'a': [], 'b': {'c': 1}}|tojson(indent=4) }}"),
              "{\n    \"a\": [],\n    \"b\": {\n        \"c\": 1\n    }\n}");
    EXPECT_EQ(render_jinja("{{ v.uni|tojson(ensure_ascii=true) }}", vars), "\"\\u00e9\\ud83d\\ude00\\n\\u0001\"");
    EXPECT_EQ(render_jinja("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
    EXPECT_EQ(render_jinja("{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}"), "{\"a\":[1,2]}");
    EXPECT_EQ(render_jinja("{{ missing|tojson }} {{ 's'|tojson }} {{ 1.0|tojson }} {{ 1.5|tojson }}"), "null \"s\" 1 1.5");
    // Integral JSON floats are integers, as in JavaScript; other floats print like JavaScript.
    EXPECT_EQ(render_jinja("{{ x|tojson }} {{ x }} {{ y }} {{ z|tojson }} {{ w|tojson }}", {{"x", 2.0}, {"y", 0.1}, {"z", 1e-7}, {"w", 1.5e300}}),
              "2 2 0.1 1e-7 1.5e+300");
}

TEST(JinjaFilters, StringFilters) {
    EXPECT_EQ(render_jinja("[{{ '  a b  '|trim }}] [{{ 'xxaxx'|trim('x') }}]"), "[a b] [a]");
    EXPECT_EQ(render_jinja("{{ 'Hello'|upper }} {{ 'Hello'|lower }} {{ 'hello wORLD'|title }} {{ 'hello World'|capitalize }}"),
              "HELLO hello Hello WORLD Hello World");
    EXPECT_EQ(render_jinja("{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }}"), "a+b+c bba");
    EXPECT_EQ(render_jinja("{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(1, blank=true) }}"),
              "a\n    b\n\n    c|  a\n  b|a\n \n b");
    EXPECT_EQ(render_jinja("{{ 'abc'|length }} {{ 'abc'|count }} {{ 'abc'|list }} {{ 'abc'|first }} {{ 'abc'|last }} {{ 'abc'|reverse }}"),
              "3 3 [\"a\", \"b\", \"c\"] a c cba");
    EXPECT_EQ(render_jinja("{{ 'one two  three'|wordcount }} {{ '<a href=\"x\">&</a>'|escape }} [{{ 'ab'|center(6) }}]"),
              "3 &lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt; [  ab  ]");
    EXPECT_EQ(render_jinja("{{ '%s is %d years'|format('Ann', 30) }} {{ 'x'|safe }} {{ 'ab'|join('-') }}"), "Ann is 30 years x a-b");
}

TEST(JinjaFilters, NumberFilters) {
    EXPECT_EQ(render_jinja("{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ true|int }}"), "42 4 0 7 3 1");
    EXPECT_EQ(render_jinja("{{ '2.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ -3|abs }} {{ -2.5|abs }}"), "2.5 0.0 3.0 3 2.5");
    EXPECT_EQ(render_jinja("{{ 2.567|round(2) }} {{ 2.5|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }}"),
              "2.57 3.0 3.0 2.0");
    EXPECT_EQ(render_jinja("{{ 5|string }} {{ 5.0|string }} {{ true|string }} {{ [1]|string }}"), "5 5.0 true [1]");
}

TEST(JinjaFilters, ListFilters) {
    ordered_json vars = {{"xs", {3, 1, 2}},
                         {"people", {{{"name", "bob"}, {"age", 30}, {"admin", true}},
                                     {{"name", "Al"}, {"age", 25}},
                                     {{"name", "cy"}, {"age", 35}, {"admin", false}}}},
                         {"words", {"b", "A", "c", "a"}}};
    EXPECT_EQ(render_jinja("{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ words|sort }} {{ words|sort(case_sensitive=true) }}", vars),
              "[1, 2, 3] [3, 2, 1] [\"A\", \"a\", \"b\", \"c\"] [\"A\", \"a\", \"b\", \"c\"]");
    EXPECT_EQ(render_jinja("{{ people|sort(attribute='age')|map(attribute='name')|join(',') }}", vars), "Al,bob,cy");
    EXPECT_EQ(render_jinja("{{ people|selectattr('admin')|map(attribute='name')|list }}", vars), "[\"bob\"]");
    EXPECT_EQ(render_jinja("{{ people|rejectattr('admin')|map(attribute='name')|list }}", vars), "[\"Al\", \"cy\"]");
    EXPECT_EQ(render_jinja("{{ people|selectattr('age', 'equalto', 25)|map(attribute='name')|first }}", vars), "Al");
    EXPECT_EQ(render_jinja("{{ people|selectattr('admin', 'defined')|list|length }}", vars), "2");
    EXPECT_EQ(render_jinja("{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }}", vars),
              "[3, 1] [2] [1, \"a\"]");
    EXPECT_EQ(render_jinja("{{ ['a', 'b']|map('upper')|list }} {{ people|map(attribute='missing', default='?')|join }}", vars),
              "[\"A\", \"B\"] ???");
    EXPECT_EQ(render_jinja("{{ xs|first }} {{ xs|last }} {{ xs|length }} {{ xs|count }} {{ xs|reverse }} {{ xs|list }}", vars),
              "3 2 3 3 [2, 1, 3] [3, 1, 2]");
    EXPECT_EQ(render_jinja("{{ [1, 2, 1, 'a', 'a']|unique }} {{ xs|min }} {{ xs|max }} {{ xs|sum }} {{ people|sum(attribute='age') }}", vars),
              "[1, 2, \"a\"] 1 3 6 90");
    EXPECT_EQ(render_jinja("{{ [1, 2, 3, 4, 5]|batch(2) }} {{ [1, 2, 3]|batch(2, 0) }}"), "[[1, 2], [3, 4], [5]] [[1, 2], [3, 0]]");
    EXPECT_EQ(render_jinja("{{ [1, none, 'a', 2.0]|join('|') }} {{ words|join }}", vars), "1||a|2 bAca");
    EXPECT_EQ(render_jinja("{{ []|first }}|{{ missing|length }}|{{ missing|list }}|{{ missing|join }}|{{ missing|items }}"), "|0|[]||[]");
}

TEST(JinjaFilters, DictFilters) {
    ordered_json vars = {{"d", {{"b", 2}, {"A", 1}, {"c", 3}}}};
    EXPECT_EQ(render_jinja("{{ d|length }} {{ d|items }} {{ d|list }}", vars),
              "3 [[\"b\", 2], [\"A\", 1], [\"c\", 3]] [\"b\", \"A\", \"c\"]");
    EXPECT_EQ(render_jinja("{{ d|dictsort }} {{ d|dictsort(reverse=true)|first }} {{ d|dictsort(by='value')|last }}", vars),
              "[[\"A\", 1], [\"b\", 2], [\"c\", 3]] [\"c\", 3] [\"c\", 3]");
    EXPECT_EQ(render_jinja("{{ d|attr('c') }} {{ d|tojson }}", vars), "3 {\"b\": 2, \"A\": 1, \"c\": 3}");
}

TEST(JinjaFilters, DefaultFilter) {
    EXPECT_EQ(render_jinja("{{ missing|default('x') }} {{ missing|d('y') }} {{ ''|default('z') }}|{{ ''|default('z', true) }}"),
              "x y |z");
    EXPECT_EQ(render_jinja("{{ none|default('n') }}|{{ 0|default(5, boolean=true) }}|{{ missing|default }}|"), "|5||");
}

TEST(JinjaTests, TypeTests) {
    EXPECT_EQ(render_jinja("{{ 'a' is string }}{{ 1 is string }}{{ 1 is number }}{{ 1.5 is number }}{{ 1 is integer }}"
                           "{{ 1.5 is float }}{{ true is boolean }}{{ none is none }}{{ missing is none }}"),
              "truefalsetruetruetruetruetruetruefalse");
    EXPECT_EQ(render_jinja("{{ [] is iterable }}{{ 'x' is iterable }}{{ {} is iterable }}{{ {} is mapping }}{{ [] is mapping }}"
                           "{{ [] is sequence }}{{ {} is sequence }}{{ 1 is sequence }}"),
              "truetruefalsetruefalsetruetruefalse");
    EXPECT_EQ(render_jinja("{{ missing is defined }}{{ missing is undefined }}{{ x is defined }}{{ x is not none }}", {{"x", 0}}),
              "falsetruetruetrue");
    EXPECT_EQ(render_jinja("{{ true is true }}{{ 1 is true }}{{ false is false }}{{ range is callable }}{{ 'x' is callable }}"),
              "truefalsetruetruefalse");
}

TEST(JinjaTests, ValueTests) {
    EXPECT_EQ(render_jinja("{{ 3 is odd }}{{ 3 is even }}{{ 10 is divisibleby(5) }}{{ 10 is divisibleby 3 }}"), "truefalsetruefalse");
    EXPECT_EQ(render_jinja("{{ 1 is equalto 1 }}{{ 'a' is eq('a') }}{{ 1 is equalto '1' }}{{ 'abc' is lower }}{{ 'ABC' is upper }}"),
              "truetruefalsetruetrue");
    EXPECT_EQ(render_jinja("{{ 2 is gt(1) }}{{ 2 is lt 1 }}{{ 2 is ge(2) }}{{ 2 is le(1) }}{{ 2 is ne(3) }}{{ 2 is in([1, 2]) }}"),
              "truefalsetruefalsetruetrue");
    EXPECT_EQ(render_jinja("{{ none is sameas none }}{{ 1 is not odd }}"), "truefalse");
}

TEST(JinjaMethods, StringMethods) {
    EXPECT_EQ(render_jinja("[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ '\\nx\\n '.strip('\\n') }}]"),
              "[x][x  ][  x][x\n ]");
    EXPECT_EQ(render_jinja("{{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'ab cd'.title() }} {{ 'abc'.capitalize() }}"), "ABC abc Ab Cd Abc");
    EXPECT_EQ(render_jinja("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }}"),
              "true true true");
    EXPECT_EQ(render_jinja("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a b c'.rsplit(' ', 1) }}"),
              "[\"a\", \"b\", \"\", \"c\"] [\"a\", \"b\"] [\"a\", \"b,c\"] [\"a b\", \"c\"]");
    EXPECT_EQ(render_jinja("{{ 'x</think>y'.split('</think>')[-1] }} {{ 'aXbX'.replace('X', '-') }} {{ 'aaa'.replace('a', 'b', 1) }}"),
              "y a-b- baa");
    EXPECT_EQ(render_jinja("{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }}"), "2 3 -1 2");
    EXPECT_EQ(render_jinja("{{ ', '.join(['a', 'b']) }} {{ '{} + {} = {sum}'.format(1, 2, sum=3) }} {{ '{{x}}'.format() }}"),
              "a, b 1 + 2 = 3 {x}");
    EXPECT_EQ(render_jinja("{{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ 'a\\nb'.splitlines() }} {{ 'pre_x'.removeprefix('pre_') }}"),
              "true true [\"a\", \"b\"] x");
}

TEST(JinjaMethods, ListMethods) {
    EXPECT_EQ(render_jinja("{% set xs = [1] %}{% set _ = xs.append(2) %}{{ xs }} {{ xs.index(2) }} {{ xs.count(1) }} {{ xs.pop() }} {{ xs }}"),
              "[1, 2] 1 1 2 [1]");
}

TEST(JinjaGlobals, RangeNamespaceDict) {
    EXPECT_EQ(render_jinja("{{ range(3) }} {{ range(1, 4) }} {{ range(5, 0, -2) }} {{ range(0) }}"), "[0, 1, 2] [1, 2, 3] [5, 3, 1] []");
    EXPECT_EQ(render_jinja("{{ dict(a=1, b='x') }}"), "{\"a\": 1, \"b\": \"x\"}");
    EXPECT_EQ(render_jinja("{% set ns = namespace(items=[]) %}{{ ns.items }}"), "[]");
}

}  // namespace
}  // namespace tandem
