// Chat messages to prompt tokens.
#include "server/chat_prompt.h"

#include "base/error.h"

namespace tandem::server {
namespace {

std::string special_text(const Tokenizer& tokenizer, TokenId id) {
    return id >= 0 && id < tokenizer.n_tokens()
               ? tokenizer.token_to_piece(id, /*render_special=*/true)
               : std::string();
}

ChatTemplate parse(const std::string& source, const std::string& origin,
                   const Tokenizer& tokenizer) {
    try {
        return ChatTemplate(source, special_text(tokenizer, tokenizer.bos()),
                            special_text(tokenizer, tokenizer.eos()));
    } catch (const Error& e) {
        fail("chat template ({}): {}", origin, e.what());
    }
}

}  // namespace

ChatPrompt::ChatPrompt(const std::string& source, const std::string& origin,
                       const Tokenizer& tokenizer)
    : template_(parse(source, origin, tokenizer)), origin_(origin), tokenizer_(tokenizer) {
    const nlohmann::ordered_json probe =
        nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}}});
    try {
        if (render(probe, nullptr, nullptr).empty()) fail("renders a conversation as nothing");
    } catch (const Error& e) {
        fail("chat template ({}) cannot render a one-message conversation: {}", origin, e.what());
    }
}

std::string ChatPrompt::render(const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools,
                               const nlohmann::ordered_json& extra_context,
                               bool add_generation_prompt) const {
    return template_.render(messages, tools, add_generation_prompt, extra_context);
}

std::vector<int32_t> ChatPrompt::tokenize(const std::string& text) const {
    std::vector<int32_t> tokens =
        tokenizer_.encode(text, /*add_special=*/false, /*parse_special=*/true);
    // Templates usually write {{ bos_token }} themselves; adding another would double it.
    if (tokenizer_.add_bos() && tokenizer_.bos() >= 0 &&
        (tokens.empty() || tokens.front() != tokenizer_.bos())) {
        tokens.insert(tokens.begin(), tokenizer_.bos());
    }
    return tokens;
}

}  // namespace tandem::server
