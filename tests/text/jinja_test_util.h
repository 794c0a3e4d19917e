// Helpers for the Jinja interpreter tests: render a template string with variables.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace tandem::testing {

// Renders `source` with `vars` as the template's variables (messages defaults to []).
inline std::string render_jinja(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                                ChatTemplateOptions options = {}) {
    ChatTemplate t(source, "<s>", "</s>", options);
    nlohmann::ordered_json messages = vars.contains("messages") ? vars["messages"] : nlohmann::ordered_json::array();
    nlohmann::ordered_json extra = vars;
    extra.erase("messages");
    return t.render(messages, nullptr, false, extra);
}

// The error message of rendering (or parsing) `source`, or "" when it succeeds.
inline std::string jinja_error(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                               ChatTemplateOptions options = {}) {
    try {
        render_jinja(source, vars, options);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace tandem::testing
