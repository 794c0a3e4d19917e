// /metrics in the Prometheus text format (0.0.4), checked strictly line by line (names, labels,
// escapes, values, HELP and TYPE before samples, families kept together, no duplicate series,
// histograms cumulative with +Inf equal to _count), read with the Prometheus project's own Python
// parser (prometheus_client), and checked for values: the counters after known requests equal
// what those requests reported.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/metrics.h"
#include "server_process.h"
#include "support/oracle.h"
#include "support/temp_dir.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};

struct Exposition {
    std::vector<std::string> problems;
    std::map<std::string, std::string> types;  // family -> type
    std::vector<Sample> samples;

    // The value of the one sample with this name and these labels; NaN when absent.
    double value(const std::string& name,
                 const std::map<std::string, std::string>& labels = {}) const {
        for (const Sample& s : samples) {
            if (s.name == name && s.labels == labels) return s.value;
        }
        return std::nan("");
    }
};

bool parse_value(const std::string& text, double& out) {
    if (text == "+Inf" || text == "Inf") {
        out = INFINITY;
        return true;
    }
    if (text == "-Inf") {
        out = -INFINITY;
        return true;
    }
    if (text == "NaN") {
        out = NAN;
        return true;
    }
    static const std::regex kNumber(R"([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)");
    if (!std::regex_match(text, kNumber)) return false;
    out = std::stod(text);
    return true;
}

// The strict check. Problems are collected, each naming its line.
Exposition check_exposition(const std::string& text) {
    Exposition e;
    auto problem = [&](size_t line, const std::string& what) {
        e.problems.push_back("line " + std::to_string(line) + ": " + what);
    };
    if (text.empty() || text.back() != '\n') e.problems.push_back("does not end with a newline");
    static const std::regex kName(R"([a-zA-Z_:][a-zA-Z0-9_:]*)");
    static const std::regex kHelp(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) ((?:[^\\\n]|\\\\|\\n)*))");
    static const std::regex kType(
        R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
    static const std::regex kSample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?)");
    static const std::regex kLabel(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)\")");
    std::set<std::string> helped, finished_families, series;
    std::string current;  // the family whose lines we are in
    std::istringstream in(text);
    std::string line;
    size_t n = 0;
    auto family_of = [&](const std::string& name) {
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
            const std::string s = suffix;
            if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
                const std::string base = name.substr(0, name.size() - s.size());
                if (e.types.count(base) && e.types[base] == "histogram") return base;
            }
        }
        return name;
    };
    auto enter = [&](const std::string& family, size_t at) {
        if (family == current) return;
        if (finished_families.count(family))
            problem(at, "the lines of " + family + " are not together");
        if (!current.empty()) finished_families.insert(current);
        current = family;
    };
    while (std::getline(in, line)) {
        ++n;
        std::smatch m;
        if (line.rfind("# HELP ", 0) == 0) {
            if (!std::regex_match(line, m, kHelp)) {
                problem(n, "malformed HELP: " + line);
                continue;
            }
            enter(m[1], n);
            if (!helped.insert(m[1]).second) problem(n, "second HELP for " + m[1].str());
        } else if (line.rfind("# TYPE ", 0) == 0) {
            if (!std::regex_match(line, m, kType)) {
                problem(n, "malformed TYPE: " + line);
                continue;
            }
            enter(m[1], n);
            if (e.types.count(m[1])) problem(n, "second TYPE for " + m[1].str());
            e.types[m[1]] = m[2];
        } else if (line.empty() || line[0] == '#') {
            problem(n, "unexpected line: '" + line + "'");
        } else {
            if (!std::regex_match(line, m, kSample)) {
                problem(n, "malformed sample: " + line);
                continue;
            }
            Sample s;
            s.name = m[1];
            const std::string labels = m[3];
            // Labels: name="value" pairs separated by commas, nothing else.
            size_t pos = 0;
            while (pos < labels.size()) {
                std::smatch l;
                const std::string rest = labels.substr(pos);
                if (!std::regex_search(rest, l, kLabel, std::regex_constants::match_continuous)) {
                    problem(n, "malformed labels: " + labels);
                    break;
                }
                if (!s.labels.emplace(l[1], l[2]).second)
                    problem(n, "label repeated: " + l[1].str());
                pos += static_cast<size_t>(l.length(0));
                if (pos < labels.size()) {
                    if (labels[pos] != ',') {
                        problem(n, "labels not separated by commas: " + labels);
                        break;
                    }
                    ++pos;
                }
            }
            if (!parse_value(m[4], s.value)) problem(n, "not a number: " + m[4].str());
            const std::string family = family_of(s.name);
            if (!e.types.count(family)) problem(n, "no TYPE before the samples of " + family);
            enter(family, n);
            if (e.types[family] == "counter" &&
                (s.name.size() < 6 || s.name.compare(s.name.size() - 6, 6, "_total") != 0)) {
                problem(n, "a counter not named *_total: " + s.name);
            }
            if (e.types[family] == "counter" && !(s.value >= 0)) problem(n, "negative counter");
            std::string key = s.name;
            for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
            if (!series.insert(key).second) problem(n, "duplicate series " + key);
            e.samples.push_back(std::move(s));
        }
    }
    // Histograms: for every label set, buckets by increasing le, cumulative, ending at +Inf
    // which equals _count; a _sum.
    for (const auto& [family, type] : e.types) {
        if (type != "histogram") continue;
        std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>>
            buckets;
        for (const Sample& s : e.samples) {
            if (s.name != family + "_bucket") continue;
            auto labels = s.labels;
            auto le = labels.find("le");
            double bound = 0;
            if (le == labels.end() || !parse_value(le->second, bound)) {
                e.problems.push_back(family + ": a bucket without a numeric le");
                continue;
            }
            labels.erase(le);
            buckets[labels].emplace_back(bound, s.value);
        }
        if (buckets.empty()) e.problems.push_back(family + ": a histogram without buckets");
        for (const auto& [labels, list] : buckets) {
            for (size_t i = 1; i < list.size(); ++i) {
                if (!(list[i].first > list[i - 1].first))
                    e.problems.push_back(family + ": le not increasing");
                if (list[i].second < list[i - 1].second)
                    e.problems.push_back(family + ": buckets not cumulative");
            }
            if (list.empty() || !std::isinf(list.back().first)) {
                e.problems.push_back(family + ": no +Inf bucket");
                continue;
            }
            if (list.back().second != e.value(family + "_count", labels))
                e.problems.push_back(family + ": +Inf bucket differs from _count");
            if (std::isnan(e.value(family + "_sum", labels)))
                e.problems.push_back(family + ": no _sum");
        }
    }
    return e;
}

TEST(MetricsFormat, StrictCheckerCatchesMistakes) {
    const std::string good =
        "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"\"} 3\n"
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
        "h_sum 3.5\nh_count 2\n";
    EXPECT_TRUE(check_exposition(good).problems.empty());
    for (const std::string& bad : {
             std::string("# TYPE a_total counter\na_total 1"),               // no newline
             std::string("a_total 1\n"),                                     // no TYPE
             std::string("# TYPE a counter\na 1\n"),                         // not *_total
             std::string("# TYPE a_total counter\na_total{x=1} 1\n"),        // unquoted label
             std::string("# TYPE a_total counter\na_total one\n"),           // not a number
             std::string("# TYPE a_total counter\na_total 1\na_total 2\n"),  // duplicate
             std::string("# TYPE g gauge\n# TYPE a_total counter\na_total 1\ng 1\n"),  // split
             std::string("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum "
                         "1\nh_count 1\n"),
             std::string("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"),
         }) {
        EXPECT_FALSE(check_exposition(bad).problems.empty()) << bad;
    }
}

// Observations from many threads at once, rendered meanwhile: always a valid exposition.
TEST(MetricsFormat, ConcurrentObservationsRenderConsistently) {
    server::Metrics metrics;
    std::atomic<bool> done{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20000; ++i) {
                metrics.observe_token_gap(0.0005 * (i % 50));
                if (i % 100 == 0) {
                    GenerationResult r;
                    r.reason = static_cast<FinishReason>(i % 4);
                    r.prompt_tokens = 10;
                    r.completion_tokens = t;
                    r.first_token_seconds = 0.01 * (i % 7);
                    r.total_seconds = 0.5;
                    metrics.observe_finish(r);
                    metrics.count_response(
                        i % 200 == 0 ? "/v1/messages" : "/bogus/" + std::to_string(i), 200);
                }
            }
        });
    }
    SchedulerStats stats;
    stats.slots_total = 2;
    stats.kv_capacity = 100;
    for (int i = 0; i < 50; ++i) {
        const Exposition e = check_exposition(metrics.render(i % 2 ? &stats : nullptr));
        ASSERT_TRUE(e.problems.empty()) << e.problems.front();
    }
    for (auto& t : threads) t.join();
    const Exposition e = check_exposition(metrics.render(&stats));
    ASSERT_TRUE(e.problems.empty()) << e.problems.front();
    EXPECT_EQ(e.value("tandem_time_per_output_token_seconds_count"), 4 * 20000);
    EXPECT_EQ(e.value("tandem_prompt_tokens_total"), 4 * 200 * 10);
    // Unknown paths share one label value.
    EXPECT_EQ(e.value("tandem_http_responses_total", {{"endpoint", "other"}, {"status", "200"}}),
              4 * 100);
}

std::string scrape(const ServerProcess& server, std::string* content_type = nullptr) {
    TempDir dir;
    std::string out;
    const std::string cmd = "curl -sS --max-time 30 -D " + shell_quote(dir.file("headers")) + " " +
                            shell_quote(server.url("/metrics"));
    EXPECT_EQ(run_command(cmd, &out), 0) << out;
    if (content_type) {
        std::string headers;
        run_command("cat " + shell_quote(dir.file("headers")), &headers);
        std::smatch m;
        if (std::regex_search(headers, m,
                              std::regex(R"(Content-Type: ([^\r\n]*))", std::regex::icase)))
            *content_type = m[1];
    }
    return out;
}

// The Prometheus project's Python client reads the exposition (it raises on malformed text).
void python_parser_reads(const std::string& text) {
    TempDir dir;
    const std::string file = dir.file("metrics.txt");
    {
        std::ofstream out(file);
        out << text;
    }
    std::string out;
    // Debian's python3 (where python3-prometheus-client installs), whatever python3 is first on
    // the PATH.
    const int status = run_command(
        "/usr/bin/python3 -c 'import sys\n"
        "from prometheus_client.parser import text_string_to_metric_families as parse\n"
        "families = list(parse(open(sys.argv[1]).read()))\n"
        "print(len(families), sum(len(f.samples) for f in families))' " +
            shell_quote(file),
        &out);
    ASSERT_EQ(status, 0) << "prometheus_client could not read the metrics (install "
                            "python3-prometheus-client: tools/install-deps.sh --tests):\n"
                         << out << "\n"
                         << text;
}

TEST(Metrics, CountsWhatTheRequestsReported) {
    ServerProcess server({"--parallel", "2", "--ctx", "512"});
    std::string content_type;
    const Exposition empty = check_exposition(scrape(server, &content_type));
    ASSERT_TRUE(empty.problems.empty()) << empty.problems.front();
    EXPECT_EQ(content_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(empty.value("tandem_prompt_tokens_total"), 0);

    int prompt_tokens = 0, completion_tokens = 0, gaps = 0, cached_tokens = 0, hits = 0;
    const int lengths[] = {5, 9, 3};
    for (int i = 0; i < 3; ++i) {
        json body = {{"messages", {{{"role", "user"}, {"content", "Hello " + std::to_string(i)}}}},
                     {"max_tokens", lengths[i]},
                     {"ignore_eos", true},
                     {"temperature", 0}};
        const HttpResponse r =
            http_request("POST", server.url("/v1/chat/completions"), body.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        const json usage = json::parse(r.body)["usage"];
        prompt_tokens += usage["prompt_tokens"].get<int>();
        completion_tokens += usage["completion_tokens"].get<int>();
        const int cached = usage["prompt_tokens_details"]["cached_tokens"].get<int>();
        cached_tokens += cached;
        hits += cached > 0;
        gaps += lengths[i] - 1;
    }
    EXPECT_EQ(http_request("POST", server.url("/v1/chat/completions"), R"({"messages": 3})").status,
              400);
    EXPECT_EQ(http_request("POST", server.url("/v1/messages"), R"({"messages": []})").status, 400);
    EXPECT_EQ(http_request("GET", server.url("/no/such/path")).status, 404);

    const std::string text = scrape(server);
    const Exposition e = check_exposition(text);
    for (const std::string& p : e.problems) ADD_FAILURE() << p << "\n" << text;
    python_parser_reads(text);

    auto responses = [&](const std::string& endpoint, const std::string& status) {
        return e.value("tandem_http_responses_total", {{"endpoint", endpoint}, {"status", status}});
    };
    EXPECT_EQ(responses("/v1/chat/completions", "200"), 3) << text;
    EXPECT_EQ(responses("/v1/chat/completions", "400"), 1) << text;
    EXPECT_EQ(responses("/v1/messages", "400"), 1) << text;
    EXPECT_EQ(responses("other", "404"), 1) << text;
    EXPECT_EQ(responses("/metrics", "200"), 1) << text;  // the first scrape
    EXPECT_EQ(e.value("tandem_prompt_tokens_total"), prompt_tokens);
    EXPECT_EQ(e.value("tandem_generation_tokens_total"), completion_tokens);
    EXPECT_EQ(e.value("tandem_requests_finished_total", {{"reason", "length"}}), 3);
    EXPECT_EQ(e.value("tandem_requests_finished_total", {{"reason", "error"}}), 0);
    EXPECT_EQ(e.value("tandem_time_to_first_token_seconds_count"), 3);
    EXPECT_EQ(e.value("tandem_time_per_output_token_seconds_count"), gaps);
    EXPECT_EQ(e.value("tandem_request_duration_seconds_count"), 3);
    EXPECT_GT(e.value("tandem_time_to_first_token_seconds_sum"), 0);
    EXPECT_EQ(e.value("tandem_slots_total"), 2);
    EXPECT_EQ(e.value("tandem_slots_busy"), 0);
    EXPECT_EQ(e.value("tandem_requests_queued"), 0);
    EXPECT_EQ(e.value("tandem_kv_cache_capacity_tokens"), 2 * 512);
    EXPECT_EQ(e.value("tandem_kv_cache_used_tokens"), 0);
    EXPECT_EQ(e.value("tandem_model_loaded"), 1);
    // The prompts share the chat template's start: the later ones reuse it.
    EXPECT_GT(hits, 0);
    EXPECT_EQ(e.value("tandem_prefix_cache_hits_total"), hits);
    EXPECT_EQ(e.value("tandem_prefix_cache_tokens_total"), cached_tokens);
    EXPECT_GT(e.value("tandem_prefix_cache_kept_tokens"), 0);
    EXPECT_EQ(e.types.at("tandem_prefix_cache_hits_total"), "counter");
    // The part in host memory (--cache-mem auto): a budget, and never more than it held.
    EXPECT_GT(e.value("tandem_prefix_cache_budget_bytes"), 0);
    EXPECT_LE(e.value("tandem_prefix_cache_bytes"), e.value("tandem_prefix_cache_budget_bytes"));
    EXPECT_GE(e.value("tandem_prefix_cache_entries"), 0);
    EXPECT_EQ(e.types.at("tandem_prefix_cache_bytes"), "gauge");
    EXPECT_EQ(e.types.at("tandem_prefix_cache_loads_total"), "counter");
    EXPECT_EQ(e.types.at("tandem_prefix_cache_evictions_total"), "counter");
    EXPECT_EQ(e.types.at("tandem_time_to_first_token_seconds"), "histogram");
    EXPECT_EQ(e.types.at("tandem_slots_busy"), "gauge");
}

// While a long request runs, the gauges show it: a busy slot and KV positions in use.
TEST(Metrics, GaugesShowARunningRequest) {
    ServerProcess server({"--parallel", "1", "--ctx", "16384"});
    std::thread client([&] {
        http_request(
            "POST", server.url("/v1/chat/completions"),
            R"({"messages": [{"role": "user", "content": "Go on"}], "max_tokens": 3000, "ignore_eos": true})");
    });
    Exposition e;
    for (int i = 0; i < 200; ++i) {
        e = check_exposition(scrape(server));
        if (e.value("tandem_kv_cache_used_tokens") > 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(e.problems.empty());
    EXPECT_EQ(e.value("tandem_slots_busy"), 1);
    EXPECT_GT(e.value("tandem_kv_cache_used_tokens"), 0);
    EXPECT_GT(e.value("tandem_kv_cache_usage_ratio"), 0);
    server.stop();  // cancels the request
    client.join();
}

TEST(Metrics, AnswersWhileLoading) {
    ServerProcess server({}, /*wait_ready=*/false, {{"TANDEM_TEST_LOAD_DELAY_MS", "3000"}});
    const std::string text = scrape(server);
    const Exposition e = check_exposition(text);
    EXPECT_TRUE(e.problems.empty()) << text;
    EXPECT_EQ(e.value("tandem_model_loaded"), 0) << text;
    EXPECT_TRUE(std::isnan(e.value("tandem_slots_total")));
}

}  // namespace
}  // namespace tandem::testing
