// JSON Schema to GBNF: a grammar whose sentences are JSON texts the schema accepts, so that
// sampling constrained by it always yields a document that parses and validates. Covers the
// schemas of structured output and tool parameters: types (and lists of them), properties,
// required, additionalProperties, enum, const, items, prefixItems, minItems/maxItems,
// minLength/maxLength, anyOf/oneOf, allOf of objects, $ref into the same document ($defs,
// definitions), string formats date, time, date-time and uuid. Keywords that constrain values
// in ways the grammar does not (pattern, minimum, multipleOf, ...) are refused with an Error
// rather than ignored: the output would not validate. Annotations (title, description, ...)
// are ignored. The grammar may produce fewer documents than the schema allows (no additional
// properties unless asked for, properties in schema order), never more.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem {

class JsonGrammarBuilder {
  public:
    JsonGrammarBuilder();

    // Adds the rules for JSON values `schema` accepts (with whitespace after them) and returns
    // the name of the rule. `name` is a hint for the rule names. Throws Error "json schema at
    // PATH: ..." naming the place in the schema it cannot follow. `$ref`s resolve against
    // `schema` itself.
    std::string add_schema(const nlohmann::ordered_json& schema, std::string_view name);
    // Any JSON value, any JSON object: rule names.
    std::string any_value();
    std::string any_object();
    // Adds a rule `name ::= body` (the name made unique); returns the name used.
    std::string add_rule(std::string_view name, const std::string& body);

    // The grammar text with `root ::= root_body` first.
    std::string grammar(const std::string& root_body) const;

    // A GBNF literal ("..." with escapes) for `text`.
    static std::string literal(std::string_view text);

  private:
    std::string visit(const nlohmann::ordered_json& schema, const std::string& name,
                      const std::string& path);
    std::string visit_object(const nlohmann::ordered_json& schema, const std::string& name,
                             const std::string& path);
    std::string visit_array(const nlohmann::ordered_json& schema, const std::string& name,
                            const std::string& path);
    std::string visit_string(const nlohmann::ordered_json& schema, const std::string& name,
                             const std::string& path);
    std::string visit_ref(const std::string& ref, const std::string& path);
    std::string primitive(const std::string& name);
    std::string unique_name(std::string_view hint);

    std::map<std::string, std::string> rules_;  // name -> body
    std::set<std::string> names_;
    std::map<std::string, std::string> refs_;  // $ref -> rule
    // The $refs being visited since the last '{' or '[': reaching one of them again would make
    // a left-recursive rule (a value defined as itself before any byte of it is read).
    std::set<std::string> leading_refs_;
    const nlohmann::ordered_json* document_ = nullptr;
};

// Rules for text that holds none of `marks` (each a '<' and then characters other than '<', none
// the start of another): a '<' is followed by anything but the rest of a mark. Written as
// repetitions, not as one rule per matched prefix calling itself, so that long text does not deepen
// the matcher's stack.
struct TextWithoutMarks {
    std::string text;   // the text
    std::string lt;     // a '<' and part of a mark, followed by another '<' or the end
    std::string after;  // what may follow a '<' that is not part of a mark
};
TextWithoutMarks text_without_marks(JsonGrammarBuilder& b, const std::vector<std::string>& marks);

// The whole grammar for a response_format json_schema's schema.
std::string json_schema_grammar(const nlohmann::ordered_json& schema);
// The grammar for response_format json_object: any JSON object.
std::string json_object_grammar();

}  // namespace tandem
