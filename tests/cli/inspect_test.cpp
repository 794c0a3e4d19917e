// `tandem inspect` describes models made by the oracle kit and by `tandem synth`: architecture,
// hyperparameters, tokenizer, every key, the tensor table and the expert layout, as text and JSON.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/model_files.h"
#include "support/oracle.h"
#include "support/oracle_runs.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::run_command;
using testing::shell_quote;
using testing::tandem_binary;

nlohmann::json inspect_json(const std::string& path) {
    std::string out;
    EXPECT_EQ(run_command(shell_quote(tandem_binary()) + " inspect --json " + shell_quote(path) + " 2>/dev/null", &out), 0)
        << out;
    return nlohmann::json::parse(out);
}

TEST(Inspect, DescribesKitModels) {
    TANDEM_REQUIRE_ORACLE();
    for (const char* arch : {"qwen3moe", "qwen3", "llama", "gpt-oss"}) {
        const std::string path = testing::oracle_model(std::string("--arch ") + arch + " --wtype q8_0 --exp-type mxfp4");
        std::ifstream sidecar_file(path + ".json");
        const nlohmann::json sidecar = nlohmann::json::parse(sidecar_file);
        const nlohmann::json j = inspect_json(path);
        EXPECT_EQ(j["architecture"], sidecar["arch"]) << arch;
        ASSERT_EQ(j["tensors"].size(), sidecar["tensors"].size()) << arch;
        for (size_t i = 0; i < j["tensors"].size(); ++i) {
            EXPECT_EQ(j["tensors"][i]["name"], sidecar["tensors"][i]["name"]);
            EXPECT_EQ(j["tensors"][i]["type"], sidecar["tensors"][i]["type"]);
            EXPECT_EQ(j["tensors"][i]["shape"], sidecar["tensors"][i]["ne"]);
            EXPECT_EQ(j["tensors"][i]["bytes"], sidecar["tensors"][i]["nbytes"]);
        }
        const std::string a = sidecar["arch"];
        EXPECT_EQ(j["metadata"][a + ".block_count"], sidecar["hparams"]["block_count"]);
        EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["count"], sidecar["vocab"]["n_vocab"]);
        if (sidecar["hparams"].contains("expert_count")) {
            EXPECT_EQ(j["moe"]["expert_count"], sidecar["hparams"]["expert_count"]) << arch;
            EXPECT_EQ(j["moe"]["layers"].size(), j["metadata"][a + ".block_count"].get<size_t>()) << arch;
        } else {
            EXPECT_FALSE(j.contains("moe")) << arch;
        }
    }
}

TEST(Inspect, TextShowsEverySection) {
    testing::TempDir dir;
    SynthSpec s = testing::tiny_spec("qwen3moe");
    s.exp_down_type = GgmlType::kQ8_0;
    const std::string path = testing::write_model(s, dir.file("m.gguf"));
    std::string out;
    ASSERT_EQ(run_command(shell_quote(tandem_binary()) + " inspect " + shell_quote(path) + " 2>/dev/null", &out), 0);
    for (const char* part : {"architecture: qwen3moe", "hyperparameters:", "expert_count", "tokenizer: \"gpt2\"",
                             "metadata (", "tokenizer.ggml.tokens", "... 300 items", "tensors (",
                             "blk.1.ffn_down_exps.weight", "totals per type:", "experts: 4 per layer, 2 used",
                             "down=q8_0"}) {
        EXPECT_NE(out.find(part), std::string::npos) << part << "\n" << out;
    }
}

}  // namespace
}  // namespace tandem
