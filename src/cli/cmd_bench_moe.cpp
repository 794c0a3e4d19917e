// `tandem bench moe`: the MoE executor on random experts over layers far larger than the LLC,
// with random routing: median µs per layer per batch size, GB/s of the expert bytes touched and
// their fraction of the STREAM read bandwidth, and llama.cpp's ggml on the same work
// (bench/ggml_moe.c: mul_mat_id on the CPU backend, built here against the oracle kit) as a ratio.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/bench_common.h"
#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/type_option.h"
#include "cpu/moe_executor.h"
#include "formats/format_table.h"
#include "kernels/kernel_table.h"

#ifndef TANDEM_SOURCE_DIR
#define TANDEM_SOURCE_DIR "."
#endif

namespace tandem::cli {
namespace {

struct BenchMoeOptions {
    std::string type = "q4_0";
    std::string gate_up_type, down_type;
    int64_t hidden = 2816;
    int64_t ffn = 704;
    int experts = 32;
    int layers = 8;
    int top_k = 8;
    std::string batches = "1,4,8";
    int threads = 0;
    int steps = 256;  // timed layer steps per batch size
    uint32_t seed = 1;
    bool json = false;
    bool no_ggml = false;
    bool ggml_no_repack = false;
    std::string ggml_source = TANDEM_SOURCE_DIR "/bench/ggml_moe.c";
};

// One layer evaluation: which layer, and the routes of its T tokens.
struct Step {
    int layer = 0;
    std::vector<Route> routes;  // T × top_k
    int distinct = 0;           // experts touched
};

struct BatchPlan {
    int tokens = 0;
    std::vector<float> hidden;  // T × hidden
    std::vector<Step> steps;    // a warm-up pass over the layers, then the timed steps
};

// Expert weights of one layer: [experts][rows][cols] per projection.
struct LayerBuffers {
    AlignedBuffer gate, up, down;
};

std::vector<int> parse_batches(const std::string& list) {
    std::vector<int> out;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 1 || v > 4096)
            fail("--batch: '{}' is not a batch size (1..4096)", item);
        out.push_back(static_cast<int>(v));
    }
    if (out.empty() || out.size() > 16) fail("--batch: give 1 to 16 comma-separated batch sizes");
    return out;
}

// Checks that a weight type can hold rows of `cols` values, with a hint naming the flag.
void check_shape(const FormatTraits& f, int64_t cols, const char* role, const char* flag,
                 const char* dim) {
    const FormatTraits& act = format_of(f.dot_type);
    const int64_t block = std::max(f.block_size, act.block_size);
    if (cols % block != 0) {
        fail(
            "{} rows of {} values ({} {}) do not fit {}: its blocks hold {} values. Choose {} with "
            "a "
            "block that divides {} (e.g. q8_0, q4_0 or mxfp4, blocks of 32), or a {} that is a "
            "multiple of {}",
            role, cols, dim, cols, f.name, block, flag, cols, dim, block);
    }
    if (f.kind != FormatKind::kFloat && f.kind != FormatKind::kQuantized)
        fail("{}: {} is not a weight type", flag, f.name);
    if (kernels().dot[type_id(f.type)] == nullptr)
        fail("{}: no {} kernel for {}", flag, kernels().name, f.name);
}

// 16 random rows in the format, tiled over every row (the content does not change the speed).
void fill_rows(const FormatTraits& f, int64_t cols, uint8_t* dst, int64_t rows, uint32_t seed) {
    const size_t rs = row_bytes(f, cols);
    const int64_t n_src = std::min<int64_t>(rows, 16);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(cols);
    for (int64_t r = 0; r < n_src; ++r) {
        if (f.random_blocks != nullptr) {
            f.random_blocks(dst + r * rs, cols / f.block_size, seed * 1000003ull + r, 1.0f);
        } else {
            for (float& v : x) v = normal(rng) * 0.05f;
            f.quantize_row(x.data(), dst + r * rs, cols);
        }
    }
    for (int64_t r = n_src; r < rows; ++r) std::memcpy(dst + r * rs, dst + (r % n_src) * rs, rs);
}

ExpertMatrix expert_matrix(const FormatTraits& f, const uint8_t* data, int64_t rows, int64_t cols) {
    ExpertMatrix m;
    m.matrix.format = &f;
    m.matrix.data = data;
    m.matrix.rows = rows;
    m.matrix.cols = cols;
    m.matrix.row_bytes = row_bytes(f, cols);
    m.expert_stride = m.matrix.row_bytes * rows;
    return m;
}

// Random routing: each token picks top_k distinct experts uniformly, weights normalized.
std::vector<BatchPlan> make_plans(const BenchMoeOptions& o, const std::vector<int>& batches) {
    std::mt19937 rng(o.seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uniform(0.05f, 1.0f);
    std::vector<int> ids(o.experts);
    std::vector<BatchPlan> plans;
    for (int T : batches) {
        BatchPlan p;
        p.tokens = T;
        p.hidden.resize(static_cast<size_t>(T) * o.hidden);
        for (float& v : p.hidden) v = normal(rng);
        const int n_steps = o.layers + std::max(o.steps, o.layers);
        for (int s = 0; s < n_steps; ++s) {
            Step st;
            st.layer = s % o.layers;
            st.routes.resize(static_cast<size_t>(T) * o.top_k);
            std::vector<uint8_t> used(o.experts, 0);
            for (int t = 0; t < T; ++t) {
                for (int i = 0; i < o.experts; ++i) ids[i] = i;
                float sum = 0;
                for (int j = 0; j < o.top_k; ++j) {
                    std::uniform_int_distribution<int> pick(j, o.experts - 1);
                    std::swap(ids[j], ids[pick(rng)]);
                    Route& r = st.routes[t * o.top_k + j];
                    r.expert = ids[j];
                    r.weight = uniform(rng);
                    sum += r.weight;
                    used[r.expert] = 1;
                }
                for (int j = 0; j < o.top_k; ++j) st.routes[t * o.top_k + j].weight /= sum;
            }
            st.distinct = static_cast<int>(std::count(used.begin(), used.end(), 1));
            p.steps.push_back(std::move(st));
        }
        plans.push_back(std::move(p));
    }
    return plans;
}

void write_steps_file(const std::string& path, const BenchMoeOptions& o, GgmlType gate_up,
                      GgmlType down, const std::vector<BatchPlan>& plans) {
    std::ofstream f(path, std::ios::binary);
    auto put = [&](int32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    put(0x45534d54);
    put(static_cast<int32_t>(type_id(gate_up)));
    put(static_cast<int32_t>(type_id(down)));
    put(static_cast<int32_t>(o.hidden));
    put(static_cast<int32_t>(o.ffn));
    put(o.experts);
    put(o.layers);
    put(o.top_k);
    put(static_cast<int32_t>(plans.size()));
    for (const BatchPlan& p : plans) {
        put(p.tokens);
        put(static_cast<int32_t>(p.steps.size()));
        f.write(reinterpret_cast<const char*>(p.hidden.data()),
                static_cast<std::streamsize>(p.hidden.size() * 4));
        for (const Step& s : p.steps) {
            put(s.layer);
            for (const Route& r : s.routes) put(r.expert);
            for (const Route& r : s.routes) f.write(reinterpret_cast<const char*>(&r.weight), 4);
        }
    }
    if (!f) fail("cannot write {}", path);
}

// ggml's side: builds bench/ggml_moe.c against the kit (when the source or the command changed)
// and returns its path, or an empty string with the reason in `why`.
std::string build_ggml_moe(const OracleKit& kit, const std::string& source, std::string& why) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(source, ec)) {
        why = fmt::format("{} not found (--ggml-source)", source);
        return "";
    }
    const std::string out = executable_dir() + "/ggml_moe";
    const std::string cmd = fmt::format(
        "gcc -O2 -o '{}.tmp' '{}' -I'{}' -L'{}' -l:libggml.v0.4.0.so -l:libggml-base.so "
        "-Wl,-rpath,'{}' -ldl 2>&1",
        out, source, kit.include, kit.libdir, kit.libdir);
    std::ifstream src(source);
    std::stringstream text;
    text << src.rdbuf() << cmd;
    const std::string stamp = std::to_string(std::hash<std::string>{}(text.str()));
    std::ifstream old_stamp(out + ".stamp");
    std::string old;
    if (old_stamp >> old && old == stamp && access(out.c_str(), X_OK) == 0) return out;
    int rc = 0;
    const std::string log = run_command(cmd, &rc);
    if (rc != 0) {
        why = fmt::format("building {} failed: {}", source, log.substr(0, 400));
        return "";
    }
    fs::rename(out + ".tmp", out, ec);
    std::ofstream(out + ".stamp") << stamp;
    return out;
}

struct GgmlRun {
    bool ok = false;
    std::string variant, weights, why;
    std::vector<double> median_us;  // per batch
};

GgmlRun run_ggml(const BenchMoeOptions& o, GgmlType gate_up, GgmlType down,
                 const std::vector<BatchPlan>& plans, int threads) {
    GgmlRun g;
    const OracleKit kit = find_oracle_kit();
    if (!kit.has_ggml()) {
        g.why = "oracle kit not found (run ../shared/oracle/setup.sh and eval its output)";
        return g;
    }
    const std::string bin = build_ggml_moe(kit, o.ggml_source, g.why);
    if (bin.empty()) return g;
    const std::string steps = fmt::format("/tmp/tandem-bench-moe-{}.steps", getpid());
    write_steps_file(steps, o, gate_up, down, plans);
    int rc = 0;
    const std::string out =
        run_command(fmt::format("'{}' '{}' '{}' {} {} 2>&1", bin, kit.libdir, steps, threads,
                                o.ggml_no_repack ? "--no-repack" : ""),
                    &rc);
    std::filesystem::remove(steps);
    g.median_us.assign(plans.size(), 0);
    std::stringstream lines(out);
    size_t got = 0;
    for (std::string line; std::getline(lines, line);) {
        char name[128] = {};
        int batch = 0, n = 0;
        double med = 0, mean = 0;
        if (std::sscanf(line.c_str(), "variant %127s", name) == 1) g.variant = name;
        if (line.rfind("weights ", 0) == 0) g.weights = line.substr(8);
        if (std::sscanf(line.c_str(), "batch %d steps %d median_us %lf mean_us %lf", &batch, &n,
                        &med, &mean) == 4) {
            for (size_t i = 0; i < plans.size(); ++i) {
                if (plans[i].tokens == batch && g.median_us[i] == 0) {
                    g.median_us[i] = med;
                    ++got;
                    break;
                }
            }
        }
    }
    g.ok = rc == 0 && got == plans.size();
    if (!g.ok) g.why = fmt::format("ggml_moe failed (exit {}): {}", rc, out.substr(0, 400));
    return g;
}

struct OurBatch {
    double median_us = 0, mean_distinct = 0, gbs = 0, per_expert_us = 0;
};

void run_bench(const BenchMoeOptions& o) {
    const GgmlType gate_up = parse_type(o.gate_up_type.empty() ? o.type : o.gate_up_type,
                                        o.gate_up_type.empty() ? "--type" : "--gate-up-type");
    const GgmlType down = parse_type(o.down_type.empty() ? o.type : o.down_type,
                                     o.down_type.empty() ? "--type" : "--down-type");
    if (o.hidden <= 0 || o.ffn <= 0 || o.experts <= 0 || o.layers <= 0 || o.top_k <= 0 ||
        o.top_k > o.experts) {
        fail("--hidden, --ffn, --experts, --layers must be positive and 1 <= --top-k <= --experts");
    }
    if (o.steps < 1) fail("--steps must be positive");
    const FormatTraits& fg = format_of(gate_up);
    const FormatTraits& fd = format_of(down);
    check_shape(fg, o.hidden, "gate/up", "--gate-up-type", "--hidden");
    check_shape(fd, o.ffn, "down", "--down-type", "--ffn");
    const std::vector<int> batches = parse_batches(o.batches);

    ThreadPool pool(o.threads);
    const int threads = pool.size();
    const size_t gate_bytes = row_bytes(fg, o.hidden) * o.ffn;  // one expert's gate (or up)
    const size_t down_bytes = row_bytes(fd, o.ffn) * o.hidden;
    const size_t expert_bytes = 2 * gate_bytes + down_bytes;
    const size_t total = expert_bytes * o.experts * o.layers;
    const size_t llc = cache_bytes(3);

    std::vector<LayerBuffers> buffers(o.layers);
    std::vector<MoeLayer> layers;
    for (int l = 0; l < o.layers; ++l) {
        LayerBuffers& b = buffers[l];
        b.gate = AlignedBuffer(gate_bytes * o.experts);
        b.up = AlignedBuffer(gate_bytes * o.experts);
        b.down = AlignedBuffer(down_bytes * o.experts);
        fill_rows(fg, o.hidden, b.gate.data(), o.ffn * o.experts, o.seed + 3 * l);
        fill_rows(fg, o.hidden, b.up.data(), o.ffn * o.experts, o.seed + 3 * l + 1);
        fill_rows(fd, o.ffn, b.down.data(), o.hidden * o.experts, o.seed + 3 * l + 2);
        MoeLayer L;
        L.n_expert = o.experts;
        L.n_embd = o.hidden;
        L.n_ff = o.ffn;
        L.gate = expert_matrix(fg, b.gate.data(), o.ffn, o.hidden);
        L.up = expert_matrix(fg, b.up.data(), o.ffn, o.hidden);
        L.down = expert_matrix(fd, b.down.data(), o.hidden, o.ffn);
        layers.push_back(L);
    }
    const int max_batch = *std::max_element(batches.begin(), batches.end());
    MoeExecutor moe(std::move(layers), max_batch, o.top_k, pool);
    const std::vector<BatchPlan> plans = make_plans(o, batches);

    // STREAM: a buffer well beyond the LLC (the VM may report a large one), on the same threads.
    const size_t stream_bytes = std::clamp<size_t>(4 * llc, size_t{512} << 20, size_t{2048} << 20);
    const double stream = stream_read_gbs(pool, stream_bytes, 1.0);

    std::vector<OurBatch> ours;
    for (const BatchPlan& p : plans) {
        std::vector<double> us, gbs, per_expert;
        double distinct = 0;
        for (size_t s = 0; s < p.steps.size(); ++s) {
            const Step& st = p.steps[s];
            const double t0 = now_seconds();
            moe.submit(st.layer, p.hidden.data(), p.tokens, st.routes.data());
            moe.wait();
            const double dt = now_seconds() - t0;
            if (s < static_cast<size_t>(o.layers)) continue;  // warm-up pass
            us.push_back(dt * 1e6);
            gbs.push_back(static_cast<double>(st.distinct) * expert_bytes / dt / 1e9);
            per_expert.push_back(dt * 1e6 / st.distinct);
            distinct += st.distinct;
        }
        OurBatch b;
        b.median_us = median(us);
        b.gbs = median(gbs);
        b.per_expert_us = median(per_expert);
        b.mean_distinct = distinct / static_cast<double>(us.size());
        ours.push_back(b);
    }

    GgmlRun g;
    if (o.no_ggml) {
        g.why = "--no-ggml";
    } else {
        g = run_ggml(o, gate_up, down, plans, threads);
    }

    // Batch B against batch 1: time per distinct expert touched, relative (the target is <= 1.1).
    double base_per_expert = 0;
    for (size_t i = 0; i < plans.size(); ++i) {
        if (plans[i].tokens == 1) base_per_expert = ours[i].per_expert_us;
    }
    if (o.json) {
        nlohmann::json rows = nlohmann::json::array();
        for (size_t i = 0; i < plans.size(); ++i) {
            nlohmann::json r = {{"batch", plans[i].tokens},
                                {"median_us", ours[i].median_us},
                                {"mean_distinct_experts", ours[i].mean_distinct},
                                {"gbs", ours[i].gbs},
                                {"stream_fraction", ours[i].gbs / stream},
                                {"us_per_distinct_expert", ours[i].per_expert_us}};
            if (base_per_expert > 0)
                r["vs_batch1_per_expert"] = ours[i].per_expert_us / base_per_expert;
            if (g.ok) {
                r["ggml_median_us"] = g.median_us[i];
                r["speedup_vs_ggml"] = g.median_us[i] / ours[i].median_us;
            }
            rows.push_back(r);
        }
        nlohmann::json doc = {{"gate_up_type", fg.name},
                              {"down_type", fd.name},
                              {"hidden", o.hidden},
                              {"ffn", o.ffn},
                              {"experts", o.experts},
                              {"layers", o.layers},
                              {"top_k", o.top_k},
                              {"threads", threads},
                              {"variant", kernels().name},
                              {"expert_mib", expert_bytes / 1048576.0},
                              {"total_mib", total / 1048576.0},
                              {"llc_mib", llc / 1048576.0},
                              {"stream_read_gbs", stream},
                              {"steps_per_batch", o.steps},
                              {"results", rows}};
        if (g.ok) {
            doc["ggml_variant"] = g.variant;
            doc["ggml_weights"] = g.weights;
            doc["ggml_op"] = "mul_mat_id";
        } else {
            doc["ggml_missing"] = g.why;
        }
        std::printf("%s\n", doc.dump(2).c_str());
        return;
    }
    std::printf(
        "tandem bench moe: gate/up %s, down %s, hidden %ld, ffn %ld, %d experts x %d layers, "
        "top-%d; "
        "%d threads, variant %s\n",
        fg.name.data(), fd.name.data(), static_cast<long>(o.hidden), static_cast<long>(o.ffn),
        o.experts, o.layers, o.top_k, threads, kernels().name.data());
    std::printf(
        "expert %.2f MiB, all experts %.0f MiB (LLC %.0f MiB%s); STREAM read %.2f GB/s (%d "
        "threads, %zu MiB); "
        "%d timed steps per batch, random routes\n",
        expert_bytes / 1048576.0, total / 1048576.0, llc / 1048576.0,
        total < 4 * llc ? ", not far larger: raise --layers" : "", stream, threads,
        stream_bytes >> 20, o.steps);
    if (g.ok) {
        std::printf(
            "ggml: llama.cpp v0.4.0 CPU backend, variant %s, mul_mat_id graph (build_moe_ffn), "
            "persistent thread pool, weights %s\n",
            g.variant.c_str(), g.weights.c_str());
    } else {
        std::printf("ggml: not measured: %s (our numbers only)\n", g.why.c_str());
    }
    std::printf("\n%5s %6s | %10s %10s | %8s %8s | %11s | %8s\n", "batch", "U", "us/layer",
                "ggml us", "GB/s", "%STREAM", "vs U/k*t1", "vs ggml");
    for (size_t i = 0; i < plans.size(); ++i) {
        const OurBatch& b = ours[i];
        const std::string gus = g.ok ? fmt::format("{:.1f}", g.median_us[i]) : "-";
        const std::string ratio = g.ok ? fmt::format("{:.2f}x", g.median_us[i] / b.median_us) : "-";
        const std::string scale =
            base_per_expert > 0 ? fmt::format("{:.2f}", b.per_expert_us / base_per_expert) : "-";
        std::printf("%5d %6.1f | %10.1f %10s | %8.2f %7.0f%% | %11s | %8s\n", plans[i].tokens,
                    b.mean_distinct, b.median_us, gus.c_str(), b.gbs, 100 * b.gbs / stream,
                    scale.c_str(), ratio.c_str());
    }
    std::printf(
        "\nU: distinct experts per layer (mean); GB/s: expert bytes touched / time (median step); "
        "vs U/k*t1: time per distinct expert relative to batch 1 (target <= 1.1); vs ggml: ggml "
        "time / ours\n");
}

}  // namespace

void add_bench_moe(CLI::App* bench) {
    auto o = std::make_shared<BenchMoeOptions>();
    CLI::App* cmd = bench->add_subcommand(
        "moe", "The CPU MoE executor vs the memory bandwidth and llama.cpp's ggml");
    cmd->add_option("--type", o->type, "Expert weight type of gate, up and down")
        ->capture_default_str();
    cmd->add_option("--gate-up-type", o->gate_up_type, "Gate and up type (default: --type)");
    cmd->add_option("--down-type", o->down_type, "Down type (default: --type)");
    cmd->add_option("--hidden", o->hidden, "Hidden width")->capture_default_str();
    cmd->add_option("--ffn", o->ffn, "Expert FFN width")->capture_default_str();
    cmd->add_option("--experts", o->experts, "Experts per layer")->capture_default_str();
    cmd->add_option("--layers", o->layers,
                    "Layers (their experts should be far larger than the LLC)")
        ->capture_default_str();
    cmd->add_option("--top-k", o->top_k, "Routes per token")->capture_default_str();
    cmd->add_option("--batch", o->batches, "Comma-separated batch sizes (tokens)")
        ->capture_default_str();
    cmd->add_option("--threads", o->threads, "Threads (default: one per physical core)")
        ->check(non_negative_number());
    cmd->add_option("--steps", o->steps, "Timed layer evaluations per batch size")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the weights, inputs and routes")
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON instead of a table");
    cmd->add_flag("--no-ggml", o->no_ggml, "Do not run llama.cpp's ggml");
    cmd->add_flag("--ggml-no-repack", o->ggml_no_repack,
                  "ggml without its repacked weight layouts (llama.cpp --no-repack)");
    cmd->add_option("--ggml-source", o->ggml_source, "Source of the ggml side")
        ->capture_default_str();
    cmd->callback([o] { run_bench(*o); });
}

}  // namespace tandem::cli
