// Sampling held to a grammar: the engine's TokenConstraint over a GrammarMatcher. The
// vocabulary's byte strings and their trie are built once per model (GrammarVocab); each request
// gets its own matcher, whose states cache the tokens they allow.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/token_constraint.h"
#include "text/grammar.h"
#include "text/grammar_matcher.h"
#include "text/tokenizer.h"

namespace tandem::server {

struct GrammarVocab {
    explicit GrammarVocab(const Tokenizer& tokenizer);

    // The bytes each token writes; empty for control and end-of-generation tokens, which a
    // grammar never allows (end of generation is allowed apart, once the grammar accepts).
    std::vector<std::string> pieces;
    TokenTrie trie;
    std::vector<int32_t> end_of_generation;
};

class GrammarConstraint : public TokenConstraint {
  public:
    GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                      std::shared_ptr<const GrammarVocab> vocab);

    void mask(std::span<float> logits) override;
    void accept(int32_t token) override;

    // The output so far is a whole sentence of the grammar.
    bool complete() const { return matcher_.accepting(state_); }
    // Matcher states met so far (each caches its transitions and, for a while, its mask).
    size_t n_states() const { return matcher_.n_states(); }

  private:
    const std::vector<uint64_t>& allowed(GrammarMatcher::State state);

    GrammarMatcher matcher_;
    std::shared_ptr<const GrammarVocab> vocab_;
    GrammarMatcher::State state_;
    bool ended_ = false;  // an end-of-generation token was sampled
    std::unordered_map<GrammarMatcher::State, std::vector<uint64_t>> masks_;
    std::vector<float> eog_logits_;  // the model's, kept while the row is masked
};

// A constraint for GBNF text; throws Error (from Grammar::parse) when it does not parse.
std::shared_ptr<GrammarConstraint> grammar_constraint(const std::string& gbnf,
                                                      std::shared_ptr<const GrammarVocab> vocab);

}  // namespace tandem::server
