// The grammar's pushdown automaton, its cached states, and the vocabulary trie.
#include "text/grammar_matcher.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {

using Symbol = Grammar::Symbol;

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)) {
    nodes_.push_back({0, 0});  // node 0: the empty stack
    std::vector<uint32_t> stacks;
    const auto& symbols = grammar_->symbols();
    for (uint32_t a : grammar_->alternatives(grammar_->root())) {
        expand_into(symbols[a].kind == Symbol::kEnd ? 0 : node(a, 0), stacks);
    }
    intern(std::move(stacks));  // state 0, the start
}

uint32_t GrammarMatcher::node(uint32_t position, uint32_t rest) {
    const uint64_t key = (static_cast<uint64_t>(position) << 32) | rest;
    auto [it, added] = node_ids_.emplace(key, static_cast<uint32_t>(nodes_.size()));
    if (added) nodes_.push_back({position, rest});
    return it->second;
}

void GrammarMatcher::expand_into(uint32_t stack, std::vector<uint32_t>& out, int depth) {
    if (depth > kMaxExpandDepth)
        fail("grammar: rules reach rules more than {} deep before matching a byte",
             kMaxExpandDepth);
    if (stack == 0) {
        out.push_back(0);
        return;
    }
    if (stack < expanded_done_.size() && expanded_done_[stack]) {
        out.insert(out.end(), expanded_[stack].begin(), expanded_[stack].end());
        return;
    }
    const auto& symbols = grammar_->symbols();
    const Node n = nodes_[stack];
    const Symbol sym = symbols[n.position];
    std::vector<uint32_t> result;
    if (sym.kind == Symbol::kBytes) {
        result.push_back(stack);
    } else {
        // The rest of the current alternative goes under the rule's alternatives, unless
        // nothing is left of it (so right recursion does not grow the stack).
        const uint32_t rest =
            symbols[n.position + 1].kind == Symbol::kEnd ? n.rest : node(n.position + 1, n.rest);
        for (uint32_t a : grammar_->alternatives(sym.index)) {
            expand_into(symbols[a].kind == Symbol::kEnd ? rest : node(a, rest), result, depth + 1);
        }
        std::sort(result.begin(), result.end());
        result.erase(std::unique(result.begin(), result.end()), result.end());
    }
    if (expanded_.size() < nodes_.size()) {
        expanded_.resize(nodes_.size());
        expanded_done_.resize(nodes_.size(), 0);
    }
    out.insert(out.end(), result.begin(), result.end());
    expanded_[stack] = std::move(result);
    expanded_done_[stack] = 1;
}

void GrammarMatcher::after_into(uint32_t stack, std::vector<uint32_t>& out) {
    if (stack < after_done_.size() && after_done_[stack]) {
        out.insert(out.end(), after_[stack].begin(), after_[stack].end());
        return;
    }
    const auto& symbols = grammar_->symbols();
    const Node n = nodes_[stack];
    const uint32_t next =
        symbols[n.position + 1].kind == Symbol::kEnd ? n.rest : node(n.position + 1, n.rest);
    std::vector<uint32_t> result;
    expand_into(next, result);
    if (after_.size() < nodes_.size()) {
        after_.resize(nodes_.size());
        after_done_.resize(nodes_.size(), 0);
    }
    out.insert(out.end(), result.begin(), result.end());
    after_[stack] = std::move(result);
    after_done_[stack] = 1;
}

GrammarMatcher::State GrammarMatcher::intern(std::vector<uint32_t> stacks) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
    if (stacks.empty()) return kDead;
    if (stacks.size() > kMaxStacks)
        fail("grammar: more than {} parses at once (an ambiguous grammar)", kMaxStacks);
    std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(uint32_t));
    auto [it, added] = state_ids_.emplace(std::move(key), static_cast<State>(states_.size()));
    if (added) {
        if (states_.size() >= kMaxStates) {
            state_ids_.erase(it);
            fail("grammar: more than {} matcher states", kMaxStates);
        }
        StateData s;
        s.accepting = stacks.front() == 0;
        s.can_continue = stacks.back() != 0;
        s.stacks = std::move(stacks);
        s.next.fill(kUnknown);
        states_.push_back(std::move(s));
    }
    return it->second;
}

GrammarMatcher::State GrammarMatcher::advance(State state, uint8_t byte) {
    if (state < 0) return kDead;
    const State cached = states_[state].next[byte];
    if (cached != kUnknown) return cached;
    const auto& symbols = grammar_->symbols();
    std::vector<uint32_t> stacks;
    // Indexed each time: after_into may add nodes, intern may add states.
    for (size_t i = 0; i < states_[state].stacks.size(); ++i) {
        const uint32_t s = states_[state].stacks[i];
        if (s == 0) continue;
        const Symbol& top = symbols[nodes_[s].position];
        if (grammar_->byte_set(top.index).test(byte)) after_into(s, stacks);
    }
    const State next = intern(std::move(stacks));
    states_[state].next[byte] = next;
    return next;
}

GrammarMatcher::State GrammarMatcher::advance(State state, std::string_view bytes) {
    for (char c : bytes) {
        if (state < 0) break;
        state = advance(state, static_cast<uint8_t>(c));
    }
    return state;
}

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : n_tokens_(pieces.size()) {
    std::vector<int32_t> ids;
    for (size_t id = 0; id < pieces.size(); ++id) {
        if (!pieces[id].empty()) ids.push_back(static_cast<int32_t>(id));
    }
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return pieces[a] != pieces[b] ? pieces[a] < pieces[b] : a < b;
    });
    // Sorted byte strings give the trie in preorder: each string opens nodes below the prefix
    // it shares with the one before.
    std::vector<uint32_t> path;  // path[d]: the node at depth d + 1
    std::string_view previous;
    for (int32_t id : ids) {
        const std::string& p = pieces[id];
        size_t common = 0;
        while (common < p.size() && common < previous.size() && p[common] == previous[common])
            ++common;
        while (path.size() > common) {
            nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
            path.pop_back();
        }
        for (size_t d = common; d < p.size(); ++d) {
            const uint32_t at = static_cast<uint32_t>(tokens_.size());
            nodes_.push_back({static_cast<uint8_t>(p[d]), static_cast<uint32_t>(d + 1), 0, at, at});
            path.push_back(static_cast<uint32_t>(nodes_.size() - 1));
        }
        tokens_.push_back(id);
        nodes_[path.back()].tokens_end = static_cast<uint32_t>(tokens_.size());
        max_depth_ = std::max(max_depth_, static_cast<uint32_t>(p.size()));
        previous = p;
    }
    for (uint32_t n : path) nodes_[n].subtree_end = static_cast<uint32_t>(nodes_.size());
}

void TokenTrie::allowed(GrammarMatcher& matcher, GrammarMatcher::State state,
                        std::vector<uint64_t>& allowed) const {
    allowed.assign((n_tokens_ + 63) / 64, 0);
    if (state < 0) return;
    std::vector<GrammarMatcher::State> at_depth(max_depth_ + 1);
    at_depth[0] = state;
    for (size_t i = 0; i < nodes_.size();) {
        const Node& n = nodes_[i];
        const GrammarMatcher::State s = matcher.advance(at_depth[n.depth - 1], n.byte);
        if (s == GrammarMatcher::kDead) {
            i = n.subtree_end;
            continue;
        }
        at_depth[n.depth] = s;
        for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) {
            const auto id = static_cast<uint32_t>(tokens_[t]);
            allowed[id >> 6] |= uint64_t{1} << (id & 63);
        }
        ++i;
    }
}

}  // namespace tandem
