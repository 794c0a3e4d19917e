// Chat templates: the public face of the Jinja interpreter.
#include "text/chat_template.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_error.h"
#include "text/jinja_interpreter.h"
#include "text/jinja_lexer.h"
#include "text/jinja_parser.h"

namespace tandem {

struct ChatTemplate::Impl {
    explicit Impl(const std::string& text) : source(text) {}
    jinja::Source source;
    std::vector<jinja::NodePtr> program;
    std::string bos_token;
    std::string eos_token;
    ChatTemplateOptions options;

    [[noreturn]] void fail_at(const jinja::JinjaError& e) const {
        std::string what =
            e.raised ? std::string("raise_exception: ") + e.what() : std::string(e.what());
        if (e.pos == jinja::kNoPos) fail("chat template: {}", what);
        auto [line, col] = source.line_col(e.pos);
        fail("chat template: line {} col {}: {}", line, col, what);
    }
};

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token,
                           ChatTemplateOptions options)
    : impl_(std::make_unique<Impl>(source)) {
    impl_->bos_token = std::move(bos_token);
    impl_->eos_token = std::move(eos_token);
    impl_->options = options;
    try {
        impl_->program = jinja::parse(jinja::tokenize(impl_->source));
    } catch (const jinja::JinjaError& e) {
        impl_->fail_at(e);
    }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_context) const {
    using jinja::Value;
    try {
        auto globals = std::make_shared<jinja::Scope>();
        jinja::GlobalOptions global_options;
        global_options.now = impl_->options.now;
        jinja::install_globals(*globals, global_options);
        globals->set("messages", jinja::from_json(messages));
        if (!tools.is_null()) globals->set("tools", jinja::from_json(tools));
        globals->set("add_generation_prompt", Value::boolean(add_generation_prompt));
        globals->set("bos_token", Value::string(impl_->bos_token));
        globals->set("eos_token", Value::string(impl_->eos_token));
        if (extra_context.is_object()) {
            for (const auto& [key, value] : extra_context.items())
                globals->set(key, jinja::from_json(value));
        } else if (!extra_context.is_null()) {
            fail("chat template: extra context must be a JSON object");
        }
        jinja::Limits limits;
        limits.max_output_bytes = impl_->options.max_output_bytes;
        limits.max_steps = impl_->options.max_steps;
        limits.max_depth = impl_->options.max_depth;
        jinja::Interpreter interpreter(limits);
        return interpreter.render(impl_->program, globals);
    } catch (const jinja::JinjaError& e) {
        impl_->fail_at(e);
    }
}

}  // namespace tandem
