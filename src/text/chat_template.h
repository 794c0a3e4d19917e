// Chat templates: renders a model's Jinja chat template (tokenizer_config.json or GGUF
// `tokenizer.chat_template`) over OpenAI-style messages into the prompt text.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tandem {

struct ChatTemplateOptions {
    // Fixed clock for strftime_now (reproducible tests); the system clock when unset.
    std::optional<std::time_t> now;
    // Limits that make a hostile template fail instead of hanging or exhausting memory.
    size_t max_output_bytes = 32u << 20;
    uint64_t max_steps = 20'000'000;
    int max_depth = 400;
};

class ChatTemplate {
  public:
    // Parses the template; a syntax error throws tandem::Error
    // "chat template: line L col C: ...".
    explicit ChatTemplate(const std::string& source, std::string bos_token = "",
                          std::string eos_token = "", ChatTemplateOptions options = {});
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    // Renders with the variables transformers passes: messages, tools (left undefined when
    // null), add_generation_prompt, bos_token, eos_token, and every key of `extra_context`
    // (e.g. enable_thinking, reasoning_effort). Throws tandem::Error on a render-time error;
    // a template's own raise_exception("...") shows as "... raise_exception: ...".
    std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                       bool add_generation_prompt,
                       const nlohmann::ordered_json& extra_context) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
