// Conformance of the chat-template interpreter: every real template (Qwen3, Llama-3.x, Gemma-3,
// gpt-oss, DeepSeek-V3, ...) over every stored conversation must render byte for byte what
// @huggingface/jinja renders (tests/node/render_templates.mjs writes the expected outputs).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "support/oracle.h"
#include "support/temp_dir.h"
#include "text/chat_template.h"

namespace tandem {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

// The instant render_templates.mjs pins `new Date()` to: 2025-03-07 12:34:56 UTC.
constexpr std::time_t kFixedTime = 1741350896;

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string node_dir() {
    return std::string(TANDEM_SOURCE_DIR) + "/tests/node";
}
std::string data_dir() {
    return std::string(TANDEM_SOURCE_DIR) + "/tests/text/data/chat";
}

bool oracle_installed() {
    if (!fs::exists(node_dir() + "/node_modules/@huggingface/jinja/package.json")) return false;
    return testing::run_command("node --version") == 0;
}

// Shows where two renderings part, with escaped context, instead of two pages of text.
std::string describe_difference(const std::string& want, const std::string& got) {
    size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    auto excerpt = [&](const std::string& s) {
        size_t from = i > 60 ? i - 60 : 0;
        return ordered_json(s.substr(from, 120))
            .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    };
    std::ostringstream out;
    out << "first difference at byte " << i << " (expected " << want.size() << " bytes, got "
        << got.size() << ")\n  expected: " << excerpt(want) << "\n  actual:   " << excerpt(got);
    return out.str();
}

// Errors of the reference that only say it lacks a feature (a filter or test that Jinja has):
// there we only ask that our rendering succeeds.
bool reference_lacks_feature(const std::string& error) {
    return error.rfind("Unknown ", 0) == 0 && error.find("filter") != std::string::npos;
}

TEST(ChatTemplateConformance, MatchesHuggingFaceJinjaOnRealTemplates) {
    if (!oracle_installed()) {
        if (testing::oracle_required())
            FAIL() << "chat-template oracle missing: run tests/node/setup.sh";
        GTEST_SKIP() << "chat-template oracle missing (run tests/node/setup.sh)";
    }
    testing::TempDir out;
    std::string log;
    std::string command = "cd " + testing::shell_quote(node_dir()) +
                          " && TZ=UTC node render_templates.mjs " +
                          testing::shell_quote(data_dir()) + " " + testing::shell_quote(out.path());
    ASSERT_EQ(testing::run_command(command, &log), 0) << log;

    // strftime_now formats local time; the oracle ran in UTC.
    setenv("TZ", "UTC", 1);
    tzset();

    ordered_json manifest = ordered_json::parse(read_file(out.file("manifest.json")));
    std::map<std::string, ordered_json> conversations;
    for (auto& conv : ordered_json::parse(read_file(data_dir() + "/conversations.json"))) {
        conversations[conv["name"].get<std::string>()] = conv;
    }
    ChatTemplateOptions options;
    options.now = kFixedTime;
    std::map<std::string, ChatTemplate> templates;
    for (const auto& [name, t] : manifest["templates"].items()) {
        try {
            templates.emplace(name, ChatTemplate(read_file(out.file(t["file"].get<std::string>())),
                                                 t["bos_token"].get<std::string>(),
                                                 t["eos_token"].get<std::string>(), options));
        } catch (const Error& e) {
            ADD_FAILURE() << name << ": " << e.what();
        }
    }

    std::map<std::string, std::pair<int, int>> tally;  // template -> (passed, total)
    for (const auto& c : manifest["cases"]) {
        const std::string name = c["template"].get<std::string>();
        const std::string conv_name = c["conversation"].get<std::string>();
        const bool agp = c["add_generation_prompt"].get<bool>();
        const std::string label =
            name + " / " + conv_name + (agp ? " / add_generation_prompt" : "");
        auto& [passed, total] = tally[name];
        ++total;
        auto it = templates.find(name);
        if (it == templates.end()) continue;
        const ordered_json& conv = conversations.at(conv_name);
        const ordered_json tools = conv.contains("tools") ? conv["tools"] : ordered_json();
        const ordered_json extra = conv.contains("extra") ? conv["extra"] : ordered_json::object();
        std::string got, error;
        try {
            got = it->second.render(conv["messages"], tools, agp, extra);
        } catch (const Error& e) {
            error = e.what();
        }
        if (c.contains("output")) {
            const std::string want = c["output"].get<std::string>();
            if (!error.empty()) {
                ADD_FAILURE() << label << ": unexpected error: " << error;
            } else if (got != want) {
                ADD_FAILURE() << label << ": " << describe_difference(want, got);
            } else {
                ++passed;
            }
            continue;
        }
        const std::string want_error = c["error"].get<std::string>();
        if (error.empty()) {
            if (reference_lacks_feature(want_error)) {
                ++passed;  // a Jinja feature the reference lacks: rendering is fine
            } else {
                ADD_FAILURE() << label << ": expected an error like \"" << want_error
                              << "\", rendered fine";
            }
        } else if (error.find(want_error) != std::string::npos ||
                   reference_lacks_feature(want_error)) {
            ++passed;  // both fail (the reference's "Unknown filter" wording differs from ours)
        } else {
            ADD_FAILURE() << label << ": error \"" << error << "\" does not contain \""
                          << want_error << "\"";
        }
    }
    for (const auto& [name, counts] : tally) {
        std::cout << "  " << name << ": " << counts.first << "/" << counts.second
                  << " byte-identical\n";
    }
}

}  // namespace
}  // namespace tandem
