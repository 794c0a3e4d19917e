// Runs the oracle kit's tools for conformance tests.
#include "support/oracle_runs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "support/oracle.h"
#include "support/temp_dir.h"

namespace tandem::testing {
namespace {

TempDir& cache_dir() {
    static TempDir dir;
    return dir;
}

std::string run_or_throw(const std::string& command) {
    std::string out;
    int rc = run_command(command, &out);
    if (rc != 0) throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + command + "\n" + out);
    return out;
}

}  // namespace

std::string join_ids(const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
    return s;
}

std::vector<float> read_f32_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    in.seekg(0, std::ios::end);
    std::vector<float> v(static_cast<size_t>(in.tellg()) / sizeof(float));
    in.seekg(0);
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    return v;
}

std::string oracle_model(const std::string& args) {
    static std::mutex mutex;
    static std::map<std::string, std::string> made;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = made.find(args);
    if (it != made.end()) return it->second;
    std::string path = cache_dir().file("model-" + std::to_string(made.size()) + ".gguf");
    run_or_throw("python3 " + shell_quote(oracle_kit_dir() + "/make_gguf.py") + " " + shell_quote(path) + " " + args);
    made[args] = path;
    return path;
}

std::vector<float> llama_all_logits(const std::string& model, const std::vector<int32_t>& tokens,
                                    const std::string& kv, const std::string& options) {
    std::string out = cache_dir().file("llama-all.f32");
    run_or_throw(shell_quote(oracle_bin() + "/llama_logits") + " " + shell_quote(model) + " --kv " + kv +
                 " --threads 2 --all-logits " + options + " --tokens " + join_ids(tokens) + " --dump " +
                 shell_quote(out));
    return read_f32_file(out);
}

GreedyRun llama_greedy(const std::string& model, const std::vector<int32_t>& prompt, int n,
                       const std::string& kv) {
    std::string out = cache_dir().file("llama-greedy.f32");
    run_or_throw(shell_quote(oracle_bin() + "/llama_logits") + " " + shell_quote(model) + " --kv " + kv +
                 " --threads 2 --n " + std::to_string(n) + " --tokens " + join_ids(prompt) + " --dump " +
                 shell_quote(out));
    GreedyRun run;
    run.logits = read_f32_file(out);
    std::ifstream meta(out + ".json");
    nlohmann::json j = nlohmann::json::parse(meta);
    run.tokens = j.at("tokens").get<std::vector<int32_t>>();
    run.n_vocab = j.at("n_vocab").get<int>();
    return run;
}

LogitComparison compare_logits(const std::vector<float>& ref, const std::vector<float>& test, int n_vocab,
                               double tie) {
    LogitComparison c;
    if (ref.size() != test.size() || ref.size() % n_vocab != 0) {
        throw std::runtime_error("logit dumps differ in size: " + std::to_string(ref.size()) + " vs " +
                                 std::to_string(test.size()));
    }
    c.rows = static_cast<int>(ref.size() / n_vocab);
    auto log_softmax = [n_vocab](const float* x, std::vector<double>& out) {
        double m = *std::max_element(x, x + n_vocab), s = 0.0;
        for (int i = 0; i < n_vocab; ++i) s += std::exp(x[i] - m);
        double lse = m + std::log(s);
        out.resize(n_vocab);
        for (int i = 0; i < n_vocab; ++i) out[i] = x[i] - lse;
    };
    std::vector<double> lr, lt;
    for (int r = 0; r < c.rows; ++r) {
        const float* a = ref.data() + static_cast<size_t>(r) * n_vocab;
        const float* b = test.data() + static_cast<size_t>(r) * n_vocab;
        double row_abs = 0.0;
        for (int i = 0; i < n_vocab; ++i) row_abs = std::max(row_abs, std::fabs(double(a[i]) - b[i]));
        c.worst_abs = std::max(c.worst_abs, row_abs);
        c.row_abs.push_back(row_abs);
        log_softmax(a, lr);
        log_softmax(b, lt);
        double kl = 0.0;
        for (int i = 0; i < n_vocab; ++i) kl += std::exp(lr[i]) * (lr[i] - lt[i]);
        c.worst_kl = std::max(c.worst_kl, std::max(0.0, kl));
        c.row_kl.push_back(std::max(0.0, kl));
        int ra = static_cast<int>(std::max_element(a, a + n_vocab) - a);
        int ta = static_cast<int>(std::max_element(b, b + n_vocab) - b);
        if (ra != ta) {
            ++c.argmax_flips;
            float second = -INFINITY;
            for (int i = 0; i < n_vocab; ++i) {
                if (i != ra) second = std::max(second, a[i]);
            }
            if (a[ra] - second >= tie) ++c.decisive_flips;
            if (a[ra] - second >= std::max(tie, row_abs)) ++c.flips_beyond_noise;
        }
    }
    return c;
}

std::vector<int32_t> random_tokens(int n, int n_vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
    std::vector<int32_t> ids(n);
    for (int32_t& id : ids) id = pick(rng);
    return ids;
}

}  // namespace tandem::testing
