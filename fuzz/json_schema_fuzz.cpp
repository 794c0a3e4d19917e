// libFuzzer target: any JSON text read as a schema either fails with tandem::Error or gives a
// grammar that parses (a converter bug otherwise: the target traps) and whose matcher takes a
// random walk; never a crash, hang, leak or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/grammar.h"
#include "text/grammar_matcher.h"
#include "text/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return 0;
    std::string gbnf;
    try {
        gbnf = tandem::json_schema_grammar(schema);
    } catch (const tandem::Error&) {
        return 0;
    }
    std::shared_ptr<const tandem::Grammar> grammar;
    try {
        grammar = std::make_shared<const tandem::Grammar>(tandem::Grammar::parse(gbnf));
    } catch (const tandem::Error&) {
        __builtin_trap();  // the converter wrote a grammar that does not parse
    }
    try {
        tandem::GrammarMatcher m(grammar);
        std::mt19937 rng(static_cast<uint32_t>(size));
        tandem::GrammarMatcher::State s = m.start();
        for (int step = 0; step < 200 && m.can_continue(s); ++step) {
            const uint8_t b = static_cast<uint8_t>(rng());
            const tandem::GrammarMatcher::State next = m.advance(s, b);
            if (next != tandem::GrammarMatcher::kDead) s = next;
        }
    } catch (const tandem::Error&) {
    }
    return 0;
}
