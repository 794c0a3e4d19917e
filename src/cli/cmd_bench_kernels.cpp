// `tandem bench kernels`: the chosen variant's dot kernels per weight type — a matvec over
// weights far larger than the caches (DRAM) and one that fits in L2, and the small matmul with
// C = 4 and 8 — in GB/s of weights and ns per row, against ggml's vec_dot measured in the same
// run by the oracle kit (`kern bench`, same K, rows and threads) and a STREAM-style read.
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
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/bench_common.h"
#include "cli/commands.h"
#include "cli/type_option.h"
#include "formats/format_table.h"
#include "kernels/kernel_table.h"

namespace tandem::cli {
namespace {

struct BenchKernelsOptions {
    std::string types;
    int threads = 0;
    bool json = false;
    int64_t k = 4096;
    double mib = 0;  // 0: four times the last-level cache, at least 256 MiB
    double cache_kib = 0;  // 0: threads * L2 / 2, as kern
    double seconds = 1.0;
    std::string variant;
    std::string ggml_variant;
    bool no_ggml = false;
    bool best = false;  // report the best run instead of the median
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

std::string kern_path() {
    if (const char* bin = std::getenv("ORACLE_BIN"); bin && *bin) return std::string(bin) + "/kern";
    if (const char* dir = std::getenv("TANDEM_ORACLE_DIR"); dir && *dir)
        return std::string(dir) + "/bin/kern";
    if (const char* home = std::getenv("HOME"); home && *home)
        return std::string(home) + "/.cache/tandem-oracle/bin/kern";
    return "";
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

// One measured case of our kernels.
struct Measure {
    std::string label;  // dram, cache, C=4, C=8
    int cols = 1;
    int64_t rows = 0;
    double mib = 0, gbs = 0, ns_per_row = 0, seconds = 0;
};

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

Measure measure(ThreadPool& pool, const KernelTable& kt, const FormatTraits& f, int64_t k,
                size_t target_bytes, int cols, const char* label, double seconds, bool best) {
    const size_t rs = row_bytes(f, k);
    const int64_t rows = std::max<int64_t>(static_cast<int64_t>(target_bytes / rs), pool.size());
    const size_t bytes = rs * rows;
    AlignedBuffer w(bytes);
    fill_weights(f, k, w.data(), rows);
    const FormatTraits& act = format_of(f.dot_type);
    const size_t as = row_bytes(act, k);
    AlignedBuffer a(as * cols + 64);
    for (int c = 0; c < cols; ++c) {
        std::vector<float> x(k);
        for (int64_t i = 0; i < k; ++i)
            x[i] = static_cast<float>((i * 31 + c * 17) % 201) / 100.0f - 1.0f;
        kt.quantize[type_id(f.dot_type)](x.data(), a.data() + c * as, k);
    }
    std::vector<float> out(static_cast<size_t>(rows) * cols);
    const DotTileFn dot = kt.dot[type_id(f.type)];
    const Timing timing = time_passes(
        pool,
        [&](int worker) {
            const int64_t r0 = rows * worker / pool.size(), r1 = rows * (worker + 1) / pool.size();
            // One call per slice (chunks of 4096 rows keep n_rows an int for any size).
            for (int64_t r = r0; r < r1; r += 4096) {
                const int n = static_cast<int>(std::min<int64_t>(4096, r1 - r));
                dot(k, w.data() + r * rs, rs, n, a.data(), as, cols, out.data() + r,
                    static_cast<size_t>(rows));
            }
        },
        seconds);
    const double t = best ? timing.best : timing.median;
    Measure m;
    m.label = label;
    m.cols = cols;
    m.rows = rows;
    m.mib = bytes / 1048576.0;
    m.seconds = t;
    m.gbs = bytes / t / 1e9;
    m.ns_per_row = t / rows * 1e9;
    return m;
}

void run_bench(BenchKernelsOptions o) {
    // The DRAM case must be far larger than the last-level cache (some servers have 300 MiB).
    if (o.mib <= 0) o.mib = std::max(256.0, 4.0 * static_cast<double>(cache_bytes(3)) / 1048576);
    const std::vector<GgmlType> types =
        parse_type_list(o.types.empty() ? kDefaultTypes : o.types, "--types");
    const KernelVariant* variant =
        o.variant.empty() ? &chosen_kernel_variant() : find_kernel_variant(o.variant);
    if (variant == nullptr) fail("--variant {}: unknown kernel variant", o.variant);
    if (variant->score(cpu_features()) <= 0)
        fail("--variant {}: this CPU cannot run it", o.variant);
    const KernelTable& kt = *variant->table();
    ThreadPool pool(o.threads);
    const int threads = pool.size();
    const size_t l2 = cache_bytes(2);
    const double cache_kib =
        o.cache_kib > 0 ? o.cache_kib : (l2 ? l2 / 2 : 256 << 10) * threads / 1024.0;
    const size_t dram_bytes = static_cast<size_t>(o.mib * 1048576);
    const size_t cache_bytes_total = static_cast<size_t>(cache_kib * 1024);

    std::string kern = o.no_ggml ? "" : kern_path();
    if (!kern.empty() && access(kern.c_str(), X_OK) != 0) kern.clear();

    const double stream = stream_read_gbs(pool, dram_bytes, o.seconds, o.best);
    if (!o.json) {
        std::printf(
            "tandem bench kernels: variant %s, %d threads, K=%ld, DRAM case %.0f MiB, L2 case %.0f "
            "KiB\n",
            std::string(variant->name).c_str(), threads, static_cast<long>(o.k), o.mib, cache_kib);
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
        double dram = 0, cache = 0, c4 = 0, c8 = 0;
    };
    std::vector<Summary> summary;
    std::string ggml_variant;
    for (GgmlType type : types) {
        const FormatTraits& f = format_of(type);
        if (kt.dot[type_id(type)] == nullptr || f.ref_dot == nullptr)
            fail("--types: {} is not a weight type", f.name);
        if (o.k % f.block_size != 0)
            fail("K={} is not a multiple of the {} block size", o.k, f.name);
        std::vector<Measure> ms;
        ms.push_back(measure(pool, kt, f, o.k, dram_bytes, 1, "dram", o.seconds, o.best));
        ms.push_back(measure(pool, kt, f, o.k, cache_bytes_total, 1, "cache", o.seconds, o.best));
        ms.push_back(measure(pool, kt, f, o.k, dram_bytes, 4, "C=4", o.seconds, o.best));
        ms.push_back(measure(pool, kt, f, o.k, dram_bytes, 8, "C=8", o.seconds, o.best));
        const GgmlResult g = kern.empty()
                                 ? GgmlResult{}
                                 : run_kern(kern, o, std::string(f.name), threads, cache_kib);
        if (g.ok) ggml_variant = g.variant;
        Summary s{std::string(f.name)};
        for (const Measure& m : ms) {
            double ggml_gbs = 0, ggml_ns = 0, ratio = 0;
            std::string note;
            if (m.label == "dram" || m.label == "cache") {
                ggml_gbs = m.label == "dram" ? g.dram_gbs : g.cache_gbs;
                ggml_ns = m.label == "dram" ? g.dram_ns : g.cache_ns;
                ratio = g.ok ? m.gbs / ggml_gbs : 0;
                (m.label == "dram" ? s.dram : s.cache) = ratio;
            } else {
                // Against C matvecs: ours, and ggml's vec_dot called C times.
                const double vs_ours = m.seconds / (m.cols * ms[0].seconds);
                note = fmt::format("{:.2f}x of {} matvecs", vs_ours, m.cols);
                if (g.ok) {
                    ratio = m.cols * g.dram_ns / m.ns_per_row;
                    note += fmt::format(", {:.2f}x faster than {} ggml vec_dot", ratio, m.cols);
                }
                (m.cols == 4 ? s.c4 : s.c8) = vs_ours;
            }
            const double pct = m.label == "cache" ? 0 : 100 * m.gbs / stream;
            if (!o.json) {
                std::printf("%-7s %-6s %9.2f %8ld | %8.2f %9.2f %5.0f%% | %8s %9s | %6s  %s\n",
                            f.name.data(), m.label.c_str(), m.mib, static_cast<long>(m.rows), m.gbs,
                            m.ns_per_row, pct,
                            ggml_gbs > 0 ? fmt::format("{:.2f}", ggml_gbs).c_str() : "-",
                            ggml_ns > 0 ? fmt::format("{:.2f}", ggml_ns).c_str() : "-",
                            ratio > 0 && m.cols == 1 ? fmt::format("{:.2f}", ratio).c_str() : "-",
                            note.c_str());
                std::fflush(stdout);
            }
            results.push_back({{"type", f.name},
                               {"case", m.label},
                               {"cols", m.cols},
                               {"rows", m.rows},
                               {"mib", m.mib},
                               {"gbs", m.gbs},
                               {"ns_per_row", m.ns_per_row},
                               {"read_fraction", m.gbs / stream},
                               {"ggml_gbs", ggml_gbs},
                               {"ggml_ns_per_row", ggml_ns},
                               {"ratio_vs_ggml", ratio}});
        }
        summary.push_back(s);
    }
    if (o.json) {
        nlohmann::json doc = {{"variant", variant->name},
                              {"threads", threads},
                              {"k", o.k},
                              {"dram_mib", o.mib},
                              {"cache_kib", cache_kib},
                              {"stream_read_gbs", stream},
                              {"ggml_variant", ggml_variant},
                              {"results", results}};
        std::printf("%s\n", doc.dump(2).c_str());
        return;
    }
    std::printf("\nratios (ours / ggml %s, GB/s; C=N: time of one C-column pass / N matvecs)\n",
                ggml_variant.empty() ? "(not measured)" : ggml_variant.c_str());
    std::printf("%-7s %8s %8s %8s %8s\n", "type", "dram", "L2", "C=4", "C=8");
    for (const Summary& s : summary) {
        auto r = [](double v) { return v > 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
        std::printf("%-7s %8s %8s %8s %8s\n", s.type.c_str(), r(s.dram).c_str(), r(s.cache).c_str(),
                    r(s.c4).c_str(), r(s.c8).c_str());
    }
}

}  // namespace

void add_bench_kernels(CLI::App* bench) {
    auto o = std::make_shared<BenchKernelsOptions>();
    CLI::App* cmd = bench->add_subcommand(
        "kernels", "CPU dot kernels per weight type vs ggml's vec_dot and the memory bandwidth");
    cmd->add_option("--types", o->types,
                    "Comma-separated weight types (default: every weight type)");
    cmd->add_option("--threads", o->threads, "Threads (default: one per physical core)");
    cmd->add_flag("--json", o->json, "Print JSON instead of tables");
    cmd->add_option("-K,--cols", o->k, "Values per weight row")->capture_default_str();
    cmd->add_option("--mib", o->mib,
                    "Weights of the DRAM-sized cases, MiB (default: 4 x the LLC, at least 256)");
    cmd->add_option("--cache-kib", o->cache_kib,
                    "Weights of the in-cache case, KiB (default: threads x L2 / 2)");
    cmd->add_option("--seconds", o->seconds, "Time per measurement")->capture_default_str();
    cmd->add_option("--variant", o->variant, "Kernel variant to measure (default: the chosen one)");
    cmd->add_option("--ggml-variant", o->ggml_variant,
                    "ggml CPU variant for kern -v (default: its best)");
    cmd->add_flag("--no-ggml", o->no_ggml, "Do not run the oracle kit's kern bench");
    cmd->add_flag("--best", o->best, "Report the best run (default: the median; both sides alike)");
    cmd->callback([o] { run_bench(*o); });
}

}  // namespace tandem::cli
