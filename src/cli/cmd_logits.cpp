// `tandem logits`: evaluates the given tokens teacher-forced in one batch and writes the float32
// logits of every position, row-major [n_tokens × n_vocab], little-endian (with OUT.json
// giving n_vocab and the tokens, the layout the oracle kit's compare_logits.py reads).
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/session.h"

namespace tandem::cli {
namespace {

struct LogitsOptions {
    ModelOptions model;
    std::string tokens;
    std::string out;
};

void write_file(const std::string& path, const void* data, size_t bytes) {
    std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) fail("{}: cannot create", tmp);
    bool ok = std::fwrite(data, 1, bytes, f) == bytes;
    ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        fail("{}: write failed", path);
    }
}

void run(LogitsOptions o) {
    std::vector<int32_t> tokens = parse_token_list(o.tokens, "--tokens");
    // One batch for the whole sequence unless --batch asks for less.
    if (o.model.batch == 512) o.model.batch = static_cast<int>(tokens.size());
    if (o.model.ctx == 0) o.model.ctx = static_cast<int>(tokens.size());
    parse_kv_type(o.model.kv_type);
    LoadedModel m = load_model(o.model);
    const int n_vocab = m.model->config().n_vocab;
    for (int32_t id : tokens) {
        if (id >= n_vocab) fail("--tokens: id {} is outside the vocabulary (0..{})", id, n_vocab - 1);
    }
    if (static_cast<int>(tokens.size()) > m.session.n_ctx) {
        fail("{} tokens exceed the context of {} (raise --ctx)", tokens.size(), m.session.n_ctx);
    }
    Session session(*m.model, *m.pool, m.session);
    std::span<const float> logits = session.feed_all(tokens);
    write_file(o.out, logits.data(), logits.size() * sizeof(float));
    nlohmann::json meta = {{"n_vocab", n_vocab}, {"tokens", tokens}, {"rows", tokens.size()}};
    std::string text = meta.dump();
    write_file(o.out + ".json", text.data(), text.size());
    std::fprintf(stderr, "logits: wrote %zu rows x %d to %s\n", tokens.size(), n_vocab, o.out.c_str());
}

}  // namespace

void add_logits_command(CLI::App& app) {
    auto o = std::make_shared<LogitsOptions>();
    CLI::App* cmd = app.add_subcommand("logits", "Write teacher-forced logits of every position");
    add_model_options(cmd, o->model);
    cmd->add_option("--tokens", o->tokens, "Comma-separated token ids")->required();
    cmd->add_option("-o,--out", o->out, "Output file (float32, n_tokens x n_vocab)")->required();
    cmd->callback([o] { run(*o); });
}

}  // namespace tandem::cli
