// `tandem bench grammar`: what constrained sampling costs per token on a model's vocabulary.
// Builds the grammar vocabulary (byte strings and trie), then walks random sentences of a few
// grammars token by token (each step a mask over the whole vocabulary, then a random allowed
// token) and prints the mask time: mean, median, 99th percentile, worst, and the matcher states
// met. No model weights are read; llama.cpp has no equivalent in the oracle kit to compare with.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/timer.h"
#include "cli/commands.h"
#include "gguf/gguf_reader.h"
#include "server/grammar_constraint.h"
#include "text/json_schema_grammar.h"
#include "text/tokenizer.h"
#include "text/tool_call_format.h"

namespace tandem::cli {
namespace {

struct BenchGrammarOptions {
    std::string model_path;
    int steps = 2000;
    uint32_t seed = 1;
};

constexpr const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": ["string", "null"]},
    "tags": {"type": "array", "items": {"type": "string"}},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city", "zip"]}},
  "required": ["name", "age", "tags", "address"]})";

double percentile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

void bench_grammar(const BenchGrammarOptions& o) {
    const Tokenizer tokenizer = Tokenizer::from_gguf(*GgufFile::open(o.model_path));
    const Stopwatch build;
    auto vocab = std::make_shared<server::GrammarVocab>(tokenizer);
    fmt::print("vocabulary: {} tokens, trie of {} nodes, built in {:.1f} ms\n\n",
               tokenizer.n_tokens(), vocab->trie.n_nodes(), build.seconds() * 1e3);

    const std::vector<ToolSpec> tools = {
        {"get_weather", nlohmann::ordered_json::parse(
                            R"({"type": "object", "properties": {"city": {"type": "string"},
                                "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})")}};
    const std::vector<std::pair<std::string, std::string>> grammars = {
        {"json_schema (object, strings, array, nested)",
         json_schema_grammar(nlohmann::ordered_json::parse(kSchema))},
        {"json_object (any object)", json_object_grammar()},
        {"hermes tool call, required", find_tool_call_format("hermes")->grammar(tools, true)},
    };
    fmt::print("{:<46} {:>6} {:>9} {:>9} {:>9} {:>9} {:>7}\n", "grammar", "steps", "mean ms",
               "p50 ms", "p99 ms", "max ms", "states");
    for (const auto& [name, gbnf] : grammars) {
        std::mt19937 rng(o.seed);
        std::vector<float> logits(static_cast<size_t>(tokenizer.n_tokens()));
        std::vector<double> times;
        std::vector<int32_t> allowed;
        size_t states = 0;
        auto constraint = server::grammar_constraint(gbnf, vocab);
        for (int step = 0; step < o.steps; ++step) {
            std::fill(logits.begin(), logits.end(), 0.0f);
            const Stopwatch t;
            constraint->mask(logits);
            times.push_back(t.seconds() * 1e3);
            allowed.clear();
            for (size_t i = 0; i < logits.size(); ++i) {
                if (!std::isinf(logits[i])) allowed.push_back(static_cast<int32_t>(i));
            }
            const int32_t id = allowed[rng() % allowed.size()];
            if (tokenizer.is_eog(id)) {  // a sentence ended: start another
                constraint = server::grammar_constraint(gbnf, vocab);
                continue;
            }
            constraint->accept(id);
            states = std::max(states, constraint->n_states());
        }
        double sum = 0;
        for (double t : times) sum += t;
        fmt::print("{:<46} {:>6} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>7}\n", name, times.size(),
                   sum / static_cast<double>(times.size()), percentile(times, 0.5),
                   percentile(times, 0.99), *std::max_element(times.begin(), times.end()), states);
    }
}

}  // namespace

void add_bench_grammar(CLI::App* bench) {
    auto o = std::make_shared<BenchGrammarOptions>();
    CLI::App* cmd = bench->add_subcommand(
        "grammar", "Constrained sampling: the time to mask the vocabulary per token");
    cmd->add_option("-m,--model", o->model_path, "GGUF file (only its vocabulary is read)")
        ->required();
    cmd->add_option("--steps", o->steps, "Tokens per grammar")->capture_default_str();
    cmd->add_option("--seed", o->seed, "Random seed of the walks")->capture_default_str();
    cmd->callback([o] { bench_grammar(*o); });
}

}  // namespace tandem::cli
