// Where a command's chat template comes from: a --chat-template FILE, or else the model's
// `tokenizer.chat_template` key.
#pragma once

#include <optional>
#include <string>

#include "model/model.h"

namespace tandem::cli {

struct ChatTemplateSource {
    std::string text;
    std::string origin;  // for messages: the file name, or "the model's tokenizer.chat_template"
};

// nullopt when no file is given and the model has none. Throws Error when the file cannot be read.
std::optional<ChatTemplateSource> chat_template_source(const Model& model, const std::string& file);

}  // namespace tandem::cli
