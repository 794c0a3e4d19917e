// What the HTTP server serves once loading is done: the model's name, its tokenizer, chat
// prompt and grammar vocabulary, and the scheduler that runs its requests. Owned by whoever
// loaded them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "server/chat_prompt.h"
#include "server/grammar_constraint.h"
#include "text/tokenizer.h"

namespace tandem::server {

struct ServedModel {
    std::string id;                    // the name in /v1/models and in responses
    std::vector<std::string> aliases;  // other names requests may use (the path given)
    std::string path;                  // the model file given (/props)
    int64_t created = 0;               // Unix seconds, for /v1/models
    const Tokenizer* tokenizer = nullptr;
    const ChatPrompt* chat = nullptr;  // null: the model has no chat template
    Scheduler* scheduler = nullptr;
    // The vocabulary as grammars see it (structured output, forced tool calls).
    std::shared_ptr<const GrammarVocab> grammar_vocab;

    bool answers_to(const std::string& name) const {
        if (name.empty() || name == id) return true;
        for (const std::string& a : aliases) {
            if (name == a) return true;
        }
        return false;
    }
};

}  // namespace tandem::server
