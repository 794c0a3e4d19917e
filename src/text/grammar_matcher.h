// Matching bytes and tokens against a Grammar. The matcher is a pushdown automaton run on sets
// of parse stacks (as llama.cpp's grammar sampler), with every set it meets interned as a
// numbered state and every transition cached: a context seen before costs a table lookup. The
// tokens a state allows come from walking a trie of the vocabulary's byte strings, pruning a
// subtree at the first byte the grammar refuses.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/grammar.h"

namespace tandem {

// A hostile or wildly ambiguous grammar could make the sets or their number explode: past the
// limits below, advance() throws Error (a request then ends with an error, the server goes on).
class GrammarMatcher {
  public:
    static constexpr size_t kMaxStates = 50000;   // about 1 KiB each
    static constexpr size_t kMaxStacks = 4096;    // per state
    static constexpr int kMaxExpandDepth = 2000;  // rules reached before a byte

    using State = int32_t;
    static constexpr State kDead = -1;  // the bytes so far fit no sentence of the grammar

    explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

    State start() const { return 0; }
    State advance(State state, uint8_t byte);
    State advance(State state, std::string_view bytes);
    // The bytes so far are a whole sentence of the grammar.
    bool accepting(State state) const { return state >= 0 && states_[state].accepting; }
    // Some byte may follow.
    bool can_continue(State state) const { return state >= 0 && states_[state].can_continue; }
    bool matches(std::string_view text) { return accepting(advance(start(), text)); }

    size_t n_states() const { return states_.size(); }
    const Grammar& grammar() const { return *grammar_; }

  private:
    // A parse stack is a node: the grammar position on top, and the node of the rest (0: the
    // empty stack, the start symbol fully matched). Nodes are hash-consed, so equal stacks are
    // equal numbers.
    struct Node {
        uint32_t position;
        uint32_t rest;
    };
    struct StateData {
        std::vector<uint32_t> stacks;  // sorted; each with a byte set on top, or 0
        bool accepting = false;
        bool can_continue = false;
        std::array<State, 256> next;  // kUnknown until computed
    };
    static constexpr State kUnknown = -2;

    uint32_t node(uint32_t position, uint32_t rest);
    // Appends the stacks a stack stands for once its rule references are expanded, until each
    // has a byte set on top (or is empty); cached per node.
    void expand_into(uint32_t stack, std::vector<uint32_t>& out, int depth = 0);
    // Appends the expanded stacks after the byte set on top of `stack` matched; cached per node.
    void after_into(uint32_t stack, std::vector<uint32_t>& out);
    State intern(std::vector<uint32_t> stacks);

    std::shared_ptr<const Grammar> grammar_;
    std::vector<Node> nodes_;
    std::unordered_map<uint64_t, uint32_t> node_ids_;
    std::vector<std::vector<uint32_t>> expanded_, after_;
    std::vector<uint8_t> expanded_done_, after_done_;
    std::vector<StateData> states_;
    std::unordered_map<std::string, State> state_ids_;
};

// The byte strings of a vocabulary as a trie in preorder, so that a walk can skip a subtree.
class TokenTrie {
  public:
    // pieces[id]: the bytes token `id` writes; empty for tokens never to be allowed by a
    // grammar (control tokens, end of generation: those are decided apart).
    explicit TokenTrie(const std::vector<std::string>& pieces);

    size_t n_tokens() const { return n_tokens_; }
    size_t n_nodes() const { return nodes_.size(); }

    // Sets in `allowed` (one bit per token id, n_tokens() bits) the tokens whose bytes the
    // grammar accepts from `state`; clears the others.
    void allowed(GrammarMatcher& matcher, GrammarMatcher::State state,
                 std::vector<uint64_t>& allowed) const;

  private:
    struct Node {
        uint8_t byte;
        uint32_t depth;                     // 1 for the first byte of a token
        uint32_t subtree_end;               // the first node after this one's subtree
        uint32_t tokens_begin, tokens_end;  // into tokens_: the tokens that end here
    };
    std::vector<Node> nodes_;
    std::vector<int32_t> tokens_;
    size_t n_tokens_ = 0;
    uint32_t max_depth_ = 0;
};

}  // namespace tandem
