// `tandem serve`: the OpenAI-compatible HTTP server. It listens at once and loads the model in
// the background (answering 503 "loading" meanwhile), then serves until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/system_memory.h"
#include "base/timer.h"
#include "cli/chat_template_source.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/scheduler.h"
#include "gguf/gguf_split.h"
#include "server/chat_prompt.h"
#include "server/grammar_constraint.h"
#include "server/http_server.h"

namespace tandem::cli {
namespace {

struct ServeOptions {
    ModelOptions model;
    server::ServerOptions http;
    int parallel = 4;
    int queue = 64;
    std::string cache_reuse = "on";  // prompt-prefix reuse through the slots' KV caches
    std::string cache_mem = "auto";  // MiB of host memory for the prefix cache beyond the slots
    std::string chat_template;
    std::string alias;
};

// Everything the server serves, built by the loading thread.
struct Loaded {
    LoadedModel model;
    std::unique_ptr<server::ChatPrompt> chat;
    std::unique_ptr<Scheduler> scheduler;
    server::ServedModel served;
};

std::string model_id(const ServeOptions& o) {
    if (!o.alias.empty()) return o.alias;
    // A split model is named by its prefix: "m-00001-of-00003.gguf" serves as "m".
    if (std::optional<SplitName> split = parse_split_path(o.model.model_path)) {
        return std::filesystem::path(split->prefix).filename().string();
    }
    std::filesystem::path p(o.model.model_path);
    return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

// The default prefix cache: llama.cpp's server keeps 8 GiB (--cache-ram), and a quarter of
// the memory available once the model and the slots are in place leaves the rest to the page
// cache of the weights and to other processes on a smaller machine.
constexpr uint64_t kDefaultCacheMib = 8192;

// --cache-mem: "auto" or whole MiB >= 0; nullopt for "auto".
std::optional<uint64_t> parse_cache_mem(const std::string& text) {
    if (text == "auto") return std::nullopt;
    uint64_t mib = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mib);
    if (ec != std::errc() || end != text.data() + text.size() || mib > (uint64_t{1} << 40))
        fail("--cache-mem '{}' must be a number of MiB (0: none) or 'auto'", text);
    return mib;
}

uint64_t cache_bytes(const std::string& text) {
    if (std::optional<uint64_t> mib = parse_cache_mem(text)) return *mib << 20;
    return std::min<uint64_t>(kDefaultCacheMib << 20, system_memory().available / 4);
}

void load(const ServeOptions& o, Loaded& l) {
    // Test hook: keeps the server in its loading state long enough to observe it.
    if (const char* delay = std::getenv("TANDEM_TEST_LOAD_DELAY_MS")) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
    }
    // The weights page in behind the server: the first requests need not wait for all of them.
    ModelOptions model_options = o.model;
    model_options.page_in_in_background = true;
    l.model = load_model(model_options);
    const Model& model = *l.model.model;
    if (!l.model.tokenizer)
        fail("{}: the model has no vocabulary; the server needs one", o.model.model_path);
    const Tokenizer& tokenizer = *l.model.tokenizer;
    if (auto source = chat_template_source(model, o.chat_template)) {
        l.chat = std::make_unique<server::ChatPrompt>(source->text, source->origin, tokenizer);
        log_info("chat template: {}", source->origin);
    } else {
        log_warn(
            "the model has no chat template: /v1/chat/completions answers 400 (give one with "
            "--chat-template)");
    }

    SchedulerOptions so;
    so.n_slots = o.parallel;
    so.n_ctx = l.model.session.n_ctx;
    so.max_batch = std::max(l.model.session.max_batch, o.parallel + 1);
    so.queue_capacity = o.queue;
    so.reuse_prefix = o.cache_reuse == "on";
    // Measured after the model is mapped, before the scheduler allocates the slots' KV.
    so.cache_bytes = so.reuse_prefix ? cache_bytes(o.cache_mem) : 0;
    so.kv_type = l.model.session.kv_type;
    so.device = l.model.session.device;
    so.gpu = l.model.session.gpu;
    so.is_end_of_generation = [&tokenizer](int32_t id) { return tokenizer.is_eog(id); };
    l.scheduler = std::make_unique<Scheduler>(model, *l.model.pool, so);
    const ModelConfig& c = model.config();
    const double kv_mib = static_cast<double>(c.n_layer) * so.n_slots * so.n_ctx * c.n_head_kv *
                          (c.head_dim_k + c.head_dim_v) * (so.kv_type == KvType::kF16 ? 2 : 4) /
                          (1 << 20);
    log_info(
        "serve: {} slots x {} tokens of context each (KV cache {:.1f} MiB), batch {} tokens, queue "
        "{}, "
        "{} compute threads, {} http threads, prompt-prefix reuse {}",
        so.n_slots, so.n_ctx, kv_mib, so.max_batch, so.queue_capacity, l.model.pool->size(),
        o.http.http_threads, o.cache_reuse);

    l.served.id = model_id(o);
    l.served.aliases = {o.model.model_path,
                        std::filesystem::path(o.model.model_path).filename().string()};
    l.served.path = o.model.model_path;
    l.served.created = static_cast<int64_t>(std::time(nullptr));
    l.served.tokenizer = &tokenizer;
    l.served.chat = l.chat.get();
    l.served.scheduler = l.scheduler.get();
    const Stopwatch vocab_time;
    l.served.grammar_vocab = std::make_shared<server::GrammarVocab>(tokenizer);
    log_debug("grammar vocabulary: {} tokens, trie of {} nodes, {:.0f} ms", tokenizer.n_tokens(),
              l.served.grammar_vocab->trie.n_nodes(), vocab_time.seconds() * 1e3);
    if (l.chat) {
        log_info("tool calls: {} format{}", l.chat->tool_format().name,
                 l.chat->renders_tools() ? ""
                                         : " (the template renders no tools: described in a "
                                           "system prompt)");
    }
}

void serve(ServeOptions o) {
    if (o.parallel <= 0) fail("--parallel {} must be positive", o.parallel);
    if (o.queue < 0) fail("--queue {} must be >= 0", o.queue);
    if (o.cache_reuse != "on" && o.cache_reuse != "off")
        fail("--cache-reuse '{}' must be 'on' or 'off'", o.cache_reuse);
    parse_cache_mem(o.cache_mem);  // checked before the model loads
    if (o.http.port < 0 || o.http.port > 65535) fail("--port {} is not a TCP port", o.http.port);
    if (o.http.max_body_bytes < 1024)
        fail("--max-body {} must be at least 1024 bytes", o.http.max_body_bytes);
    // Every request in a slot or the queue holds a connection thread; a few more for the rest.
    o.http.http_threads = o.parallel + o.queue + 8;

    // SIGINT and SIGTERM are taken by sigwait below; every thread started from here on inherits
    // the mask, so none of them is interrupted by the signal.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    server::HttpServer http(o.http);
    const int port = http.bind();
    http.start();
    log_info("serve: listening on http://{}:{}{}", o.http.host, port,
             o.http.api_key.empty() ? "" : " (API key required)");

    Loaded loaded;
    std::string load_error;
    std::atomic<bool> load_failed{false};
    std::thread loader([&] {
        try {
            load(o, loaded);
            http.set_model(&loaded.served);
            log_info("serve: model '{}' ready", loaded.served.id);
        } catch (const std::exception& e) {
            load_error = e.what();
            load_failed.store(true);
            kill(getpid(), SIGTERM);  // wakes the sigwait below
        }
    });
    int sig = 0;
    sigwait(&signals, &sig);
    if (!load_failed.load())
        log_info("serve: {} received, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    http.stop();
    loader.join();
    if (!load_error.empty()) fail("{}", load_error);
    // `loaded` goes last: the scheduler finishes its requests while the model is still there.
}

}  // namespace

void add_serve_command(CLI::App& app) {
    auto o = std::make_shared<ServeOptions>();
    CLI::App* cmd =
        app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
    add_model_options(cmd, o->model);
    cmd->add_option("--host", o->http.host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", o->http.port, "Port to listen on (0: any free port)")
        ->capture_default_str();
    cmd->add_option("--api-key", o->http.api_key, "Require 'Authorization: Bearer KEY'")
        ->envname("TANDEM_API_KEY");
    cmd->add_option("--parallel", o->parallel,
                    "Requests decoding together (KV cache slots; --ctx is per slot)")
        ->capture_default_str();
    cmd->add_option("--queue", o->queue, "Requests waiting for a slot before 503")
        ->capture_default_str();
    cmd->add_option("--cache-reuse", o->cache_reuse,
                    "on: a prompt that starts with a finished request's tokens reuses their KV "
                    "cache; off: every prompt is computed whole")
        ->capture_default_str();
    cmd->add_option("--cache-mem", o->cache_mem,
                    "MiB of host memory keeping finished requests' KV caches beyond the slots for "
                    "prompt-prefix reuse, least recently used evicted first (0: the slots only; "
                    "auto: 8192 or a quarter of the available memory, whichever is less)")
        ->capture_default_str();
    cmd->add_option("--chat-template", o->chat_template,
                    "Jinja chat template file (default: the model's)");
    cmd->add_option("--alias", o->alias, "Model name in the API (default: the file name)");
    cmd->add_option("--max-body", o->http.max_body_bytes,
                    "Largest request body in bytes (413 beyond)")
        ->capture_default_str();
    cmd->callback([o] { serve(*o); });
}

}  // namespace tandem::cli
