// The grammar constraint on a real tokenizer (the served test model's byte-level vocabulary):
// the mask allows exactly the tokens whose bytes keep the grammar alive, end of generation only
// once the grammar is satisfied, nothing past the vocabulary; sampling under it always yields a
// sentence of the grammar.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "server/grammar_constraint.h"
#include "server_process.h"
#include "text/json_schema_grammar.h"
#include "text/tokenizer.h"

namespace tandem::testing {
namespace {

const Tokenizer& tokenizer() {
    static const Tokenizer t = Tokenizer::from_gguf(*GgufFile::open(served_model_path()));
    return t;
}

std::shared_ptr<const server::GrammarVocab> vocab() {
    static const auto v = std::make_shared<const server::GrammarVocab>(tokenizer());
    return v;
}

TEST(GrammarVocab, PiecesOfTheVocabulary) {
    const auto& v = *vocab();
    ASSERT_EQ(v.pieces.size(), static_cast<size_t>(tokenizer().n_tokens()));
    EXPECT_FALSE(v.end_of_generation.empty());
    for (int32_t id = 0; id < tokenizer().n_tokens(); ++id) {
        if (tokenizer().is_control(id) || tokenizer().is_eog(id)) {
            EXPECT_TRUE(v.pieces[id].empty()) << id;
        } else {
            EXPECT_EQ(v.pieces[id], tokenizer().token_to_piece(id, false)) << id;
        }
    }
}

// Samples under the constraint until end of generation; checks every mask against the matcher.
std::string sample_checked(const std::string& gbnf, uint32_t seed, size_t padded_vocab) {
    auto constraint = server::grammar_constraint(gbnf, vocab());
    GrammarMatcher reference(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
    GrammarMatcher::State state = reference.start();
    const auto& v = *vocab();
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(padded_vocab);
    std::string out;
    for (int step = 0; step < 4000; ++step) {
        for (float& l : logits) l = normal(rng);
        const std::vector<float> before = logits;
        constraint->mask(logits);
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < logits.size(); ++id) {
            const bool is_eog = std::find(v.end_of_generation.begin(), v.end_of_generation.end(),
                                          static_cast<int32_t>(id)) != v.end_of_generation.end();
            bool expected = false;
            if (id < v.pieces.size()) {
                expected = is_eog
                               ? reference.accepting(state)
                               : !v.pieces[id].empty() && reference.advance(state, v.pieces[id]) !=
                                                              GrammarMatcher::kDead;
            }
            EXPECT_EQ(!std::isinf(logits[id]), expected)
                << "token " << id << " after '" << out << "'";
            if (expected) {
                EXPECT_EQ(logits[id], before[id]) << "an allowed token's logit changed";
                allowed.push_back(static_cast<int32_t>(id));
            }
        }
        if (allowed.empty()) {
            ADD_FAILURE() << "nothing allowed after '" << out << "'";
            break;
        }
        // The most likely allowed token, as greedy sampling would pick: walks follow the
        // logits, not a uniform choice.
        int32_t id = allowed[0];
        for (int32_t a : allowed) {
            if (logits[a] > logits[id]) id = a;
        }
        constraint->accept(id);
        if (std::find(v.end_of_generation.begin(), v.end_of_generation.end(), id) !=
            v.end_of_generation.end()) {
            EXPECT_TRUE(reference.accepting(state));
            return out;
        }
        out += v.pieces[id];
        state = reference.advance(state, v.pieces[id]);
        EXPECT_EQ(constraint->complete(), reference.accepting(state));
    }
    ADD_FAILURE() << "no end of generation in 4000 steps: '" << out << "'";
    return out;
}

TEST(GrammarConstraint, MaskAllowsExactlyWhatKeepsTheGrammarAlive) {
    const std::string schema = json_schema_grammar(nlohmann::ordered_json::parse(R"({
        "type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"},
        "word": {"enum": ["alpha", "beta", "gamma delta"]}, "note": {"type": "string", "maxLength": 6}},
        "required": ["ok", "word", "note"]})"));
    for (uint32_t seed : {1u, 2u, 3u}) {
        // The output head may be wider than the tokenizer's vocabulary (padded): never sampled.
        const std::string text = sample_checked(schema, seed, tokenizer().n_tokens() + 7);
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
        ASSERT_TRUE(j.is_object()) << text;
        EXPECT_TRUE(j["ok"].is_boolean());
        EXPECT_TRUE(j["word"] == "alpha" || j["word"] == "beta" || j["word"] == "gamma delta")
            << text;
        EXPECT_LE(nlohmann::json(j["note"]).get<std::string>().size(), 6u * 4);
    }
    const std::string yes_no =
        sample_checked(R"(root ::= ("yes" | "no") "!"?)", 4, tokenizer().n_tokens());
    EXPECT_TRUE(yes_no == "yes" || yes_no == "no" || yes_no == "yes!" || yes_no == "no!") << yes_no;
}

TEST(GrammarConstraint, AfterEndOfGenerationOnlyEndOfGeneration) {
    auto c = server::grammar_constraint(R"(root ::= "a"*)", vocab());
    std::vector<float> logits(static_cast<size_t>(tokenizer().n_tokens()), 1.0f);
    c->accept(vocab()->end_of_generation[0]);
    c->mask(logits);
    for (size_t id = 0; id < logits.size(); ++id) {
        const bool eog = tokenizer().is_eog(static_cast<int32_t>(id));
        EXPECT_EQ(std::isinf(logits[id]), !eog) << id;
    }
}

TEST(GrammarConstraint, BadGrammarIsAnError) {
    EXPECT_THROW(server::grammar_constraint("root ::= root", vocab()), Error);
}

}  // namespace
}  // namespace tandem::testing
