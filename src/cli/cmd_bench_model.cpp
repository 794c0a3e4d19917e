// `tandem bench model`: prompt and decode tokens/s on a model file (median of a few runs after a
// warm-up), next to llama.cpp's on the same file and threads, with ratios: `llama_logits --bench`
// of the oracle kit (CPU), or a `llama-bench` binary given by --llama-bench (for the GPU:
// llama.cpp's CUDA build from ../shared/oracle/llama_cuda.sh, run with -ngl 99 -fa 1).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/timer.h"
#include "cli/bench_common.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/session.h"

namespace tandem::cli {
namespace {

struct BenchModelOptions {
    ModelOptions model;
    int prompt = 128;
    int gen = 64;
    int runs = 3;
    uint32_t seed = 1;
    bool json = false;
    bool no_llama = false;
    std::string llama_bench;  // a llama-bench binary to compare with instead of llama_logits
    std::string llama_args;   // more llama-bench arguments (its placement: -ncmoe N, --no-mmap)
};

struct Speeds {
    double prompt_tps = 0, decode_tps = 0;
};

// Per-token decode latencies of every run (their median is robust to the odd slow token on a
// shared machine; the tokens/s of the table are totals, as llama_logits --bench reports).
std::vector<double> g_token_seconds;

// One run as llama_logits --bench does it: the prompt in one batch, then `gen` greedy decodes
// of one token each, timed separately.
Speeds run_once(Session& session, const std::vector<int32_t>& prompt, int gen) {
    session.reset();
    const double t0 = now_seconds();
    int32_t token = session.feed_greedy(prompt);
    const double t1 = now_seconds();
    double t = t1;
    for (int i = 0; i < gen; ++i) {
        token = session.feed_greedy(std::span<const int32_t>(&token, 1));
        const double now = now_seconds();
        g_token_seconds.push_back(now - t);
        t = now;
    }
    const double t2 = now_seconds();
    return {prompt.size() / (t1 - t0), gen / std::max(t2 - t1, 1e-9)};
}

struct LlamaResult {
    bool ok = false;
    std::string why;
    Speeds median;
};

// llama-bench's JSON (-o json): the mean tokens/s of its prompt test and of its generation test
// over its repetitions (it reports means, not medians).
LlamaResult run_llama_bench(const BenchModelOptions& o, int threads, bool gpu, const std::string& model_path) {
    LlamaResult r;
    int rc = 0;
    const std::string out = run_command(
        fmt::format("'{}' -m '{}' -p {} -n {} -r {} -t {} -ngl {} -fa 1 {} -o json 2>/dev/null", o.llama_bench,
                    model_path, o.prompt, o.gen, o.runs, threads, gpu ? 99 : 0, o.llama_args),
        &rc);
    const size_t start = out.find('[');
    if (rc != 0 || start == std::string::npos) {
        r.why = fmt::format("llama-bench failed (exit {}): {}", rc, out.substr(0, 400));
        return r;
    }
    try {
        for (const nlohmann::json& test : nlohmann::json::parse(out.substr(start))) {
            const double ts = test.value("avg_ts", 0.0);
            if (test.value("n_prompt", 0) > 0 && test.value("n_gen", 0) == 0) r.median.prompt_tps = ts;
            if (test.value("n_gen", 0) > 0 && test.value("n_prompt", 0) == 0) r.median.decode_tps = ts;
        }
    } catch (const nlohmann::json::exception& e) {
        r.why = fmt::format("llama-bench printed no JSON I can read ({})", e.what());
        return r;
    }
    r.ok = r.median.prompt_tps > 0 && r.median.decode_tps > 0;
    if (!r.ok) r.why = "llama-bench reported no prompt or generation test";
    return r;
}

// `model_path` is the file llama.cpp takes: of a split model, its first part.
LlamaResult run_llama(const BenchModelOptions& o, int threads, const std::string& model_path) {
    LlamaResult r;
    const OracleKit kit = find_oracle_kit();
    if (!kit.has_llama_logits()) {
        r.why = "oracle kit not found (run ../shared/oracle/setup.sh and eval its output)";
        return r;
    }
    std::vector<double> prompt, decode;
    for (int i = 0; i < o.runs; ++i) {
        int rc = 0;
        const std::string out =
            run_command(fmt::format("'{}/llama_logits' '{}' --bench {} --random-prompt {} --seed "
                                    "{} --threads {} --kv {} 2>&1",
                                    kit.bin, model_path, o.gen, o.prompt, o.seed, threads,
                                    o.model.kv_type),
                        &rc);
        double p = 0, d = 0;
        std::stringstream lines(out);
        for (std::string line; std::getline(lines, line);) {
            const size_t eq = line.rfind(" = ");
            if (eq == std::string::npos) continue;
            if (line.rfind("prompt eval:", 0) == 0) p = std::atof(line.c_str() + eq + 3);
            if (line.rfind("decode:", 0) == 0) d = std::atof(line.c_str() + eq + 3);
        }
        if (rc != 0 || p <= 0 || d <= 0) {
            r.why = fmt::format("llama_logits failed (exit {}): {}", rc, out.substr(0, 400));
            return r;
        }
        prompt.push_back(p);
        decode.push_back(d);
    }
    r.ok = true;
    r.median = {median(prompt), median(decode)};
    return r;
}

void run_bench(const BenchModelOptions& o) {
    if (o.prompt < 1 || o.gen < 1 || o.runs < 1)
        fail("--prompt, --gen and --runs must be positive");
    LoadedModel m = load_model(o.model);
    SessionOptions so = m.session;
    if (o.prompt + o.gen + 1 > so.n_ctx)
        fail("--prompt + --gen exceed the context of {} (raise --ctx)", so.n_ctx);
    so.max_batch = std::max(so.max_batch, std::min(o.prompt, so.n_ctx));
    const int n_vocab = m.model->config().n_vocab;
    std::vector<int32_t> prompt(o.prompt);
    std::mt19937 rng(o.seed);
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));

    Session session(*m.model, *m.pool, so);
    const bool gpu = session.backend().name() == "cuda";
    run_once(session, prompt, 1);  // warm-up: page faults, first touches
    g_token_seconds.clear();
    std::vector<double> prompt_tps, decode_tps;
    for (int i = 0; i < o.runs; ++i) {
        const Speeds s = run_once(session, prompt, o.gen);
        prompt_tps.push_back(s.prompt_tps);
        decode_tps.push_back(s.decode_tps);
    }
    const Speeds ours{median(prompt_tps), median(decode_tps)};
    const int threads = m.pool->size();
    // llama.cpp's own default beside a GPU (a thread per core), where ours leaves a core free.
    const int llama_threads = o.model.threads > 0 ? threads : cpu_features().physical_cores;
    LlamaResult llama;
    if (o.no_llama) {
        llama.why = "--no-llama";
    } else if (!o.llama_bench.empty()) {
        llama = run_llama_bench(o, llama_threads, gpu, m.model->file().path());
    } else if (gpu) {
        llama.why = "the GPU is measured against llama.cpp's CUDA build: give its llama-bench with --llama-bench";
    } else {
        llama = run_llama(o, threads, m.model->file().path());
    }

    if (o.json) {
        nlohmann::json doc = {{"model", o.model.model_path},
                              {"backend", session.backend().name()},
                              {"threads", threads},
                              {"llama_threads", llama_threads},
                              {"prompt_tokens", o.prompt},
                              {"gen_tokens", o.gen},
                              {"runs", o.runs},
                              {"kv_type", o.model.kv_type},
                              {"prompt_tps", ours.prompt_tps},
                              {"decode_tps", ours.decode_tps},
                              {"decode_token_ms_median", 1e3 * median(g_token_seconds)}};
        if (llama.ok) {
            doc["llama_prompt_tps"] = llama.median.prompt_tps;
            doc["llama_decode_tps"] = llama.median.decode_tps;
            doc["prompt_ratio"] = ours.prompt_tps / llama.median.prompt_tps;
            doc["decode_ratio"] = ours.decode_tps / llama.median.decode_tps;
        } else {
            doc["llama_missing"] = llama.why;
        }
        std::printf("%s\n", doc.dump(2).c_str());
        return;
    }
    std::printf(
        "tandem bench model: %s, backend %s, %d threads, prompt %d tokens, %d decodes, kv %s, median of %d "
        "runs%s\n",
        o.model.model_path.c_str(), session.backend().name().c_str(), threads, o.prompt, o.gen,
        o.model.kv_type.c_str(), o.runs,
        o.llama_bench.empty() ? ""
                              : fmt::format(" (llama-bench -t {}{}{}: mean of its runs)",
                                            llama_threads, o.llama_args.empty() ? "" : " ",
                                            o.llama_args)
                                    .c_str());
    if (!llama.ok)
        std::printf("llama.cpp: not measured: %s (our numbers only)\n", llama.why.c_str());
    std::printf("\n%-8s %12s %12s %8s\n", "", "tandem t/s", "llama t/s", "ratio");
    auto row = [&](const char* name, double ours_tps, double llama_tps) {
        std::printf("%-8s %12.2f %12s %8s\n", name, ours_tps,
                    llama.ok ? fmt::format("{:.2f}", llama_tps).c_str() : "-",
                    llama.ok ? fmt::format("{:.2f}x", ours_tps / llama_tps).c_str() : "-");
    };
    row("prompt", ours.prompt_tps, llama.median.prompt_tps);
    row("decode", ours.decode_tps, llama.median.decode_tps);
}

}  // namespace

void add_bench_model(CLI::App* bench) {
    auto o = std::make_shared<BenchModelOptions>();
    CLI::App* cmd =
        bench->add_subcommand("model", "Prompt and decode tokens/s on a model file vs llama.cpp");
    add_model_options(cmd, o->model);
    cmd->add_option("--prompt", o->prompt, "Prompt tokens (random ids, one batch)")
        ->capture_default_str();
    cmd->add_option("--gen", o->gen, "Greedy single-token decodes")->capture_default_str();
    cmd->add_option("--runs", o->runs, "Timed runs per engine (the median is reported)")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the random prompt")->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON instead of a table");
    cmd->add_flag("--no-llama", o->no_llama, "Do not run llama.cpp");
    cmd->add_option("--llama-bench", o->llama_bench,
                    "llama.cpp's llama-bench to compare with (its CUDA build for --device cuda: -ngl 99 -fa 1)");
    cmd->add_option("--llama-args", o->llama_args,
                    "More arguments for llama-bench, e.g. its expert placement: '-ncmoe 48 --no-mmap'");
    cmd->callback([o] { run_bench(*o); });
}

}  // namespace tandem::cli
