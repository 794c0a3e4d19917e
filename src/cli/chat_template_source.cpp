// Where a command's chat template comes from.
#include "cli/chat_template_source.h"

#include <fstream>
#include <sstream>

#include "base/error.h"

namespace tandem::cli {

std::optional<ChatTemplateSource> chat_template_source(const Model& model,
                                                       const std::string& file) {
    if (!file.empty()) {
        std::ifstream in(file, std::ios::binary);
        if (!in) fail("--chat-template: cannot read {}", file);
        std::ostringstream text;
        text << in.rdbuf();
        return ChatTemplateSource{text.str(), file};
    }
    static constexpr const char* kKey = "tokenizer.chat_template";
    if (!model.file().has(kKey)) return std::nullopt;
    return ChatTemplateSource{model.file().get_string(kKey), std::string("the model's ") + kKey};
}

}  // namespace tandem::cli
