// `tandem bench kernels`: the chosen variant's dot kernels per weight type — a matvec over
// weights far larger than the caches (DRAM) and one that fits in L2, and the small matmul with
// C = 4 and 8 — in GB/s of weights and ns per row, against ggml's vec_dot measured in the same
// run by the oracle kit (`kern bench`, same K, rows and threads) and a STREAM-style read; the
// summary names the speed targets (kernels/speed_targets.h) each type misses.
#include <unistd.h>
#if defined(__SSE2__)
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/bench_common.h"
#include "cli/bench_gpu_kernels.h"
#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/type_option.h"
#include "formats/format_table.h"
#include "kernels/kernel_table.h"
#include "kernels/speed_targets.h"

namespace tandem::cli {
namespace {

struct BenchKernelsOptions {
    std::string types;
    int threads = 0;
    bool json = false;
    int64_t k = 4096;
    double mib = 0;  // 0: four times the last-level cache, at least 256 MiB
    double cache_kib = 0;  // 0: half of each L2 for the threads on it (threads_per_l2)
    double seconds = 0.5;
    int rounds = 3;  // ours and ggml's runs alternate; medians over the rounds
    std::string variant;
    std::string ggml_variant;
    bool no_ggml = false;
    bool best = false;  // report the best run instead of the median
    std::string device = "cpu";  // cpu | cuda
};

// Every weight type (each has a SIMD kernel on x86; some use the baseline on aarch64): the
// default list.
constexpr const char* kDefaultTypes =
    "f32,f16,bf16,q4_0,q4_1,q5_0,q5_1,q8_0,q2_K,q3_K,q4_K,q5_K,q6_K,iq4_nl,iq4_xs,mxfp4,nvfp4,"
    "iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq1_s,iq1_m,tq1_0,tq2_0,q1_0,q2_0";

struct Timing {
    double best = 0, median = 0;  // seconds per pass
};

// Runs pass(worker) on every worker: warm-up, then repetitions grouped so that one timed run
// lasts >= 5 ms, for `seconds` (at least 5 runs); best and median per pass.
Timing time_passes(ThreadPool& pool, const std::function<void(int)>& pass, double seconds) {
    auto timed = [&](int reps) {
        const double t0 = now_seconds();
        pool.run([&](int worker) {
            for (int i = 0; i < reps; ++i) pass(worker);
        });
        return (now_seconds() - t0) / reps;
    };
    // Repetitions from the fastest of three warm-ups, so that a warm-up slowed down by another
    // process does not leave timed runs so short that waking the workers dominates them.
    double t1 = timed(1);
    t1 = std::min(t1, timed(1));
    t1 = std::min(t1, timed(1));
    const int reps = t1 < 5e-3 ? static_cast<int>(5e-3 / std::max(t1, 1e-7)) + 1 : 1;
    std::vector<double> runs;
    const double start = now_seconds();
    while ((now_seconds() - start < seconds || runs.size() < 5) && runs.size() < 4096)
        runs.push_back(timed(reps));
    std::sort(runs.begin(), runs.end());
    return {runs.front(), runs[runs.size() / 2]};
}

// ggml's numbers for one type from `kern bench`.
struct GgmlResult {
    bool ok = false;
    double dram_gbs = 0, dram_ns = 0, cache_gbs = 0, cache_ns = 0;
    std::string variant;
};

// ggml's CPU build (kern -v) of the instruction-set class of one of our variants, so that
// --variant compares like with like; empty: ggml's best, the class of the variants above these.
std::string_view ggml_variant_of_class(std::string_view ours) {
    if (ours == "baseline") return "x64";
    if (ours == "avx2") return "haswell";
    if (ours == "avx_vnni") return "alderlake";
    if (ours == "avx512") return "skylakex";
    if (ours == "avx512_vnni") return "icelake";
    return {};
}

GgmlResult run_kern(const std::string& kern, const BenchKernelsOptions& o, const std::string& type,
                    int threads, double cache_kib) {
    std::string cmd = kern;
    if (!o.ggml_variant.empty()) cmd += " -v " + o.ggml_variant;
    cmd += fmt::format(" bench -t {} -K {} --mib {} --cache-kib {} --seconds {} {} 2>/dev/null",
                       threads, o.k, o.mib, cache_kib, o.seconds, type);
    GgmlResult r;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char line[1024];
    bool dram = false, cache = false;
    while (std::fgets(line, sizeof line, p)) {
        // "bench TYPE LABEL variant=V ... | best ... | median MS ms GBS GB/s NS ns/row | ..."
        char label[16] = {}, variant[64] = {};
        if (std::sscanf(line, "bench %*s %15s variant=%63s", label, variant) != 2) continue;
        const char* med = std::strstr(line, o.best ? "| best " : "| median ");
        double ms = 0, gbs = 0, ns = 0;
        if (med == nullptr || std::sscanf(med,
                                          o.best ? "| best %lf ms %lf GB/s %lf ns/row"
                                                 : "| median %lf ms %lf GB/s %lf ns/row",
                                          &ms, &gbs, &ns) != 3) {
            continue;
        }
        r.variant = variant;
        if (std::strcmp(label, "dram") == 0) {
            r.dram_gbs = gbs;
            r.dram_ns = ns;
            dram = true;
        } else if (std::strcmp(label, "cache") == 0) {
            r.cache_gbs = gbs;
            r.cache_ns = ns;
            cache = true;
        }
    }
    pclose(p);
    r.ok = dram && cache;
    return r;
}

// Weights: 16 random rows tiled over the matrix (content does not matter for speed; as kern).
void fill_weights(const FormatTraits& f, int64_t k, uint8_t* w, int64_t rows) {
    const size_t rs = row_bytes(f, k);
    const int64_t n_src = std::min<int64_t>(rows, 16);
    std::vector<uint8_t> src(rs * n_src);
    for (int64_t r = 0; r < n_src; ++r) {
        if (f.random_blocks != nullptr) {
            f.random_blocks(src.data() + r * rs, k / f.block_size, 17 + r, 1.0f);
        } else {
            std::vector<float> x(k);
            for (int64_t i = 0; i < k; ++i)
                x[i] = static_cast<float>((i * 7919 + r * 104729) % 2001) / 1000.0f - 1.0f;
            f.quantize_row(x.data(), src.data() + r * rs, k);
        }
    }
    for (int64_t r = 0; r < rows; ++r) std::memcpy(w + r * rs, src.data() + (r % n_src) * rs, rs);
}

// A weight matrix of about target_bytes (at least a row per worker), made once per type and
// timed in every round.
struct Weights {
    Weights(const FormatTraits& f, int64_t k, size_t target_bytes, int workers)
        : row_bytes(tandem::row_bytes(f, k)),
          rows(std::max<int64_t>(static_cast<int64_t>(target_bytes / row_bytes), workers)),
          data(row_bytes * rows) {
        fill_weights(f, k, data.data(), rows);
    }
    double mib() const { return static_cast<double>(data.size()) / 1048576.0; }
    size_t row_bytes;
    int64_t rows;
    AlignedBuffer data;
};

// `cols` activation rows in the type's activation format.
struct Activations {
    Activations(const KernelTable& kt, const FormatTraits& f, int64_t k, int cols)
        : row_bytes(tandem::row_bytes(format_of(f.dot_type), k)), data(row_bytes * cols + 64) {
        for (int c = 0; c < cols; ++c) {
            std::vector<float> x(k);
            for (int64_t i = 0; i < k; ++i)
                x[i] = static_cast<float>((i * 31 + c * 17) % 201) / 100.0f - 1.0f;
            kt.quantize[type_id(f.dot_type)](x.data(), data.data() + c * row_bytes, k);
        }
    }
    size_t row_bytes;
    AlignedBuffer data;
};

// Seconds per pass of the type's DotTileFn over all rows of w against the first `cols`
// activation rows, each worker one slice of the rows.
double time_dot(ThreadPool& pool, const KernelTable& kt, const FormatTraits& f, int64_t k,
                const Weights& w, const Activations& a, int cols, double seconds, bool best) {
    const int64_t rows = w.rows;
    std::vector<float> out(static_cast<size_t>(rows) * cols);
    const DotTileFn dot = kt.dot[type_id(f.type)];
    const Timing timing = time_passes(
        pool,
        [&](int worker) {
            const int64_t r0 = rows * worker / pool.size(), r1 = rows * (worker + 1) / pool.size();
            // One call per slice (chunks of 4096 rows keep n_rows an int for any size).
            for (int64_t r = r0; r < r1; r += 4096) {
                const int n = static_cast<int>(std::min<int64_t>(4096, r1 - r));
                dot(k, w.data.data() + r * w.row_bytes, w.row_bytes, n, a.data.data(), a.row_bytes,
                    cols, out.data() + r, static_cast<size_t>(rows));
            }
        },
        seconds);
    return best ? timing.best : timing.median;
}

// The measured cases of a type.
struct Case {
    const char* label;  // dram, cache, C=4, C=8
    int cols;
    bool in_cache;  // the L2-sized weights, else the DRAM-sized ones
};
constexpr Case kCases[] = {
    {"dram", 1, false}, {"cache", 1, true}, {"C=4", 4, false}, {"C=8", 8, false}};

void run_bench(BenchKernelsOptions o) {
    // The DRAM case must be far larger than the last-level cache (some servers have 300 MiB).
    if (o.mib <= 0) o.mib = std::max(256.0, 4.0 * static_cast<double>(cache_bytes(3)) / 1048576);
    if (o.rounds < 1) fail("--rounds {}: must be at least 1", o.rounds);
    const std::vector<GgmlType> types =
        parse_type_list(o.types.empty() ? kDefaultTypes : o.types, "--types");
    const KernelVariant* variant =
        o.variant.empty() ? &chosen_kernel_variant() : find_kernel_variant(o.variant);
    if (variant == nullptr) fail("--variant {}: unknown kernel variant", o.variant);
    if (variant->score(cpu_features()) <= 0)
        fail("--variant {}: this CPU cannot run it", o.variant);
    const KernelTable& kt = *variant->table();
    for (GgmlType type : types) {  // (before the minutes of measuring)
        const FormatTraits& f = format_of(type);
        if (kt.dot[type_id(type)] == nullptr || f.ref_dot == nullptr)
            fail("--types: {} is not a weight type", f.name);
        if (o.k % f.block_size != 0)
            fail("K={} is not a multiple of the {} block size", o.k, f.name);
    }
    if (o.ggml_variant.empty()) o.ggml_variant = ggml_variant_of_class(variant->name);
    ThreadPool pool(o.threads);
    const int threads = pool.size();
    const size_t l2 = cache_bytes(2);
    // Half of each L2 for the slices of the threads on it (hyperthreads share one).
    const double cache_kib = o.cache_kib > 0 ? o.cache_kib
                                             : (l2 ? l2 / 2 : 256 << 10) * threads /
                                                   threads_per_l2(threads) / 1024.0;
    const size_t dram_bytes = static_cast<size_t>(o.mib * 1048576);
    const size_t cache_bytes_total = static_cast<size_t>(cache_kib * 1024);

    std::string kern;
    if (!o.no_ggml) {
        const std::string bin = find_oracle_kit().bin;
        if (!bin.empty() && access((bin + "/kern").c_str(), X_OK) == 0) kern = bin + "/kern";
    }

    const double stream = stream_read_gbs(pool, dram_bytes, o.seconds, o.best);
    if (!o.json) {
        std::printf(
            "tandem bench kernels: variant %s, %d threads, K=%ld, DRAM case %.0f MiB, L2 case %.0f "
            "KiB, %d rounds (ours and ggml's alternate, in ABBA order; medians)\n",
            std::string(variant->name).c_str(), threads, static_cast<long>(o.k), o.mib, cache_kib,
            o.rounds);
        std::printf("STREAM-style read: %.2f GB/s (%d threads, %.0f MiB)\n", stream, threads,
                    o.mib);
        if (kern.empty()) {
            std::printf(
                "oracle kit not set up (no kern: set ORACLE_BIN, see ../shared/oracle/README.md): "
                "our numbers only\n");
        }
        std::printf("\n%-7s %-6s %9s %8s | %8s %9s %6s | %8s %9s | %6s  %s\n", "type", "case",
                    "MiB", "rows", "GB/s", "ns/row", "%read", "ggml", "ns/row", "ratio", "notes");
    }
    nlohmann::json results = nlohmann::json::array();
    struct Summary {
        std::string type;
        double ratio[std::size(kCases)] = {};  // dram, L2: ours / ggml; C=N: vs N matvecs
        double gbs[std::size(kCases)] = {};
        std::vector<std::string> missed;  // the speed targets (kernels/speed_targets.h) missed
    };
    std::vector<Summary> summary;
    std::string ggml_variant;
    for (GgmlType type : types) {
        const FormatTraits& f = format_of(type);
        const Weights dram(f, o.k, dram_bytes, threads), cache(f, o.k, cache_bytes_total, threads);
        const Activations act(kt, f, o.k, kMaxTileCols);

        // Rounds: our cases and ggml's, the side that runs first alternating (ABBA: on Sapphire
        // Rapids the first of two runs in a row was up to 1.35x faster); a ratio compares the
        // runs of one round.
        std::vector<double> seconds[std::size(kCases)];
        std::vector<GgmlResult> ggml;
        const auto ours = [&] {
            for (size_t i = 0; i < std::size(kCases); ++i) {
                const Case& c = kCases[i];
                seconds[i].push_back(time_dot(pool, kt, f, o.k, c.in_cache ? cache : dram, act,
                                              c.cols, o.seconds, o.best));
            }
        };
        const auto theirs = [&] {
            if (kern.empty()) return;
            const GgmlResult g = run_kern(kern, o, std::string(f.name), threads, cache_kib);
            ggml.push_back(g);
            if (g.ok) ggml_variant = g.variant;
        };
        for (int round = 0; round < o.rounds; ++round) {
            if (round % 2 == 0) {
                ours();
                theirs();
            } else {
                theirs();
                ours();
            }
        }

        Summary s{std::string(f.name)};
        for (size_t i = 0; i < std::size(kCases); ++i) {
            const Case& c = kCases[i];
            const Weights& w = c.in_cache ? cache : dram;
            auto ns_per_row = [&](double t) { return t / static_cast<double>(w.rows) * 1e9; };
            const double t = median(seconds[i]);
            const double gbs = static_cast<double>(w.data.size()) / t / 1e9, ns = ns_per_row(t);
            std::vector<double> ggml_gbs, ggml_ns, ratios, vs_ggml;
            for (size_t r = 0; r < ggml.size(); ++r) {
                const GgmlResult& g = ggml[r];
                if (!g.ok) continue;
                const double g_ns = c.in_cache ? g.cache_ns : g.dram_ns;
                if (c.cols == 1) {
                    ggml_gbs.push_back(c.in_cache ? g.cache_gbs : g.dram_gbs);
                    ggml_ns.push_back(g_ns);
                    ratios.push_back(g_ns / ns_per_row(seconds[i][r]));
                } else {
                    // ggml's vec_dot called C times over the same weights.
                    vs_ggml.push_back(c.cols * g_ns / ns_per_row(seconds[i][r]));
                }
            }
            std::string note;
            if (c.cols > 1) {
                // Against C of our matvecs (the DRAM case) of the same round.
                for (size_t r = 0; r < seconds[i].size(); ++r)
                    ratios.push_back(seconds[i][r] / (c.cols * seconds[0][r]));
                note = fmt::format("{:.2f}x of {} matvecs", median(ratios), c.cols);
                if (!vs_ggml.empty())
                    note += fmt::format(", {:.2f}x faster than {} ggml vec_dot", median(vs_ggml),
                                        c.cols);
            }
            const double ratio = median(ratios);
            s.ratio[i] = ratio;
            s.gbs[i] = gbs;
            const double pct = c.in_cache ? 0 : 100 * gbs / stream;
            const double g_gbs = median(ggml_gbs), g_ns = median(ggml_ns);
            if (!o.json) {
                auto num = [](double v) {
                    return v > 0 ? fmt::format("{:.2f}", v) : std::string("-");
                };
                std::printf("%-7s %-6s %9.2f %8ld | %8.2f %9.2f %5.0f%% | %8s %9s | %6s  %s\n",
                            f.name.data(), c.label, w.mib(), static_cast<long>(w.rows), gbs, ns,
                            pct, num(g_gbs).c_str(), num(g_ns).c_str(),
                            c.cols == 1 ? num(ratio).c_str() : "-", note.c_str());
                std::fflush(stdout);
            }
            results.push_back({{"type", f.name},
                               {"case", c.label},
                               {"cols", c.cols},
                               {"rows", w.rows},
                               {"mib", w.mib()},
                               {"gbs", gbs},
                               {"ns_per_row", ns},
                               {"read_fraction", gbs / stream},
                               {"ggml_gbs", g_gbs},
                               {"ggml_ns_per_row", g_ns},
                               {c.cols == 1 ? "ratio_vs_ggml" : "ratio_vs_matvecs", ratio}});
        }
        s.missed = missed_speed_targets(s.type, {.dram_vs_ggml = s.ratio[0],
                                                 .l2_vs_ggml = s.ratio[1],
                                                 .c8_vs_matvecs = s.ratio[3],
                                                 .dram_gbs = s.gbs[0],
                                                 .l2_gbs = s.gbs[1],
                                                 .stream_gbs = stream});
        summary.push_back(s);
    }
    nlohmann::json missed = nlohmann::json::object();  // type -> the targets it misses
    for (const Summary& s : summary) missed[s.type] = s.missed;
    if (o.json) {
        nlohmann::json doc = {{"variant", variant->name},
                              {"threads", threads},
                              {"k", o.k},
                              {"dram_mib", o.mib},
                              {"cache_kib", cache_kib},
                              {"rounds", o.rounds},
                              {"stream_read_gbs", stream},
                              {"ggml_variant", ggml_variant},
                              {"results", results},
                              {"missed_targets", missed}};
        std::printf("%s\n", doc.dump(2).c_str());
        return;
    }
    std::printf(
        "\nratios, medians of %d rounds (ours / ggml %s, speed; C=N: time of one C-column pass / "
        "N matvecs)\n",
        o.rounds, ggml_variant.empty() ? "(not measured)" : ggml_variant.c_str());
    const SpeedTargets& t = kSpeedTargets;
    std::printf(
        "targets: dram >= %.1f, L2 >= %.1f (%.1f for %s), C=8 <= %.2f; from DRAM %.0f%% of the "
        "read where from L2 %.0f%% of it\n",
        t.dram_vs_ggml, t.l2_vs_ggml, t.l2_vs_ggml_core,
        fmt::format("{}", fmt::join(kCoreTypes, ", ")).c_str(), t.c8_vs_matvecs,
        100 * t.read_fraction, 100 / t.read_fraction);
    std::printf("%-7s %8s %8s %8s %8s %6s  %s\n", "type", "dram", "L2", "C=4", "C=8", "%read",
                "missed");
    int n_missed = 0;
    for (const Summary& s : summary) {
        auto r = [](double v) { return v > 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
        n_missed += !s.missed.empty();
        std::printf("%-7s %8s %8s %8s %8s %5.0f%%  %s\n", s.type.c_str(), r(s.ratio[0]).c_str(),
                    r(s.ratio[1]).c_str(), r(s.ratio[2]).c_str(), r(s.ratio[3]).c_str(),
                    100 * s.gbs[0] / stream, fmt::format("{}", fmt::join(s.missed, " ")).c_str());
    }
    std::printf("%d of %zu types miss a target%s\n", n_missed, summary.size(),
                ggml_variant.empty() ? " (ggml not measured: its ratios not checked)" : "");
}

}  // namespace

void add_bench_kernels(CLI::App* bench) {
    auto o = std::make_shared<BenchKernelsOptions>();
    CLI::App* cmd = bench->add_subcommand(
        "kernels", "CPU dot kernels per weight type vs ggml's vec_dot and the memory bandwidth");
    cmd->add_option("--types", o->types,
                    "Comma-separated weight types (default: every weight type)");
    cmd->add_option("--threads", o->threads, "Threads (default: one per physical core)")
        ->check(non_negative_number());
    cmd->add_flag("--json", o->json, "Print JSON instead of tables");
    cmd->add_option("-K,--cols", o->k, "Values per weight row")
        ->capture_default_str()
        ->check(positive_number());
    cmd->add_option("--mib", o->mib,
                    "Weights of the DRAM-sized cases, MiB (default: 4 x the LLC, at least 256)")
        ->check(non_negative_number());
    cmd->add_option(
        "--cache-kib", o->cache_kib,
        "Weights of the in-cache case, KiB (default: half of each L2 for the threads on it)")
        ->check(non_negative_number());
    cmd->add_option("--seconds", o->seconds, "Time per measurement and round")
        ->capture_default_str()
        ->check(non_negative_number());
    cmd->add_option("--rounds", o->rounds,
                    "Rounds per type: ours and ggml's runs alternate, medians reported")
        ->capture_default_str();
    cmd->add_option("--variant", o->variant, "Kernel variant to measure (default: the chosen one)");
    cmd->add_option("--ggml-variant", o->ggml_variant,
                    "ggml CPU variant for kern -v (default: the class of --variant, else its best)");
    cmd->add_flag("--no-ggml", o->no_ggml, "Do not run the oracle kit's kern bench");
    cmd->add_flag("--best", o->best, "Report the best run (default: the median; both sides alike)");
    cmd->add_option("--device", o->device,
                    "cpu (the CPU kernels vs ggml) or cuda (the GPU's products vs the card's copy rate)")
        ->capture_default_str();
    cmd->callback([o] {
        if (o->device == "cuda") {
            run_gpu_kernel_bench(parse_type_list(o->types.empty() ? kDefaultTypes : o->types, "--types"), o->k,
                                 o->mib, o->rounds, o->json);
        } else if (o->device == "cpu") {
            run_bench(*o);
        } else {
            fail("--device: '{}' is not cpu or cuda", o->device);
        }
    });
}

}  // namespace tandem::cli
