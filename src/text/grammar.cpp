// GBNF read and compiled to byte-level rules.
#include "text/grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "text/utf8.h"

namespace tandem {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
// Bounds of {m,n}: each repetition is a copy of the item or a helper rule.
constexpr uint32_t kMaxRepeat = 10000;
// Parentheses within parentheses (the parser recurses on them), and rules reaching rules before
// any byte (the left-recursion check does): far beyond what grammars need, far below what
// would exhaust a thread's stack.
constexpr int kMaxGroupDepth = 256;
constexpr int kMaxRuleDepth = 2000;

void same_length_sequences(uint32_t lo, uint32_t hi, int n,
                           std::vector<std::vector<ByteRange>>& out) {
    // Split until every byte position ranges independently (regex-syntax's Utf8Sequences).
    for (int i = 1; i < n; ++i) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                same_length_sequences(lo, lo | m, n, out);
                same_length_sequences((lo | m) + 1, hi, n, out);
                return;
            }
            if ((hi & m) != m) {
                same_length_sequences(lo, (hi & ~m) - 1, n, out);
                same_length_sequences(hi & ~m, hi, n, out);
                return;
            }
        }
    }
    std::string a, b;
    append_utf8(a, lo);
    append_utf8(b, hi);
    std::vector<ByteRange> seq;
    for (size_t j = 0; j < a.size(); ++j)
        seq.push_back({static_cast<uint8_t>(a[j]), static_cast<uint8_t>(b[j])});
    out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_byte_sequences(uint32_t lo, uint32_t hi) {
    std::vector<std::vector<ByteRange>> out;
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) return out;
    if (lo < kSurrogateLo && hi > kSurrogateHi) {
        out = utf8_byte_sequences(lo, kSurrogateLo - 1);
        auto rest = utf8_byte_sequences(kSurrogateHi + 1, hi);
        out.insert(out.end(), rest.begin(), rest.end());
        return out;
    }
    if (lo >= kSurrogateLo && lo <= kSurrogateHi) lo = kSurrogateHi + 1;
    if (hi >= kSurrogateLo && hi <= kSurrogateHi) hi = kSurrogateLo - 1;
    if (lo > hi) return out;
    static constexpr uint32_t kLast[4] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
    uint32_t first = 0;
    for (int n = 1; n <= 4; ++n) {
        const uint32_t a = std::max(lo, first), b = std::min(hi, kLast[n - 1]);
        if (a <= b) same_length_sequences(a, b, n, out);
        first = kLast[n - 1] + 1;
    }
    return out;
}

// Reads the text and builds the rules; Grammar's only maker.
class GrammarBuilder {
  public:
    explicit GrammarBuilder(std::string_view text) : text_(text) {}

    Grammar build(std::string_view root_name) {
        parse_rules();
        for (uint32_t r = 0; r < rules_.size(); ++r) {
            if (!defined_[r]) {
                fail("grammar: rule '{}' is used (line {}) but not defined", names_[r],
                     used_line_[r]);
            }
        }
        auto root = ids_.find(std::string(root_name));
        if (root == ids_.end()) fail("grammar: there is no rule '{}' to start from", root_name);
        check_left_recursion();
        Grammar g;
        g.names_ = names_;
        g.byte_sets_ = sets_;
        g.root_ = root->second;
        g.rules_.resize(rules_.size());
        for (uint32_t r = 0; r < rules_.size(); ++r) {
            for (const auto& alt : rules_[r]) {
                g.rules_[r].push_back(static_cast<uint32_t>(g.symbols_.size()));
                g.symbols_.insert(g.symbols_.end(), alt.begin(), alt.end());
                g.symbols_.push_back({Grammar::Symbol::kEnd, 0});
            }
        }
        return g;
    }

  private:
    using Symbol = Grammar::Symbol;
    using Alternatives = std::vector<std::vector<Symbol>>;

    [[noreturn]] void syntax_error(const std::string& what) const {
        size_t line = 1, column = 1;
        for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        fail("grammar: line {}, column {}: {}", line, column, what);
    }

    size_t line() const { return 1 + std::count(text_.begin(), text_.begin() + pos_, '\n'); }
    bool at_end() const { return pos_ >= text_.size(); }
    char peek(size_t ahead = 0) const {
        return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
    }
    static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    }

    void skip_space(bool newlines) {
        while (!at_end()) {
            const char c = peek();
            if (c == ' ' || c == '\t') {
                ++pos_;
            } else if (c == '#') {
                while (!at_end() && peek() != '\n') ++pos_;
            } else if ((c == '\n' || c == '\r') && newlines) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    uint32_t rule_id(const std::string& name) {
        auto [it, added] = ids_.emplace(name, static_cast<uint32_t>(rules_.size()));
        if (added) {
            rules_.emplace_back();
            names_.push_back(name);
            defined_.push_back(false);
            used_line_.push_back(line());
        }
        return it->second;
    }
    uint32_t helper_rule(uint32_t parent, Alternatives alts) {
        const uint32_t id = static_cast<uint32_t>(rules_.size());
        rules_.push_back(std::move(alts));
        names_.push_back(names_[parent] + "_" + std::to_string(id));
        defined_.push_back(true);
        used_line_.push_back(line());
        return id;
    }
    Symbol bytes(const ByteSet& set) {
        auto [it, added] = set_ids_.emplace(set, static_cast<uint32_t>(sets_.size()));
        if (added) sets_.push_back(set);
        return {Symbol::kBytes, it->second};
    }
    static Symbol ref(uint32_t rule) { return {Symbol::kRule, rule}; }

    void parse_rules() {
        for (;;) {
            skip_space(true);
            if (at_end()) return;
            const size_t start = pos_;
            while (!at_end() && is_name_char(peek())) ++pos_;
            if (pos_ == start) syntax_error("expected a rule name");
            const std::string name(text_.substr(start, pos_ - start));
            skip_space(false);
            if (text_.substr(pos_, 3) != "::=") syntax_error("expected '::=' after '" + name + "'");
            pos_ += 3;
            skip_space(true);
            const uint32_t id = rule_id(name);
            if (defined_[id]) syntax_error("rule '" + name + "' is defined twice");
            defined_[id] = true;
            Alternatives alts = parse_alternatives(id, /*nested=*/false);
            rules_[id] = std::move(alts);
            skip_space(false);
            if (!at_end() && peek() != '\n' && peek() != '\r')
                syntax_error(std::string("unexpected '") + peek() + "'");
        }
    }

    Alternatives parse_alternatives(uint32_t rule, bool nested) {
        Alternatives alts;
        alts.push_back(parse_sequence(rule, nested));
        for (;;) {
            const size_t save = pos_;
            skip_space(true);
            if (peek() != '|') {
                if (!nested) pos_ = save;
                return alts;
            }
            ++pos_;
            skip_space(true);
            alts.push_back(parse_sequence(rule, nested));
        }
    }

    std::vector<Symbol> parse_sequence(uint32_t rule, bool nested) {
        std::vector<Symbol> seq;
        size_t last = std::string::npos;  // where the item a quantifier applies to starts
        for (;;) {
            skip_space(nested);
            const char c = peek();
            if (c == '"') {
                last = seq.size();
                ++pos_;
                while (peek() != '"') {
                    if (at_end() || peek() == '\n') syntax_error("unterminated literal");
                    std::string utf8;
                    append_utf8(utf8, parse_char());
                    for (char b : utf8) {
                        ByteSet s;
                        s.set(static_cast<uint8_t>(b));
                        seq.push_back(bytes(s));
                    }
                }
                ++pos_;
            } else if (c == '[') {
                last = seq.size();
                seq.push_back(parse_class(rule));
            } else if (c == '.') {
                ++pos_;
                last = seq.size();
                seq.push_back(code_points(rule, {{0, kMaxCodePoint}}));
            } else if (c == '(') {
                if (++group_depth_ > kMaxGroupDepth)
                    syntax_error("parentheses nest deeper than " + std::to_string(kMaxGroupDepth));
                ++pos_;
                skip_space(true);
                const uint32_t group = helper_rule(rule, {});
                Alternatives alts = parse_alternatives(group, /*nested=*/true);
                rules_[group] = std::move(alts);
                skip_space(true);
                if (peek() != ')') syntax_error("expected ')'");
                ++pos_;
                --group_depth_;
                last = seq.size();
                seq.push_back(ref(group));
            } else if (is_name_char(c)) {
                const size_t start = pos_;
                while (!at_end() && is_name_char(peek())) ++pos_;
                last = seq.size();
                seq.push_back(ref(rule_id(std::string(text_.substr(start, pos_ - start)))));
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (last == std::string::npos)
                    syntax_error(std::string("nothing to repeat before '") + c + "'");
                quantify(rule, seq, last);
                last = std::string::npos;
            } else {
                return seq;
            }
        }
    }

    uint32_t parse_count() {
        const size_t start = pos_;
        uint64_t n = 0;
        while (peek() >= '0' && peek() <= '9') {
            n = n * 10 + static_cast<uint64_t>(peek() - '0');
            if (n > kMaxRepeat)
                syntax_error("repetition count above " + std::to_string(kMaxRepeat));
            ++pos_;
        }
        if (pos_ == start) syntax_error("expected a number");
        return static_cast<uint32_t>(n);
    }

    // x* as R ::= x R | (empty): right recursion, which a matcher follows without growing its
    // stacks.
    uint32_t star(uint32_t rule, Symbol unit) {
        const uint32_t r = helper_rule(rule, {});
        rules_[r] = {{unit, ref(r)}, {}};
        return r;
    }

    void quantify(uint32_t rule, std::vector<Symbol>& seq, size_t last) {
        std::vector<Symbol> item(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end());
        seq.resize(last);
        const Symbol unit = item.size() == 1 ? item[0] : ref(helper_rule(rule, {item}));
        const char c = peek();
        ++pos_;
        uint32_t min = 0, max = 0;
        bool unbounded = false;
        if (c == '*') {
            unbounded = true;
        } else if (c == '+') {
            min = 1;
            unbounded = true;
        } else if (c == '?') {
            max = 1;
        } else {
            skip_space(true);
            min = parse_count();
            skip_space(true);
            if (peek() == ',') {
                ++pos_;
                skip_space(true);
                if (peek() == '}') {
                    unbounded = true;
                } else {
                    max = parse_count();
                    if (max < min) syntax_error("{m,n} with n below m");
                }
            } else {
                max = min;
            }
            skip_space(true);
            if (peek() != '}') syntax_error("expected '}'");
            ++pos_;
        }
        for (uint32_t i = 0; i < min; ++i) seq.push_back(unit);
        if (unbounded) {
            seq.push_back(ref(star(rule, unit)));
        } else if (max > min) {
            // x{0,k} nested: O1 ::= x | (empty), Oj ::= x Oj-1 | (empty).
            uint32_t inner = helper_rule(rule, {{unit}, {}});
            for (uint32_t j = 1; j < max - min; ++j)
                inner = helper_rule(rule, {{unit, ref(inner)}, {}});
            seq.push_back(ref(inner));
        }
    }

    uint32_t parse_hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            const char h = peek();
            int d = -1;
            if (h >= '0' && h <= '9') d = h - '0';
            if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
            if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
            if (d < 0) syntax_error("expected " + std::to_string(digits) + " hex digits");
            v = v * 16 + static_cast<uint32_t>(d);
            ++pos_;
        }
        if (v > kMaxCodePoint) syntax_error("code point beyond U+10FFFF");
        return v;
    }

    // One character of a literal or class, escapes resolved.
    uint32_t parse_char() {
        if (peek() != '\\') return decode_utf8_lenient(text_, pos_);
        ++pos_;
        const char e = peek();
        ++pos_;
        switch (e) {
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case 'x':
                return parse_hex(2);
            case 'u':
                return parse_hex(4);
            case 'U':
                return parse_hex(8);
            case '\\':
            case '"':
            case '[':
            case ']':
            case '-':
            case '^':
            case '/':
            case '.':
                return static_cast<uint8_t>(e);
            default:
                --pos_;
                syntax_error(std::string("unknown escape '\\") + e + "'");
        }
    }

    Symbol parse_class(uint32_t rule) {
        ++pos_;  // [
        const bool negated = peek() == '^';
        if (negated) ++pos_;
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        while (peek() != ']') {
            if (at_end() || peek() == '\n') syntax_error("unterminated character class");
            const uint32_t lo = parse_char();
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']') {
                ++pos_;
                if (at_end()) syntax_error("unterminated character class");
                hi = parse_char();
                if (hi < lo) syntax_error("character range with its end before its start");
            }
            ranges.emplace_back(lo, hi);
        }
        ++pos_;
        std::sort(ranges.begin(), ranges.end());
        std::vector<std::pair<uint32_t, uint32_t>> merged;
        for (const auto& r : ranges) {
            if (!merged.empty() && r.first <= merged.back().second + 1) {
                merged.back().second = std::max(merged.back().second, r.second);
            } else {
                merged.push_back(r);
            }
        }
        if (negated) {
            std::vector<std::pair<uint32_t, uint32_t>> complement;
            uint32_t next = 0;
            for (const auto& r : merged) {
                if (r.first > next) complement.emplace_back(next, r.first - 1);
                next = r.second + 1;
            }
            if (next <= kMaxCodePoint) complement.emplace_back(next, kMaxCodePoint);
            merged = std::move(complement);
        }
        if (merged.empty()) syntax_error("the character class matches nothing");
        return code_points(rule, merged);
    }

    // A terminal for code point ranges that are all single bytes; otherwise a helper rule whose
    // alternatives are the byte sequences of the UTF-8 encodings. Shared between equal classes.
    Symbol code_points(uint32_t rule, const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
        auto cached = classes_.find(ranges);
        if (cached != classes_.end()) return cached->second;
        ByteSet singles;
        std::vector<std::vector<ByteRange>> multi;
        for (const auto& [lo, hi] : ranges) {
            for (auto& seq : utf8_byte_sequences(lo, hi)) {
                if (seq.size() == 1) {
                    for (uint32_t b = seq[0].lo; b <= seq[0].hi; ++b) singles.set(b);
                } else {
                    multi.push_back(std::move(seq));
                }
            }
        }
        Symbol out;
        if (multi.empty()) {
            if (singles.none()) syntax_error("the character class matches nothing");
            out = bytes(singles);
        } else {
            Alternatives alts;
            if (singles.any()) alts.push_back({bytes(singles)});
            for (const auto& seq : multi) {
                std::vector<Symbol> alt;
                for (const ByteRange& r : seq) {
                    ByteSet s;
                    for (uint32_t b = r.lo; b <= r.hi; ++b) s.set(b);
                    alt.push_back(bytes(s));
                }
                alts.push_back(std::move(alt));
            }
            out = ref(helper_rule(rule, std::move(alts)));
        }
        classes_.emplace(ranges, out);
        return out;
    }

    // A rule that can reach itself before consuming a byte would send a matcher into an
    // endless expansion; llama.cpp refuses such grammars too.
    void check_left_recursion() const {
        const size_t n = rules_.size();
        std::vector<bool> nullable(n, false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < n; ++r) {
                if (nullable[r]) continue;
                for (const auto& alt : rules_[r]) {
                    const bool all = std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) {
                        return s.kind == Symbol::kRule && nullable[s.index];
                    });
                    if (all) {
                        nullable[r] = changed = true;
                        break;
                    }
                }
            }
        }
        std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
        int depth = 0;
        std::function<void(uint32_t)> visit = [&](uint32_t r) {
            if (++depth > kMaxRuleDepth) {
                fail("grammar: rules reach rules more than {} deep before matching a character",
                     kMaxRuleDepth);
            }
            color[r] = 1;
            for (const auto& alt : rules_[r]) {
                for (const Symbol& s : alt) {
                    if (s.kind != Symbol::kRule) break;
                    if (color[s.index] == 1) {
                        fail(
                            "grammar: rule '{}' is left-recursive (it can reach '{}' before "
                            "matching a character)",
                            names_[s.index], names_[s.index]);
                    }
                    if (color[s.index] == 0) visit(s.index);
                    if (!nullable[s.index]) break;
                }
            }
            color[r] = 2;
            --depth;
        };
        for (uint32_t r = 0; r < n; ++r) {
            if (color[r] == 0) visit(r);
        }
    }

    std::string_view text_;
    size_t pos_ = 0;
    int group_depth_ = 0;
    std::vector<Alternatives> rules_;
    std::vector<std::string> names_;
    std::vector<bool> defined_;
    std::vector<size_t> used_line_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::vector<ByteSet> sets_;
    std::unordered_map<ByteSet, uint32_t> set_ids_;
    std::map<std::vector<std::pair<uint32_t, uint32_t>>, Symbol> classes_;
};

Grammar Grammar::parse(std::string_view text, std::string_view root) {
    return GrammarBuilder(text).build(root);
}

}  // namespace tandem
