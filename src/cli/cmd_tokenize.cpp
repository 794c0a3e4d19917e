// `tandem tokenize -m MODEL "text"`: prints the token ids of a text (or of --file F).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "cli/commands.h"
#include "gguf/model_files.h"
#include "text/tokenizer.h"

namespace tandem::cli {
namespace {

struct TokenizeOptions {
    std::string model_path;
    std::string text;
    std::string file;
    bool no_special = false;
    bool no_parse_special = false;
    bool pieces = false;
};

void run(const TokenizeOptions& o) {
    std::string text = o.text;
    if (!o.file.empty()) {
        std::ifstream in(o.file, std::ios::binary);
        if (!in) fail("{}: cannot open", o.file);
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    } else if (o.text.empty()) {
        fail("give the text as an argument or with --file");
    }
    auto file = open_gguf_model(o.model_path, metadata_only());
    Tokenizer tokenizer = Tokenizer::from_gguf(*file);
    std::vector<TokenId> ids = tokenizer.encode(text, !o.no_special, !o.no_parse_special);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        line += (i ? " " : "") + std::to_string(ids[i]);
        if (o.pieces) line += ":" + tokenizer.token_to_piece(ids[i]);
    }
    std::printf("%s\n", line.c_str());
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
    cmd->add_option("-m,--model", o->model_path, "GGUF model file (only its vocabulary is read)")->required();
    cmd->add_option("text", o->text, "Text to tokenize");
    cmd->add_option("-f,--file", o->file, "Read the text from a file");
    cmd->add_flag("--no-special", o->no_special, "Do not add BOS/EOS");
    cmd->add_flag("--no-parse-special", o->no_parse_special, "Treat control-token text as plain text");
    cmd->add_flag("--pieces", o->pieces, "Print id:piece pairs");
    cmd->callback([o] { run(*o); });
}

}  // namespace tandem::cli
