// The `tandem` command on bad input of every kind: one line on stderr starting with "error:",
// a non-zero exit, no crash (a crash would show as a signal, not an exit status).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "model/backend.h"
#include "support/model_files.h"
#include "support/oracle.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::run_command;
using testing::shell_quote;
using testing::tandem_binary;
using testing::TempDir;

struct Result {
    int status;
    std::string output;
};

Result tandem(const std::string& args) {
    Result r;
    // stderr only: stdout goes to /dev/null inside the group.
    r.status = run_command("{ " + shell_quote(tandem_binary()) + " " + args + " 2>&1 >/dev/null; }", &r.output);
    return r;
}

// Exit status 1 or 2 (not a signal); the error is exactly one line, the last one ("error: ...";
// start-up log lines may precede it).
void expect_one_line_error(const std::string& args, const std::string& fragment) {
    Result r = tandem(args);
    EXPECT_TRUE(r.status == 1 || r.status == 2) << args << " exited " << r.status << ": " << r.output;
    ASSERT_FALSE(r.output.empty()) << args;
    ASSERT_EQ(r.output.back(), '\n') << args << ": " << r.output;
    const size_t start = r.output.rfind('\n', r.output.size() - 2);
    const std::string last = r.output.substr(start == std::string::npos ? 0 : start + 1);
    EXPECT_EQ(last.rfind("error: ", 0), 0u) << args << ": " << r.output;
    EXPECT_EQ(r.output.find("error: "), start == std::string::npos ? 0 : start + 1) << "one error line only: " << r.output;
    EXPECT_NE(last.find(fragment), std::string::npos) << args << ": " << r.output;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class CliBadInput : public ::testing::Test {
protected:
    void SetUp() override { model_ = testing::write_model(testing::tiny_spec(), dir_.file("tiny.gguf")); }
    TempDir dir_;
    std::string model_;
};

TEST_F(CliBadInput, InspectTruncatedAtEverySection) {
    std::vector<uint8_t> bytes = read_bytes(model_);
    auto file = GgufFile::parse("x", bytes.data(), bytes.size());
    const GgufTensor& first = file->tensors().front();
    // Inside the header, a key, the tensor infos, and the data section.
    for (size_t cut : {size_t{3}, size_t{20}, size_t{40}, static_cast<size_t>(file->data_offset() - 5),
                       static_cast<size_t>(first.offset + 2), bytes.size() - 1}) {
        std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<long>(cut));
        write_bytes(dir_.file("cut.gguf"), part);
        expect_one_line_error("inspect " + shell_quote(dir_.file("cut.gguf")), "cut.gguf");
    }
}

TEST_F(CliBadInput, InspectHostileFields) {
    auto header = [](uint64_t n_tensors, uint64_t n_kv) {
        std::vector<uint8_t> b = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
        for (uint64_t v : {n_tensors, n_kv}) {
            for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
        return b;
    };
    auto append_u64 = [](std::vector<uint8_t>& b, uint64_t v) {
        for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    auto append_u32 = [](std::vector<uint8_t>& b, uint32_t v) {
        for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    const std::string path = dir_.file("hostile.gguf");
    // Counts of 2^60.
    write_bytes(path, header(uint64_t{1} << 60, 0));
    expect_one_line_error("inspect " + path, "tensor count");
    write_bytes(path, header(0, uint64_t{1} << 60));
    expect_one_line_error("inspect " + path, "metadata count");
    // A string length past the end.
    std::vector<uint8_t> b = header(0, 1);
    append_u64(b, 1000);
    b.push_back('k');
    b.resize(b.size() + 40, 0);
    write_bytes(path, b);
    expect_one_line_error("inspect " + path, "runs past the end");
    // A tensor past the end, an unknown type id, a bad alignment.
    auto tensor_file = [&](uint32_t type, uint64_t offset, uint32_t alignment) {
        std::vector<uint8_t> t = header(1, 1);
        append_u64(t, 17);
        for (char c : std::string("general.alignment")) t.push_back(static_cast<uint8_t>(c));
        append_u32(t, 4);
        append_u32(t, alignment);
        append_u64(t, 1);
        t.push_back('w');
        append_u32(t, 1);
        append_u64(t, 8);
        append_u32(t, type);
        append_u64(t, offset);
        while (t.size() % 32) t.push_back(0);
        t.resize(t.size() + 32, 0);
        return t;
    };
    write_bytes(path, tensor_file(0, 0, 32));
    EXPECT_EQ(tandem("inspect " + path).status, 0) << "the well-formed variant must load";
    write_bytes(path, tensor_file(0, 1 << 20, 32));
    expect_one_line_error("inspect " + path, "runs past the end");
    write_bytes(path, tensor_file(99, 0, 32));
    expect_one_line_error("inspect " + path, "unknown ggml type id 99");
    write_bytes(path, tensor_file(0, 0, 24));
    expect_one_line_error("inspect " + path, "not a power of two");
}

TEST_F(CliBadInput, RunRefusesBadRequests) {
    expect_one_line_error("run -m " + model_ + " -p hello -n -3", "-n -3");
    expect_one_line_error("run -m " + model_ + " --tokens 1,2,3 --ctx 2", "context");
    expect_one_line_error("run -m " + model_ + " --tokens 1,x,3", "'x' is not a token id");
    expect_one_line_error("run -m " + model_ + " --tokens 1,99999", "outside the vocabulary");
    expect_one_line_error("run -m " + model_ + " -p hi --kv-type q8", "--kv-type");
    expect_one_line_error("run -m " + model_ + " -p hi --temp -1", "temperature");
    expect_one_line_error("run -m /nonexistent/model.gguf -p hi", "cannot open");
    expect_one_line_error("run -m " + dir_.path() + " -p hi", "not a regular file");
    expect_one_line_error("run -p hi", "model");
    expect_one_line_error("run -m " + model_ + " -p hi --no-such-flag", "no-such-flag");
    expect_one_line_error("no-such-command", "no-such-command");
}

TEST_F(CliBadInput, QuantizeRefusesBadInput) {
    expect_one_line_error("quantize " + shell_quote(dir_.file("missing.gguf")) + " " + shell_quote(dir_.file("o.gguf")),
                          "missing.gguf");
    expect_one_line_error("quantize " + model_ + " " + model_, "is the input");
    expect_one_line_error("quantize " + model_ + " " + shell_quote(dir_.file("o.gguf")) + " --exp-type q9_9",
                          "--exp-type");
    expect_one_line_error("quantize " + model_ + " " + shell_quote(dir_.file("o.gguf")) + " --attn-type iq2_xxs",
                          "attention type iq2_xxs cannot be written");
    write_bytes(dir_.file("cut.gguf"), std::vector<uint8_t>{'G', 'G', 'U', 'F', 3, 0});
    expect_one_line_error("quantize " + shell_quote(dir_.file("cut.gguf")) + " " + shell_quote(dir_.file("o.gguf")),
                          "cut.gguf");
}

TEST_F(CliBadInput, ServeRefusesBadOptions) {
    expect_one_line_error("serve -m " + model_ + " --port 0 --cache-reuse maybe", "--cache-reuse 'maybe'");
    expect_one_line_error("serve -m " + model_ + " --port 0 --parallel 0", "--parallel 0");
    expect_one_line_error("serve -m " + model_ + " --port 0 --cache-mem lots",
                          "--cache-mem 'lots'");
    expect_one_line_error("serve -m " + model_ + " --port 0 --cache-mem -5", "--cache-mem '-5'");
}

TEST_F(CliBadInput, DevicesAndGpuMemory) {
    expect_one_line_error("run -m " + model_ + " -p hi --device tpu", "--device: 'tpu' is not auto, cpu or cuda");
    expect_one_line_error("run -m " + model_ + " -p hi --gpu-mem -1", "--gpu-mem -1 must be >= 0");
    expect_one_line_error("bench kernels --device tpu --types q4_0", "--device: 'tpu' is not cpu or cuda");
    std::string why;
    if (!gpu_available(&why)) {
        // A build without a GPU to use: auto says so in one line and runs on the CPU; an explicit
        // cuda is refused, naming the reason.
        expect_one_line_error("run -m " + model_ + " -p hi -n 1 --device cuda", "--device cuda: " + why);
        expect_one_line_error("bench kernels --device cuda --types q4_0", "--device cuda: " + why);
        const Result r = tandem("run -m " + model_ + " -p hi -n 1");
        EXPECT_EQ(r.status, 0) << r.output;
        EXPECT_NE(r.output.find("backend: cpu (" + why + ")"), std::string::npos) << r.output;
    } else {
        expect_one_line_error("run -m " + model_ + " -p hi -n 1 --device cuda --gpu-mem 0.0001",
                              "GiB for the model's dense part");
    }
    expect_one_line_error("run -m " + model_ + " -p hi --moe-strategy gpu",
                          "--moe-strategy: 'gpu' is not auto, fused, cpu, offload or hybrid");
    expect_one_line_error("run -m " + model_ + " -p hi --moe-hybrid-max-fetch -4",
                          "--moe-hybrid-max-fetch -4 must be >= 0");
    expect_one_line_error("perplexity -m " + model_ + " -f /nonexistent/text.txt",
                          "/nonexistent/text.txt: cannot open");
    expect_one_line_error("perplexity -m " + model_ + " -f /dev/null --ctx 64",
                          "the text has 0 tokens, fewer than one window of --ctx 64");
    expect_one_line_error("perplexity -m " + model_ + " -f /dev/null --kl-divergence",
                          "--kl-divergence needs --kl-divergence-base FILE");
    expect_one_line_error("run -m " + model_ + " -p hi --moe-slots -3",
                          "--moe-slots -3 must be >= 0");
    expect_one_line_error("run -m " + model_ + " -p hi --device cpu --moe-slots 4",
                          "place experts beside a GPU: not with --device cpu");
    expect_one_line_error("run -m " + model_ + " -p hi --moe-cpu-layers -2",
                          "--moe-cpu-layers: '-2' is not auto or a layer count");
    expect_one_line_error("run -m " + model_ + " -p hi --moe-cpu-layers 2x",
                          "--moe-cpu-layers: '2x' is not auto or a layer count");
    expect_one_line_error("run -m " + model_ + " -p hi --device cpu --moe-strategy cpu",
                          "not with --device cpu");
    if (!gpu_available(&why)) {
        expect_one_line_error("run -m " + model_ + " -p hi --moe-strategy fused",
                              "--moe-strategy fused: needs a GPU (" + why + ")");
    }
}

TEST_F(CliBadInput, BenchAndSynthRefuseBadNumbers) {
    expect_one_line_error("bench kernels --no-ggml --types q4_0 -K 0", "--cols: 0 is not positive");
    expect_one_line_error("bench kernels --no-ggml --types q4_0 -K -256", "-256 is not positive");
    expect_one_line_error("bench kernels --no-ggml --types q4_0 -K 100", "not a multiple");
    expect_one_line_error("bench kernels --no-ggml --types q4_0 --mib -5", "--mib: -5 is negative");
    expect_one_line_error("bench kernels --no-ggml --types q4_0 --cache-kib x", "'x' is not a number");
    expect_one_line_error("bench kernels --no-ggml --types q4_0 --seconds -1", "-1 is negative");
    expect_one_line_error("bench kernels --no-ggml --types q4_0 --threads -2", "--threads: -2");
    expect_one_line_error("bench kernels --no-ggml --types q9_9", "q9_9");
    expect_one_line_error("bench moe --no-ggml --threads -1", "--threads: -1 is negative");
    expect_one_line_error("synth -o " + dir_.file("x.gguf") + " --threads -1", "-1 is negative");
}

TEST_F(CliBadInput, RunRefusesBrokenModels) {
    GgufEdit drop_tensor;
    drop_tensor.keep_tensor = [](const GgufTensor& t) { return t.name != "output_norm.weight"; };
    testing::edit_model(model_, dir_.file("no-tensor.gguf"), drop_tensor);
    expect_one_line_error("run -m " + dir_.file("no-tensor.gguf") + " -p hi", "missing tensor 'output_norm.weight'");

    GgufEdit drop_key;
    drop_key.keep_key = [](std::string_view k) { return k != "qwen3moe.embedding_length"; };
    testing::edit_model(model_, dir_.file("no-key.gguf"), drop_key);
    expect_one_line_error("run -m " + dir_.file("no-key.gguf") + " -p hi", "qwen3moe.embedding_length");

    GgufEdit arch;
    arch.keep_key = [](std::string_view k) { return k != "general.architecture"; };
    arch.add_keys = [](GgufWriter& w) { w.set_string("general.architecture", "rwkv99"); };
    testing::edit_model(model_, dir_.file("arch.gguf"), arch);
    expect_one_line_error("run -m " + dir_.file("arch.gguf") + " -p hi", "unknown architecture 'rwkv99'");
}

TEST_F(CliBadInput, RunAndLogitsWork) {
    Result r;
    r.status = run_command(shell_quote(tandem_binary()) + " run -m " + model_ + " -p 'Hello world' -n 8 --temp 0 --ids",
                           &r.output);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("generated"), std::string::npos) << r.output;
    r.status = run_command(shell_quote(tandem_binary()) + " logits -m " + model_ + " --tokens 1,2,3 -o " +
                               dir_.file("l.f32"),
                           &r.output);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(read_bytes(dir_.file("l.f32")).size(), 3u * 300 * 4);
}

}  // namespace
}  // namespace tandem
