// Runs the oracle kit's tools for conformance tests: random models from make_gguf.py (cached by
// their arguments for the life of the test binary), llama.cpp's teacher-forced and greedy logits,
// and a logit comparison with the kit's measures (max |Δ|, KL, argmax with a tie margin).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::testing {

// A model written by make_gguf.py with these arguments (e.g. "--arch qwen3 --wtype q8_0");
// the same arguments give the same file. Fails the test (throws) if the kit fails.
std::string oracle_model(const std::string& args);

// llama.cpp's logits of every position of `tokens`, evaluated in one batch (n_tokens × n_vocab);
// `options`: more llama_logits arguments (e.g. "--no-repack").
std::vector<float> llama_all_logits(const std::string& model, const std::vector<int32_t>& tokens,
                                    const std::string& kv = "f32", const std::string& options = "");

struct GreedyRun {
    std::vector<int32_t> tokens;  // the prompt, then the generated tokens
    std::vector<float> logits;    // row i: logits after tokens[i] (prompt rows, then decodes)
    int n_vocab = 0;
};
// llama.cpp's greedy generation of n tokens after the prompt.
GreedyRun llama_greedy(const std::string& model, const std::vector<int32_t>& prompt, int n,
                       const std::string& kv = "f32");

struct LogitComparison {
    int rows = 0;
    double worst_abs = 0.0;   // max |ref - test| over all rows
    double worst_kl = 0.0;    // max KL(softmax(ref) || softmax(test)) over rows
    int argmax_flips = 0;     // rows whose argmax differs
    int decisive_flips = 0;   // ... where the reference's top-two margin is >= tie
    std::vector<double> row_kl;   // per row
    std::vector<double> row_abs;  // per row: max |ref - test|
    // Rows whose argmax differs although the reference's top-two margin exceeds both `tie` and
    // the row's own max |ref - test| (a margin inside the disagreement is a tie within noise).
    int flips_beyond_noise = 0;
};
LogitComparison compare_logits(const std::vector<float>& ref, const std::vector<float>& test,
                               int n_vocab, double tie = 1e-3);

// Random token ids in [0, n_vocab), seeded.
std::vector<int32_t> random_tokens(int n, int n_vocab, uint64_t seed);

std::vector<float> read_f32_file(const std::string& path);
std::string join_ids(const std::vector<int32_t>& ids);

}  // namespace tandem::testing
