// JSON Schema to GBNF: documents the schema accepts match, others do not, and random walks
// through the grammar (what constrained sampling does) always give JSON that parses and holds
// to the schema. Unsupported keywords are refused, naming where.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/grammar.h"
#include "text/grammar_matcher.h"
#include "text/json_schema_grammar.h"

namespace tandem {
namespace {

using ojson = nlohmann::ordered_json;

GrammarMatcher schema_matcher(const std::string& schema) {
    const std::string gbnf = json_schema_grammar(ojson::parse(schema));
    try {
        return GrammarMatcher(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
    } catch (const Error& e) {
        ADD_FAILURE() << e.what() << "\n" << gbnf;
        throw;
    }
}

// A random sentence of the grammar, byte by byte, as a sampler under the grammar would pick:
// any byte the grammar allows, ending once it accepts (with growing odds, so walks end).
std::string random_walk(GrammarMatcher& m, std::mt19937& rng) {
    for (int attempt = 0; attempt < 20; ++attempt) {
        std::string out;
        GrammarMatcher::State s = m.start();
        while (out.size() < 3000) {
            std::vector<uint8_t> next;
            for (int b = 0; b < 256; ++b) {
                if (m.advance(s, static_cast<uint8_t>(b)) != GrammarMatcher::kDead)
                    next.push_back(static_cast<uint8_t>(b));
            }
            if (m.accepting(s) && (next.empty() || rng() % 4 == 0)) return out;
            if (next.empty()) break;
            // Prefer closing brackets and quotes a little, or walks through free text and
            // nested values grow long.
            uint8_t b = next[rng() % next.size()];
            for (uint8_t c : next) {
                if ((c == '"' || c == '}' || c == ']') && rng() % 8 == 0) b = c;
            }
            out += static_cast<char>(b);
            s = m.advance(s, b);
        }
    }
    ADD_FAILURE() << "no random walk reached an accepting state";
    return {};
}

std::string schema_error(const std::string& schema) {
    try {
        json_schema_grammar(ojson::parse(schema));
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "role": {"enum": ["admin", "user", 3, null]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 3},
    "address": {
      "type": "object",
      "properties": {"city": {"type": "string", "maxLength": 8}, "zip": {"type": ["string", "null"], "maxLength": 5}},
      "required": ["city"],
      "additionalProperties": false
    },
    "active": {"type": "boolean"},
    "kind": {"const": "person"}
  },
  "required": ["name", "age", "role", "kind"],
  "additionalProperties": false
})";

TEST(JsonSchemaGrammar, AcceptsValidDocumentsAndRefusesOthers) {
    GrammarMatcher m = schema_matcher(kPerson);
    EXPECT_TRUE(m.matches(R"({"name":"Ann","age":41,"role":"admin","kind":"person"})"));
    EXPECT_TRUE(m.matches(
        R"({ "name": "Bo", "age": -3, "role": null, "kind": "person", "height": 1.5e3, "tags": ["a", "bc"], "address": {"city": "Oslo", "zip": null}, "active": true })"));
    EXPECT_TRUE(
        m.matches("{\n  \"name\": \"\\\"q\\u00e9\",\n  \"age\": 0,\n  \"role\": 3,\n  \"kind\": "
                  "\"person\"\n}"));
    EXPECT_FALSE(m.matches(R"({"name":"Ann","age":41,"role":"admin"})"));  // kind missing
    EXPECT_FALSE(m.matches(R"({"name":"","age":41,"role":"admin","kind":"person"})"));  // minLength
    EXPECT_FALSE(m.matches(R"({"name":"Ann","age":4.5,"role":"admin","kind":"person"})"));
    EXPECT_FALSE(m.matches(R"({"name":"Ann","age":41,"role":"root","kind":"person"})"));
    EXPECT_FALSE(m.matches(R"({"name":"Ann","age":41,"role":"user","kind":"person","x":1})"));
    EXPECT_FALSE(m.matches(R"({"name":"Ann","age":41,"role":"user","kind":"person","tags":[]})"));
    EXPECT_FALSE(m.matches(R"({"name":"Ann","age":01,"role":"user","kind":"person"})"));
    EXPECT_FALSE(m.matches(R"({"name":"Ann","age":1,"role":"user","kind":"person","address":{}})"));
    EXPECT_FALSE(m.matches(R"({"name":"a)"
                           "\n"
                           R"(b","age":1,"role":"user","kind":"person"})"));
}

TEST(JsonSchemaGrammar, RandomWalksParseAndHoldToTheSchema) {
    GrammarMatcher m = schema_matcher(kPerson);
    std::mt19937 rng(11);
    for (int i = 0; i < 200; ++i) {
        const std::string text = random_walk(m, rng);
        nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        ASSERT_FALSE(j.is_discarded()) << text;
        ASSERT_TRUE(j.is_object()) << text;
        ASSERT_TRUE(j["name"].is_string()) << text;
        const size_t chars = nlohmann::json(j["name"]).get<std::string>().size();
        EXPECT_GE(chars, 1u) << text;
        ASSERT_TRUE(j["age"].is_number_integer()) << text;
        EXPECT_TRUE(j["role"] == "admin" || j["role"] == "user" || j["role"] == 3 ||
                    j["role"].is_null())
            << text;
        EXPECT_EQ(j["kind"], "person") << text;
        for (const auto& [key, value] : j.items()) {
            EXPECT_TRUE(key == "name" || key == "age" || key == "height" || key == "role" ||
                        key == "tags" || key == "address" || key == "active" || key == "kind")
                << text;
        }
        if (j.contains("tags")) {
            ASSERT_TRUE(j["tags"].is_array()) << text;
            EXPECT_GE(j["tags"].size(), 1u);
            EXPECT_LE(j["tags"].size(), 3u);
        }
        if (j.contains("address")) {
            EXPECT_TRUE(j["address"]["city"].is_string()) << text;
            EXPECT_TRUE(!j["address"].contains("zip") || j["address"]["zip"].is_null() ||
                        j["address"]["zip"].is_string());
        }
        if (j.contains("height")) {
            EXPECT_TRUE(j["height"].is_number()) << text;
        }
        if (j.contains("active")) {
            EXPECT_TRUE(j["active"].is_boolean()) << text;
        }
    }
}

TEST(JsonSchemaGrammar, OptionalPropertiesAnyOfRefsAndTuples) {
    GrammarMatcher opt = schema_matcher(
        R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})");
    for (const char* ok : {"{}", R"({"a":1})", R"({"b":1})", R"({"c":1})", R"({"a":1,"c":2})",
                           R"({"b":1,"c":2})", R"({"a":1,"b":2,"c":3})"}) {
        EXPECT_TRUE(opt.matches(ok)) << ok;
    }
    for (const char* bad : {R"({,"a":1})", R"({"a":1,})", R"({"c":1,"a":2})", R"({"a":1 "b":2})"}) {
        EXPECT_FALSE(opt.matches(bad)) << bad;
    }

    GrammarMatcher tree = schema_matcher(R"({
      "$defs": {"node": {"type": "object", "properties": {
         "value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}]},
         "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
         "required": ["value"]}},
      "$ref": "#/$defs/node"})");
    EXPECT_TRUE(
        tree.matches(R"({"value":1,"children":[{"value":"ab"},{"value":2,"children":[]}]})"));
    EXPECT_FALSE(tree.matches(R"({"value":1,"children":[{"value":"abcd"}]})"));
    EXPECT_FALSE(tree.matches(R"({"value":true})"));

    GrammarMatcher tuple = schema_matcher(
        R"({"type":"array","prefixItems":[{"type":"string","format":"date"},{"type":"boolean"}]})");
    EXPECT_TRUE(tuple.matches(R"(["2024-02-29",false])"));
    EXPECT_FALSE(tuple.matches(R"(["2024-13-01",false])"));
    EXPECT_FALSE(tuple.matches(R"(["2024-02-29"])"));

    GrammarMatcher all = schema_matcher(R"({"allOf":[
      {"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
      {"properties":{"y":{"type":"null"}},"required":["y"]}]})");
    EXPECT_TRUE(all.matches(R"({"x":1,"y":null})"));
    EXPECT_FALSE(all.matches(R"({"x":1})"));

    GrammarMatcher map = schema_matcher(
        R"({"type":"object","additionalProperties":{"type":"array","items":{"type":"integer"}}})");
    EXPECT_TRUE(map.matches(R"({"any key":[1,2],"other":[]})"));
    EXPECT_FALSE(map.matches(R"({"k":["x"]})"));

    GrammarMatcher any = schema_matcher("{}");
    EXPECT_TRUE(any.matches(R"([1,{"a":[true,null,"s"]},-2.5e-3])"));
    EXPECT_FALSE(any.matches("[1,]"));
}

TEST(JsonSchemaGrammar, JsonObjectGrammar) {
    GrammarMatcher m(std::make_shared<const Grammar>(Grammar::parse(json_object_grammar())));
    EXPECT_TRUE(m.matches(R"({"a": [1, 2.5, {"b": null}], "c": "\u00e9"})"));
    EXPECT_TRUE(m.matches("{}"));
    EXPECT_FALSE(m.matches("[]"));
    EXPECT_FALSE(m.matches("\"text\""));
    EXPECT_FALSE(m.matches(R"({"a": tru})"));
    std::mt19937 rng(5);
    for (int i = 0; i < 100; ++i) {
        const std::string text = random_walk(m, rng);
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
        ASSERT_TRUE(j.is_object()) << text;
    }
}

TEST(JsonSchemaGrammar, RefusesWhatItCannotEnforce) {
    EXPECT_NE(
        schema_error(R"({"type":"object","properties":{"age":{"type":"integer","minimum":0}}})")
            .find("json schema at #/properties/age: 'minimum' is not supported"),
        std::string::npos);
    EXPECT_NE(schema_error(R"({"type":"string","pattern":"^a+$"})").find("'pattern'"),
              std::string::npos);
    EXPECT_NE(schema_error(R"({"$ref":"#/$defs/missing"})").find("points nowhere"),
              std::string::npos);
    EXPECT_NE(schema_error(R"({"$ref":"http://example.com/s.json"})").find("same schema"),
              std::string::npos);
    // A value defined as itself before any byte of it (a left-recursive grammar), directly, via
    // anyOf, and through a second definition; recursion inside brackets stays fine (above).
    for (const char* loop : {R"({"$ref":"#"})",
                             R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})",
                             R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}},
                                 "type":"array","items":{"$ref":"#/$defs/a"}})"}) {
        EXPECT_NE(schema_error(loop).find("refers to itself before any value"), std::string::npos)
            << loop;
    }
    EXPECT_NE(schema_error(R"({"type":"wat"})").find("unknown type 'wat'"), std::string::npos);
    EXPECT_NE(schema_error(R"({"type":"array","minItems":3,"maxItems":2})").find("below"),
              std::string::npos);
    EXPECT_NE(schema_error("false").find("accepts nothing"), std::string::npos);
    EXPECT_NE(schema_error("[1]").find("must be an object"), std::string::npos);
    std::string deep = "{\"type\": \"integer\"}";
    for (int i = 0; i < 70; ++i) deep = "{\"type\": \"array\", \"items\": " + deep + "}";
    EXPECT_NE(schema_error(deep).find("nested deeper than 64"), std::string::npos);
    EXPECT_NE(schema_error(R"({"type":"string","maxLength":20000})").find("above 10000"),
              std::string::npos);
    // Annotations are fine.
    EXPECT_EQ(
        schema_error(
            R"({"title":"T","description":"d","type":"string","format":"email","examples":["a"]})"),
        "(no error)");
}

}  // namespace
}  // namespace tandem
