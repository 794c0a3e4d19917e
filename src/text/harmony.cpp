// gpt-oss's harmony replies: the streaming parser of their messages and the call grammar.
// The message structure is OpenAI's harmony format (github.com/openai/harmony); what the model
// writes in practice (both places for the recipient, a stray commentary header before the
// analysis) follows llama.cpp's gpt-oss parser (common/chat.cpp).
#include "text/harmony.h"

#include <algorithm>
#include <array>

#include "text/json_schema_grammar.h"
#include "text/reply_text.h"

namespace tandem {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
// What ends a message's body. <|call|> and <|return|> end the generation, so the detokenizer
// never shows them; they arrive only in text written back (harmony_render_calls).
constexpr std::array<std::string_view, 3> kEnds = {kEnd, "<|call|>", "<|return|>"};
// Where a header may begin: a new message, a channel, or a recipient written before the channel
// (the generation prompt ends in "<|start|>assistant", so the first header has no <|start|>).
constexpr std::array<std::string_view, 4> kOpeners = {kStart, kChannel, " to=", "to="};
// In plain text, only the special tokens start a header.
constexpr std::array<std::string_view, 2> kTextOpeners = {kStart, kChannel};
// A header with no <|message|> after this many bytes is not one.
constexpr size_t kMaxHeader = 256;
constexpr std::string_view kFunctions = "functions.";

using reply_text::compact;
using reply_text::is_space;

// The first of `marks` in `text` from `from` on: its position (npos when none) and length.
template <size_t N>
std::pair<size_t, size_t> find_first(std::string_view text,
                                     const std::array<std::string_view, N>& marks,
                                     size_t from = 0) {
    std::pair<size_t, size_t> best{std::string_view::npos, 0};
    for (std::string_view m : marks) {
        const size_t p = text.find(m, from);
        if (p < best.first) best = {p, m.size()};
    }
    return best;
}

// A word of a header: up to whitespace or the next special token.
std::string_view header_word(std::string_view header, size_t at) {
    size_t end = at;
    while (end < header.size() && !is_space(header[end]) && header[end] != '<') ++end;
    return header.substr(at, end - at);
}

enum class BodyKind { kReasoning, kContent, kCall, kOther };

struct Header {
    BodyKind kind = BodyKind::kContent;
    std::string function;  // kCall: the function's name
};

// What a message is, from its header ("<|channel|>analysis", "<|channel|>commentary
// to=functions.f <|constrain|>json", "<|start|>assistant to=functions.f<|channel|>commentary
// json", ...): a recipient other than the assistant makes it a call (to a function) or a
// message to a tool we do not run; otherwise the last channel named decides (a stray
// "<|channel|>commentary" before "<|channel|>analysis" is how gpt-oss-20b sometimes starts).
Header parse_header(std::string_view header) {
    Header h;
    std::string_view recipient;
    size_t to = header.rfind(" to=");
    if (to != std::string_view::npos) {
        recipient = header_word(header, to + 4);
    } else if (header.starts_with("to=")) {
        recipient = header_word(header, 3);
    }
    if (!recipient.empty() && recipient != "assistant") {
        if (recipient.starts_with(kFunctions) && recipient.size() > kFunctions.size()) {
            h.kind = BodyKind::kCall;
            h.function = std::string(recipient.substr(kFunctions.size()));
        } else {
            h.kind = BodyKind::kOther;
        }
        return h;
    }
    const size_t channel = header.rfind(kChannel);
    if (channel != std::string_view::npos &&
        header_word(header, channel + kChannel.size()) == "analysis") {
        h.kind = BodyKind::kReasoning;
    }
    // final, commentary to no one (a preamble to the user), or no channel: content.
    return h;
}

class HarmonyParser : public ReplyParser {
  public:
    explicit HarmonyParser(bool parse_calls) : parse_calls_(parse_calls) {}

    std::vector<ReplyEvent> feed(std::string_view text) override {
        std::vector<ReplyEvent> out;
        buffer_.append(text);
        while (step(out)) {
        }
        return out;
    }

    std::vector<ReplyEvent> finish() override {
        std::vector<ReplyEvent> out;
        switch (state_) {
            case State::kBody:
                if (header_.kind == BodyKind::kReasoning || header_.kind == BodyKind::kContent) {
                    emit(out, buffer_, header_.kind == BodyKind::kReasoning);
                } else {
                    // The usual end of a call: <|call|> ended the generation.
                    end_held_body(buffer_, out);
                }
                break;
            case State::kOpen:
            case State::kText:
            case State::kHeader:
                // A partial mark, plain text, or a header never finished: as written.
                emit(out, buffer_, false);
                break;
        }
        buffer_.clear();
        state_ = State::kOpen;
        return out;
    }

    int n_calls() const override { return n_calls_; }

  private:
    enum class State {
        kOpen,    // where a message may begin: the reply's start, after a message's end
        kHeader,  // reading a header, up to <|message|>
        kBody,    // reading a body, up to its end
        kText,    // plain text outside any message: content
    };

    // One step over the buffer; false when it needs more text.
    bool step(std::vector<ReplyEvent>& out) {
        switch (state_) {
            case State::kOpen: {
                if (opener_size() > 0) {
                    state_ = State::kHeader;
                    return true;
                }
                const bool may_open = std::any_of(kOpeners.begin(), kOpeners.end(), [&](auto o) {
                    return buffer_.size() < o.size() && o.starts_with(buffer_);
                });
                if (may_open) return false;
                state_ = State::kText;
                return true;
            }
            case State::kHeader: {
                const size_t at = buffer_.find(kMessage);
                const size_t end = find_first(buffer_, kEnds).first;
                if (at <= kMaxHeader && at < end) {
                    header_ = parse_header(std::string_view(buffer_).substr(0, at));
                    raw_header_ = buffer_.substr(0, at + kMessage.size());
                    buffer_.erase(0, at + kMessage.size());
                    state_ = State::kBody;
                    searched_ = 0;
                    return true;
                }
                // A message's end before any <|message|>, or none where a header would have
                // one: not a header. Its opening mark goes out as text, and what follows is
                // read as text (decided on what is in the buffer either way, so however the
                // reply is split).
                const bool too_long = at == std::string::npos
                                          ? buffer_.size() >= kMaxHeader + kMessage.size()
                                          : at > kMaxHeader;
                if (end == std::string::npos && !too_long) return false;
                const size_t n = opener_size();
                emit(out, buffer_.substr(0, n), false);
                buffer_.erase(0, n);
                state_ = State::kText;
                return true;
            }
            case State::kBody: {
                // A streamed body leaves only a mark's partial tail held; a call's is held
                // whole until its end, searched for from where the last search left off.
                const auto [end, end_size] = find_first(buffer_, kEnds, searched_);
                const bool streamed =
                    header_.kind == BodyKind::kReasoning || header_.kind == BodyKind::kContent;
                if (end == std::string::npos) {
                    if (streamed) {
                        const size_t keep = reply_text::partial_mark_tail(buffer_, kEnds);
                        emit(out, buffer_.substr(0, buffer_.size() - keep),
                             header_.kind == BodyKind::kReasoning);
                        buffer_.erase(0, buffer_.size() - keep);
                    } else {
                        searched_ = reply_text::resume_search_at(buffer_.size(), kEnds);
                    }
                    return false;
                }
                if (streamed) {
                    emit(out, buffer_.substr(0, end), header_.kind == BodyKind::kReasoning);
                } else {
                    end_held_body(buffer_.substr(0, end), out);
                }
                buffer_.erase(0, end + end_size);
                state_ = State::kOpen;
                return true;
            }
            case State::kText: {
                // Plain text runs to the next header; a message end in it is dropped (the
                // model ended a message it never opened).
                const auto [open, open_size] = find_first(buffer_, kTextOpeners);
                const auto [end, end_size] = find_first(buffer_, kEnds);
                if (open == std::string::npos && end == std::string::npos) {
                    size_t keep = std::max(reply_text::partial_mark_tail(buffer_, kTextOpeners),
                                           reply_text::partial_mark_tail(buffer_, kEnds));
                    emit(out, buffer_.substr(0, buffer_.size() - keep), false);
                    buffer_.erase(0, buffer_.size() - keep);
                    return false;
                }
                if (open < end) {
                    emit(out, buffer_.substr(0, open), false);
                    buffer_.erase(0, open);
                    state_ = State::kHeader;
                } else {
                    emit(out, buffer_.substr(0, end), false);
                    buffer_.erase(0, end + end_size);
                    state_ = State::kOpen;
                }
                return true;
            }
        }
        return false;
    }

    // The length of the opener `buffer_` starts with; 0 when none.
    size_t opener_size() const {
        for (std::string_view o : kOpeners) {
            if (buffer_.starts_with(o)) return o.size();
        }
        return 0;
    }

    // A call's body, whole: a call when its arguments are a JSON object and calls are wanted;
    // otherwise (and for messages to tools we do not run) the model's text as written.
    void end_held_body(std::string_view body, std::vector<ReplyEvent>& out) {
        if (header_.kind == BodyKind::kCall && parse_calls_) {
            const ojson args = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
            if (args.is_object()) {
                out.push_back({{}, ToolCall{header_.function, compact(args)}});
                ++n_calls_;
                return;
            }
        }
        emit(out, raw_header_ + std::string(body), false);
    }

    // Text of one kind, joined to the event before when that is text of the same kind.
    static void emit(std::vector<ReplyEvent>& out, std::string_view text, bool reasoning) {
        if (text.empty()) return;
        if (!out.empty() && !out.back().call && out.back().reasoning == reasoning) {
            out.back().text += text;
        } else {
            out.push_back({std::string(text), std::nullopt, reasoning});
        }
    }

    bool parse_calls_;
    State state_ = State::kOpen;
    std::string buffer_;      // not yet settled
    Header header_;           // of the message being read
    std::string raw_header_;  // as written, with its <|message|>
    size_t searched_ = 0;     // where the search for a held body's end resumes in buffer_
    int n_calls_ = 0;
};

// Text that does not contain <|end|>.
std::string text_before_end(JsonGrammarBuilder& b) {
    return text_without_marks(b, {std::string(kEnd)}).text;
}

// `gbnf` with every rule name (defined or referred to) prefixed by `prefix`: identifiers outside
// literals, character classes, repetition counts and comments are rule names in GBNF.
std::string prefix_rule_names(std::string_view gbnf, std::string_view prefix) {
    const auto word = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
    };
    std::string out;
    size_t i = 0;
    // Copies up to the unescaped `close` (inclusive) from i.
    const auto copy_quoted = [&](char close) {
        out += gbnf[i++];
        while (i < gbnf.size() && gbnf[i] != close) {
            if (gbnf[i] == '\\' && i + 1 < gbnf.size()) out += gbnf[i++];
            out += gbnf[i++];
        }
        if (i < gbnf.size()) out += gbnf[i++];
    };
    while (i < gbnf.size()) {
        const char c = gbnf[i];
        if (c == '"') {
            copy_quoted('"');
        } else if (c == '[') {
            copy_quoted(']');
        } else if (c == '{') {
            copy_quoted('}');
        } else if (c == '#') {
            while (i < gbnf.size() && gbnf[i] != '\n') out += gbnf[i++];
        } else if (word(c)) {
            const size_t start = i;
            while (i < gbnf.size() && word(gbnf[i])) ++i;
            out += prefix;
            out += gbnf.substr(start, i - start);
        } else {
            out += gbnf[i++];
        }
    }
    return out;
}

}  // namespace

bool harmony_detect(std::string_view source) {
    return source.find(kChannel) != std::string_view::npos;
}

std::unique_ptr<ReplyParser> make_harmony_parser(bool parse_calls) {
    return std::make_unique<HarmonyParser>(parse_calls);
}

std::string harmony_grammar(const std::vector<ToolSpec>& tools, bool) {
    JsonGrammarBuilder b;
    const std::string text = text_before_end(b);
    // Reasoning and preambles first, as the model likes; then the call, in either place for
    // the recipient, with or without its content type (llama.cpp's gpt-oss grammar allows the
    // same).
    const std::string prelude =
        b.add_rule("prelude", "\"<|channel|>\" (\"analysis\" | \"commentary\") \"<|message|>\" " +
                                  text + " \"<|end|><|start|>assistant\"");
    const std::string channel = b.add_rule("channel", R"("commentary" | "analysis")");
    const std::string type = b.add_rule("content-type", R"(" " "<|constrain|>"? "json")");
    std::string calls;
    for (const ToolSpec& t : tools) {
        const std::string args = b.add_schema(arguments_schema(t), t.name + "-args");
        const std::string to = JsonGrammarBuilder::literal(" to=functions." + t.name);
        if (!calls.empty()) calls += " | ";
        calls += "(\"<|channel|>\" " + channel + " " + to + " | " + to + " \"<|channel|>\" " +
                 channel + ") " + type + "? \"<|message|>\" " + args;
    }
    const std::string call = b.add_rule("call", calls);
    return b.grammar(prelude + "* " + call);
}

std::string harmony_content_grammar(std::string_view gbnf) {
    // As llama.cpp's gpt-oss grammar for a response format: analysis messages, then the final
    // channel (with or without a content type, of at most 16 characters here: a header that
    // never ends would leave the answer unwritten) and the answer.
    JsonGrammarBuilder b;
    const std::string analysis =
        b.add_rule("analysis", "\"<|channel|>analysis<|message|>\" " + text_before_end(b) +
                                   " \"<|end|><|start|>assistant\"");
    const std::string type =
        b.add_rule("final-type", R"((" " "<|constrain|>"? [A-Za-z0-9_-]{1,16})?)");
    // The added rules' names never start with "content-".
    return b.grammar(analysis + "* \"<|channel|>final\" " + type +
                     " \"<|message|>\" content-root") +
           "\n" + prefix_rule_names(gbnf, "content-");
}

std::string harmony_system_prompt(const ojson& tools) {
    // In the words of gpt-oss's own template: a TypeScript-like namespace of functions.
    std::string out = "# Tools\n\n## functions\n\nnamespace functions {\n";
    for (const auto& t : tools) {
        const ojson& fn = t.contains("function") ? t["function"] : t;
        if (fn.contains("description") && fn["description"].is_string())
            out += "\n// " + fn["description"].get<std::string>() + "\n";
        out += "type " + fn.value("name", std::string()) +
               " = (_: " + compact(fn.value("parameters", ojson::object())) + ") => any;\n";
    }
    out +=
        "\n} // namespace functions\n\nCalls to these tools must go to the commentary channel: "
        "'functions'.";
    return out;
}

std::string harmony_render_calls(const std::vector<ToolCall>& calls) {
    std::string out;
    for (const ToolCall& c : calls) {
        if (!out.empty()) out += "<|call|><|start|>assistant";
        out += "<|channel|>commentary to=functions." + c.name + " <|constrain|>json<|message|>" +
               c.arguments;
    }
    return out;
}

}  // namespace tandem
