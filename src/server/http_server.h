// The HTTP server: OpenAI's /v1/chat/completions, /v1/completions, /v1/models; Anthropic's
// /v1/messages and /v1/messages/count_tokens; /health, /metrics (Prometheus), /tokenize,
// /detokenize. It listens before the model is loaded (answering 503 until set_model), checks the
// API key (a bearer token or x-api-key), caps request bodies, and answers every error in the
// shape of the API asked (Anthropic's on its paths, OpenAI's elsewhere).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "server/served_model.h"

namespace tandem::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;      // 0: any free port
    std::string api_key;  // empty: no authentication
    size_t max_body_bytes = 8u << 20;
    // Connections served at once. Each streaming or waiting request holds one, so this should
    // cover the slots plus the queue, with room for /health and the like.
    int http_threads = 16;
};

class HttpServer {
  public:
    explicit HttpServer(ServerOptions options);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds the listening socket; returns the port (the chosen one for port 0). Throws Error.
    int bind();
    // Serves on a background thread.
    void start();
    // From now on requests go to `model`, which must outlive the server (or stop()).
    void set_model(const ServedModel* model);
    // Answers 503 to new requests, cancels those in flight, closes the listener and waits for
    // the connections' threads. Idempotent.
    void stop();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::server
