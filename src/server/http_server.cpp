// The HTTP server: routes, authentication, body limit, errors and lifecycle.
#include "server/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>

#include <httplib.h>

#include "base/error.h"
#include "base/log.h"
#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/completion_endpoints.h"
#include "server/completion_request.h"
#include "server/generation_job.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/openai_json.h"

namespace tandem::server {
namespace {

using nlohmann::json;

// Debian's cpp-httplib was built listening with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG):
// when many clients connect at once the kernel drops their SYNs and they retry a second later.
// Listening again on the bound socket only raises the backlog.
class Listener : public httplib::Server {
  public:
    void widen_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

constexpr int kListenBacklog = 1024;

void set_error(httplib::Response& res, int status, const std::string& body) {
    res.status = status;
    res.set_content(body, "application/json");
}

// `header` is `prefix` then the key; constant time over the key: no timing hint of how much of
// a guess was right.
bool key_matches(const std::string& header, const std::string& prefix, const std::string& key) {
    if (header.size() != prefix.size() + key.size() ||
        header.compare(0, prefix.size(), prefix) != 0)
        return false;
    unsigned diff = 0;
    for (size_t i = 0; i < key.size(); ++i)
        diff |= static_cast<unsigned char>(header[prefix.size() + i] ^ key[i]);
    return diff == 0;
}

// The Anthropic API's paths answer errors in its shape.
bool anthropic_path(const std::string& path) {
    return path.rfind("/v1/messages", 0) == 0;
}

std::string error_for(const std::string& path, int status, const std::string& message,
                      const std::string& code = {}) {
    return anthropic_path(path) ? anthropic_error_body(status, message)
                                : error_body(status, message, code);
}

}  // namespace

struct HttpServer::Impl {
    ServerOptions options;
    Listener http;
    std::atomic<const ServedModel*> model{nullptr};
    std::atomic<bool> stopping{false};
    // Completion responses not yet fully written; shutdown waits for them (bounded).
    std::mutex in_flight_mutex;
    std::condition_variable in_flight_done;
    int in_flight = 0;
    std::thread thread;
    std::atomic<bool> listener_ended{false};
    int port = -1;
    bool stopped = false;
    Metrics metrics;

    // Counts a response in flight until the returned token is released.
    std::shared_ptr<void> track() {
        {
            std::lock_guard<std::mutex> lock(in_flight_mutex);
            ++in_flight;
        }
        return std::shared_ptr<void>(nullptr, [this](void*) {
            std::lock_guard<std::mutex> lock(in_flight_mutex);
            if (--in_flight == 0) in_flight_done.notify_all();
        });
    }

    const ServedModel& ready_model() const {
        if (stopping.load()) throw ApiError(503, "the server is shutting down", "shutting_down");
        const ServedModel* m = model.load();
        if (!m) throw ApiError(503, "the model is loading; retry shortly", "model_loading");
        return *m;
    }

    // Runs a handler, turning every exception into an error response: a bad request never
    // takes the server down.
    // Errors in OpenAI's shape, or Anthropic's on its paths.
    template <typename F>
    httplib::Server::Handler guarded(F f) {
        return [f](const httplib::Request& req, httplib::Response& res) {
            const bool anthropic = anthropic_path(req.path);
            try {
                f(req, res);
            } catch (const ApiError& e) {
                set_error(res, e.status(),
                          anthropic ? anthropic_error_body(e.status(), e.what()) : e.body());
            } catch (const Error& e) {
                set_error(res, 400, error_for(req.path, 400, e.what()));
            } catch (const std::bad_alloc&) {
                set_error(res, 500, error_for(req.path, 500, "out of memory"));
            } catch (const std::exception& e) {
                log_warn("{} {}: {}", req.method, req.path, e.what());
                set_error(res, 500,
                          error_for(req.path, 500, std::string("internal error: ") + e.what()));
            }
        };
    }

    void health(httplib::Response& res) const {
        const ServedModel* m = model.load();
        if (stopping.load()) {
            set_error(res, 503, dump(json{{"status", "stopping"}}));
        } else if (!m) {
            set_error(res, 503, dump(json{{"status", "loading"}}));
        } else {
            const SchedulerStats s = m->scheduler->stats();
            res.set_content(dump(json{{"status", "ok"},
                                      {"slots_total", s.slots_total},
                                      {"slots_busy", s.slots_busy},
                                      {"queued", s.queued},
                                      {"requests_finished", s.finished},
                                      {"requests_cancelled", s.cancelled}}),
                            "application/json");
        }
    }

    // llama.cpp's /props, the parts clients read: the context of a slot, the sampling a request
    // that sets nothing gets, the slots, the model's names and its chat template.
    void props(httplib::Response& res) const {
        const ServedModel& m = ready_model();
        const SchedulerStats s = m.scheduler->stats();
        const SamplingParams p = default_sampling();
        const json params = {{"temperature", p.temperature}, {"top_k", p.top_k},
                             {"top_p", p.top_p},             {"min_p", p.min_p},
                             {"repeat_penalty", p.repeat_penalty},
                             {"repeat_last_n", p.repeat_last_n}, {"n_predict", -1}};
        res.set_content(
            dump(json{{"default_generation_settings",
                       {{"n_ctx", s.slots_total > 0 ? s.kv_capacity / s.slots_total : 0},
                        {"params", params}}},
                      {"total_slots", s.slots_total},
                      {"model_alias", m.id},
                      {"model_path", m.path},
                      {"chat_template", m.chat ? m.chat->source() : std::string()},
                      {"modalities", {{"vision", false}, {"audio", false}}},
                      {"build_info", "tandem"}}),
            "application/json");
    }

    void tokenize(const httplib::Request& req, httplib::Response& res) const {
        const ServedModel& m = ready_model();
        const json body = parse_json_object(req.body);
        const auto content = get_string(body, "content");
        if (!content) bad_request("'content' is missing", "content");
        // llama.cpp's defaults: no BOS, special tokens written in the text parsed.
        const bool add_special = get_bool(body, "add_special").value_or(false);
        const bool parse_special = get_bool(body, "parse_special").value_or(true);
        const bool with_pieces = get_bool(body, "with_pieces").value_or(false);
        const std::vector<TokenId> ids = m.tokenizer->encode(*content, add_special, parse_special);
        json tokens = json::array();
        for (TokenId id : ids) {
            if (with_pieces) {
                tokens.push_back({{"id", id}, {"piece", m.tokenizer->token_to_piece(id)}});
            } else {
                tokens.push_back(id);
            }
        }
        res.set_content(dump(json{{"tokens", tokens}}), "application/json");
    }

    void detokenize(const httplib::Request& req, httplib::Response& res) const {
        const ServedModel& m = ready_model();
        const json body = parse_json_object(req.body);
        auto it = body.find("tokens");
        if (it == body.end() || it->is_null()) bad_request("'tokens' is missing", "tokens");
        if (!it->is_array()) bad_request("'tokens' must be an array of token ids", "tokens");
        std::vector<TokenId> ids;
        for (const auto& v : *it) {
            if (!v.is_number_integer() && !v.is_number_unsigned()) {
                bad_request("'tokens' must be an array of token ids", "tokens");
            }
            // Non-negative numbers parse as unsigned; clamp those past int64 instead of wrapping.
            const int64_t id =
                v.is_number_unsigned()
                    ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                    : v.get<int64_t>();
            if (id < 0 || id >= m.tokenizer->n_tokens()) {
                bad_request(fmt::format("token id {} is outside the vocabulary (0..{})", id,
                                        m.tokenizer->n_tokens() - 1),
                            "tokens");
            }
            ids.push_back(static_cast<TokenId>(id));
        }
        res.set_content(dump(json{{"content", m.tokenizer->decode(ids, /*render_special=*/true)}}),
                        "application/json");
    }

    void routes() {
        http.Get("/health",
                 guarded([this](const httplib::Request&, httplib::Response& res) { health(res); }));
        for (const char* path : {"/v1/models", "/models"}) {
            http.Get(path, guarded([this](const httplib::Request&, httplib::Response& res) {
                         const ServedModel& m = ready_model();
                         res.set_content(dump(model_list(m.id, m.created)), "application/json");
                     }));
        }
        for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
            http.Post(path, guarded([this](const httplib::Request& req, httplib::Response& res) {
                          serve_completion(CompletionKind::kChat, ready_model(), req.body, res,
                                           stopping, track(), &metrics);
                      }));
        }
        for (const char* path : {"/v1/completions", "/completions"}) {
            http.Post(path, guarded([this](const httplib::Request& req, httplib::Response& res) {
                          serve_completion(CompletionKind::kText, ready_model(), req.body, res,
                                           stopping, track(), &metrics);
                      }));
        }
        http.Post("/v1/messages",
                  guarded([this](const httplib::Request& req, httplib::Response& res) {
                      serve_messages(ready_model(), req.body, res, stopping, track(), &metrics);
                  }));
        http.Post("/v1/messages/count_tokens",
                  guarded([this](const httplib::Request& req, httplib::Response& res) {
                      serve_count_tokens(ready_model(), req.body, res);
                  }));
        http.Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) {
                     const ServedModel* m = model.load();
                     std::optional<SchedulerStats> stats;
                     if (m) stats = m->scheduler->stats();
                     res.set_content(metrics.render(stats ? &*stats : nullptr),
                                     kPrometheusContentType);
                 }));
        http.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
                      tokenize(req, res);
                  }));
        http.Post("/detokenize", guarded([this](const httplib::Request& req,
                                                httplib::Response& res) { detokenize(req, res); }));
        http.Get("/props", guarded([this](const httplib::Request&, httplib::Response& res) {
                     props(res);
                 }));
        // llama.cpp's: the prompt text a chat request would get from the chat template.
        http.Post("/apply-template",
                  guarded([this](const httplib::Request& req, httplib::Response& res) {
                      const CompletionRequest r = parse_chat_request(req.body);
                      res.set_content(dump(json{{"prompt", chat_prompt_text(ready_model(), r)}}),
                                      "application/json");
                  }));
    }

    void checks() {
        // The key guards everything but /health, which load balancers probe without one.
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (options.api_key.empty() || req.path == "/health")
                return httplib::Server::HandlerResponse::Unhandled;
            // OpenAI's clients send a bearer token, Anthropic's an x-api-key header.
            if (key_matches(req.get_header_value("Authorization"), "Bearer ", options.api_key) ||
                key_matches(req.get_header_value("x-api-key"), "", options.api_key)) {
                return httplib::Server::HandlerResponse::Unhandled;
            }
            const bool missing = !req.has_header("Authorization") && !req.has_header("x-api-key");
            set_error(res, 401,
                      error_for(req.path, 401,
                                missing ? "missing API key (send 'Authorization: Bearer KEY' or "
                                          "'x-api-key: KEY')"
                                        : "invalid API key",
                                "invalid_api_key"));
            return httplib::Server::HandlerResponse::Handled;
        });
        // Errors httplib raises itself (unknown path, body too large, unparsable request) get
        // OpenAI's shape too; responses our handlers already filled are left alone.
        http.set_error_handler(httplib::Server::HandlerWithResponse(
            [this](const httplib::Request& req, httplib::Response& res) {
                if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
                std::string body;
                if (res.status == 404) {
                    body = error_for(req.path, 404,
                                     "unknown request URL: " + req.method + " " + req.path,
                                     "unknown_url");
                } else if (res.status == 413) {
                    body = error_for(
                        req.path, 413,
                        fmt::format("the request body exceeds {} bytes", options.max_body_bytes),
                        "request_too_large");
                } else {
                    body =
                        error_for(req.path, res.status, fmt::format("HTTP error {}", res.status));
                }
                res.set_content(body, "application/json");
                return httplib::Server::HandlerResponse::Handled;
            }));
        http.set_exception_handler(
            [](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
                set_error(res, 500, error_for(req.path, 500, "internal error"));
            });
        http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
            metrics.count_response(req.path, res.status);
            log_debug("http: {} {} -> {}", req.method, req.path, res.status);
        });
    }
};

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
    Impl& s = *impl_;
    if (s.options.http_threads <= 0)
        fail("http threads {} must be positive", s.options.http_threads);
    const size_t n_threads = static_cast<size_t>(s.options.http_threads);
    s.http.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
    s.http.set_payload_max_length(s.options.max_body_bytes);
    // Tokens go out as soon as they exist: no Nagle delay on small writes.
    s.http.set_tcp_nodelay(true);
    // Clients keep their connection for many requests (the soak test, agents).
    s.http.set_keep_alive_max_count(100000);
    s.routes();
    s.checks();
}

HttpServer::~HttpServer() {
    stop();
}

int HttpServer::bind() {
    Impl& s = *impl_;
    if (s.options.port == 0) {
        s.port = s.http.bind_to_any_port(s.options.host);
    } else {
        s.port = s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
    }
    if (s.port <= 0)
        fail("cannot listen on {}:{} (in use, or not an address of this machine)", s.options.host,
             s.options.port);
    s.http.widen_backlog(kListenBacklog);
    return s.port;
}

void HttpServer::start() {
    // A client that disconnects makes a write fail with EPIPE; the signal would end the process.
    std::signal(SIGPIPE, SIG_IGN);
    Impl& s = *impl_;
    s.thread = std::thread([&s] {
        s.http.listen_after_bind();
        s.listener_ended.store(true);
    });
    // httplib's stop() does nothing until its listener runs: a stop right after this (a model
    // that fails to load at once) left the listener in accept() for good, and serve hanging.
    while (!s.http.is_running() && !s.listener_ended.load()) std::this_thread::yield();
}

void HttpServer::set_model(const ServedModel* model) {
    impl_->model.store(model);
}

void HttpServer::stop() {
    Impl& s = *impl_;
    if (s.stopped) return;
    s.stopped = true;
    // Handlers see the flag within their poll interval and cancel their requests; streams then
    // end with [DONE]. httplib cuts streams off once its listener is closed, so wait for them
    // first (bounded: a client that does not read must not hold up the exit).
    s.stopping.store(true);
    {
        std::unique_lock<std::mutex> lock(s.in_flight_mutex);
        s.in_flight_done.wait_for(lock, std::chrono::seconds(10), [&] { return s.in_flight == 0; });
    }
    s.http.stop();
    if (s.thread.joinable()) s.thread.join();
}

}  // namespace tandem::server
