// Small model files for tests.
#include "support/model_files.h"

#include "gguf/gguf_reader.h"

namespace tandem::testing {

SynthSpec tiny_spec(const std::string& arch) {
    SynthSpec s;
    s.arch = arch;
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 128;
    s.head_dim = 16;
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 32;
    s.n_vocab = 300;
    s.n_ctx = 256;
    s.threads = 1;
    return s;
}

std::string write_model(const SynthSpec& spec, const std::string& path) {
    write_synthetic_model(spec, path);
    return path;
}

void edit_model(const std::string& src, const std::string& dst, const GgufEdit& edit) {
    auto file = GgufFile::open(src);
    copy_gguf(*file, edit).write(dst);
}

}  // namespace tandem::testing
