// A loaded model: its GGUF file (or split parts), its hyperparameters and its bound weights.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf_reader.h"
#include "gguf/model_files.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace tandem {

class Model {
public:
    // Opens (a whole file or the parts of a split model; mapped, read or locked as `options`
    // say), validates and binds; throws Error naming the file and what is wrong.
    static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});

    const GgufFile& file() const { return *file_; }
    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    // "q8_0 attn, q4_K experts, f32 router, ..." — the types in use, for logs.
    std::string describe_types() const;

private:
    std::unique_ptr<GgufFile> file_;
    ModelConfig config_;
    ModelWeights weights_;
};

}  // namespace tandem
