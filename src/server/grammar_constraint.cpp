// Grammar-constrained sampling.
#include "server/grammar_constraint.h"

#include <algorithm>
#include <cmath>

namespace tandem::server {
namespace {

// Masks kept per request: a JSON grammar meets a few dozen states; each mask is a bit per token.
constexpr size_t kMaxCachedMasks = 512;

std::vector<std::string> grammar_pieces(const Tokenizer& tokenizer) {
    std::vector<std::string> pieces(static_cast<size_t>(tokenizer.n_tokens()));
    for (int32_t id = 0; id < tokenizer.n_tokens(); ++id) {
        if (tokenizer.is_control(id) || tokenizer.is_eog(id)) continue;
        pieces[id] = tokenizer.token_to_piece(id, /*render_special=*/false);
    }
    return pieces;
}

}  // namespace

GrammarVocab::GrammarVocab(const Tokenizer& tokenizer)
    : pieces(grammar_pieces(tokenizer)), trie(pieces) {
    for (int32_t id = 0; id < tokenizer.n_tokens(); ++id) {
        if (tokenizer.is_eog(id)) end_of_generation.push_back(id);
    }
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const GrammarVocab> vocab)
    : matcher_(std::move(grammar)), vocab_(std::move(vocab)), state_(matcher_.start()) {}

const std::vector<uint64_t>& GrammarConstraint::allowed(GrammarMatcher::State state) {
    auto it = masks_.find(state);
    if (it != masks_.end()) return it->second;
    if (masks_.size() >= kMaxCachedMasks) masks_.clear();
    std::vector<uint64_t>& bits = masks_[state];
    vocab_->trie.allowed(matcher_, state, bits);
    return bits;
}

void GrammarConstraint::mask(std::span<float> logits) {
    const bool can_end = ended_ || matcher_.accepting(state_) || state_ == GrammarMatcher::kDead;
    const std::vector<int32_t>& eog = vocab_->end_of_generation;
    eog_logits_.resize(eog.size());
    for (size_t i = 0; i < eog.size(); ++i) {
        eog_logits_[i] = static_cast<size_t>(eog[i]) < logits.size() ? logits[eog[i]] : 0.0f;
    }
    size_t n_allowed = 0;
    if (!ended_ && matcher_.can_continue(state_)) {
        const std::vector<uint64_t>& bits = allowed(state_);
        const size_t n = std::min(logits.size(), vocab_->pieces.size());
        for (size_t i = 0; i < n; ++i) {
            if ((bits[i >> 6] >> (i & 63)) & 1) {
                ++n_allowed;
            } else {
                logits[i] = -INFINITY;
            }
        }
        // Rows past the tokenizer's vocabulary (padded output heads) are never tokens.
        for (size_t i = n; i < logits.size(); ++i) logits[i] = -INFINITY;
    } else {
        std::fill(logits.begin(), logits.end(), -INFINITY);
    }
    // End of generation once the grammar is satisfied; also when nothing else is possible (a
    // grammar with a dead end), so that the request ends rather than sample a masked token.
    if (can_end || n_allowed == 0) {
        for (size_t i = 0; i < eog.size(); ++i) {
            if (static_cast<size_t>(eog[i]) < logits.size()) logits[eog[i]] = eog_logits_[i];
        }
    }
}

void GrammarConstraint::accept(int32_t token) {
    if (ended_) return;
    if (std::find(vocab_->end_of_generation.begin(), vocab_->end_of_generation.end(), token) !=
        vocab_->end_of_generation.end()) {
        ended_ = true;
        return;
    }
    if (token < 0 || static_cast<size_t>(token) >= vocab_->pieces.size()) {
        state_ = GrammarMatcher::kDead;
        return;
    }
    state_ = matcher_.advance(state_, vocab_->pieces[token]);
}

std::shared_ptr<GrammarConstraint> grammar_constraint(const std::string& gbnf,
                                                      std::shared_ptr<const GrammarVocab> vocab) {
    return std::make_shared<GrammarConstraint>(
        std::make_shared<const Grammar>(Grammar::parse(gbnf)), std::move(vocab));
}

}  // namespace tandem::server
