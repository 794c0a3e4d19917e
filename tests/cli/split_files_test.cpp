// The `tandem` command on models as they are published: `synth --split` writes parts that every
// command loads from any part (inspect shows the whole model and its parts; run, logits and
// tokenize agree with the whole file); --no-mmap and --mlock give the same logits and say which
// is in effect; a failed mlock says how to raise the limit; a model larger than the available
// memory runs with one warning; a broken set of parts is one error line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/model_files.h"
#include "support/oracle.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

// Under AddressSanitizer the tandem binary's mlock is the sanitizer's no-op (it reports success
// and locks nothing), and its runtime alone takes more memory than a small cgroup allows.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

using testing::run_command;
using testing::shell_quote;
using testing::tandem_binary;

struct Result {
    int status;
    std::string out;  // stdout
    std::string err;  // stderr
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class SplitFiles : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new testing::TempDir();
        const std::string synth = shell_quote(tandem_binary()) +
                                  " synth --layers 2 --embd 64 --heads 4 --kv-heads 2 --head-dim 16 --experts 4"
                                  " --experts-used 2 --expert-ffn 32 --vocab 300 --ctx 256 --seed 5 --threads 1";
        std::string out;
        ASSERT_EQ(run_command(synth + " -o " + shell_quote(dir_->file("whole.gguf")), &out), 0) << out;
        ASSERT_EQ(run_command(synth + " --split 3 -o " + shell_quote(dir_->file("m.gguf")), &out), 0) << out;
        for (int i = 1; i <= 3; ++i) parts_.push_back(dir_->file("m-0000" + std::to_string(i) + "-of-00003.gguf"));
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
        parts_.clear();
    }

    // Runs `tandem ARGS` with an optional prefix (environment, a wrapper), keeping stdout and
    // stderr apart.
    static Result tandem(const std::string& args, const std::string& prefix = "") {
        testing::TempDir io;
        Result r;
        r.status = run_command("(" + prefix + " " + shell_quote(tandem_binary()) + " " + args + " > " +
                               shell_quote(io.file("out")) + " 2> " + shell_quote(io.file("err")) + ")");
        r.out = read_file(io.file("out"));
        r.err = read_file(io.file("err"));
        return r;
    }
    // `tandem logits` of a fixed token list; returns the logits file's bytes.
    static std::string logits(const std::string& model, const std::string& flags = "", const std::string& prefix = "",
                              Result* result = nullptr) {
        testing::TempDir io;
        const std::string out = io.file("l.f32");
        Result r = tandem("logits -m " + shell_quote(model) + " --tokens 1,20,299,4,5 --threads 2 -o " + shell_quote(out) +
                              " " + flags,
                          prefix);
        EXPECT_EQ(r.status, 0) << r.err;
        if (result != nullptr) *result = r;
        std::string bytes = read_file(out);
        EXPECT_EQ(bytes.size(), 5u * 300 * 4);
        return bytes;
    }
    // The last stderr line is the only error line and holds `fragment`.
    static void expect_one_line_error(const Result& r, const std::string& fragment) {
        EXPECT_TRUE(r.status == 1 || r.status == 2) << r.err;
        ASSERT_FALSE(r.err.empty());
        const size_t start = r.err.rfind('\n', r.err.size() - 2);
        const std::string last = r.err.substr(start == std::string::npos ? 0 : start + 1);
        EXPECT_EQ(last.rfind("error: ", 0), 0u) << r.err;
        EXPECT_EQ(r.err.find("error: "), start == std::string::npos ? 0 : start + 1) << r.err;
        EXPECT_NE(last.find(fragment), std::string::npos) << "wanted: " << fragment << "\n" << r.err;
    }

    static testing::TempDir* dir_;
    static std::vector<std::string> parts_;
};
testing::TempDir* SplitFiles::dir_ = nullptr;
std::vector<std::string> SplitFiles::parts_;

TEST_F(SplitFiles, SynthWritesThePartsAndInspectShowsTheWholeModel) {
    for (const std::string& p : parts_) EXPECT_TRUE(std::filesystem::exists(p)) << p;
    EXPECT_FALSE(std::filesystem::exists(dir_->file("m.gguf")));
    const Result whole = tandem("inspect --json " + shell_quote(dir_->file("whole.gguf")));
    ASSERT_EQ(whole.status, 0) << whole.err;
    const nlohmann::json w = nlohmann::json::parse(whole.out);
    for (const std::string& given : parts_) {
        const Result r = tandem("inspect --json " + shell_quote(given));
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.err, "") << "inspect logs nothing";
        const nlohmann::json j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j["parts"].size(), 3u);
        size_t held = 0;
        for (size_t i = 0; i < 3; ++i) {
            EXPECT_EQ(j["parts"][i]["path"], parts_[i]);
            held += j["parts"][i]["tensors"].get<size_t>();
        }
        EXPECT_EQ(held, w["tensors"].size());
        ASSERT_EQ(j["tensors"].size(), w["tensors"].size());
        for (size_t i = 0; i < j["tensors"].size(); ++i) {
            EXPECT_EQ(j["tensors"][i]["name"], w["tensors"][i]["name"]);
            EXPECT_EQ(j["tensors"][i]["bytes"], w["tensors"][i]["bytes"]);
        }
        EXPECT_EQ(j["tensors"].back()["part"], 2);
        EXPECT_EQ(j["moe"], w["moe"]);
        EXPECT_EQ(j["architecture"], "qwen3moe");
    }
    const Result text = tandem("inspect " + shell_quote(parts_[2]));
    for (const std::string& line : std::vector<std::string>{"split into 3 parts", "  part 1: " + parts_[0],
                                                            "  part 3: " + parts_[2], "architecture: qwen3moe",
                                                            "experts: 4 per layer"}) {
        EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
    }
}

TEST_F(SplitFiles, EveryCommandGivesTheWholeModelsResults) {
    const std::string ref = logits(dir_->file("whole.gguf"));
    for (const std::string& given : parts_) {
        Result r;
        EXPECT_EQ(logits(given, "", "", &r), ref) << given;
        EXPECT_NE(r.err.find("from 3 parts in"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("weights: mmap (paged in)"), std::string::npos) << r.err;
    }
    const std::string gen = " -p 'Hello world' -n 6 --temp 0 --ids --threads 2";
    const Result run_whole = tandem("run -m " + shell_quote(dir_->file("whole.gguf")) + gen);
    const Result run_split = tandem("run -m " + shell_quote(parts_[1]) + gen);
    ASSERT_EQ(run_split.status, 0) << run_split.err;
    EXPECT_EQ(run_split.out, run_whole.out);
    EXPECT_NE(run_split.err.find("from 3 parts in"), std::string::npos) << run_split.err;
    const Result tok_whole = tandem("tokenize -m " + shell_quote(dir_->file("whole.gguf")) + " 'Hello world'");
    const Result tok_split = tandem("tokenize -m " + shell_quote(parts_[2]) + " 'Hello world'");
    ASSERT_EQ(tok_split.status, 0) << tok_split.err;
    EXPECT_EQ(tok_split.out, tok_whole.out);
}

TEST_F(SplitFiles, NoMmapAndMlockGiveTheSameLogitsAndSaySo) {
    const std::string ref = logits(dir_->file("whole.gguf"));
    struct Mode {
        std::string flags, log;
    };
    for (const Mode& m : {Mode{"--no-mmap", "weights: no-mmap (read into memory"},
                          Mode{"--mlock", "weights: mmap, mlock (locked in RAM)"},
                          Mode{"--no-mmap --mlock", "mlock (locked in RAM)"}}) {
        for (const std::string& model : {dir_->file("whole.gguf"), parts_[0]}) {
            Result r;
            EXPECT_EQ(logits(model, m.flags, "", &r), ref) << m.flags;
            EXPECT_NE(r.err.find(m.log), std::string::npos) << m.flags << "\n" << r.err;
            EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
        }
    }
}

TEST_F(SplitFiles, FailedMlockSaysHowToRaiseTheLimit) {
    if (kSanitized) GTEST_SKIP() << "AddressSanitizer's mlock locks nothing and never fails";
    // Without CAP_IPC_LOCK (root has it: drop it from the bounding set) and with a 64 KiB limit.
    std::string prefix = "prlimit --memlock=65536:65536";
    if (::geteuid() == 0) prefix = "setpriv --bounding-set -ipc_lock " + prefix;
    std::string probe;
    if (run_command(prefix + " true", &probe) != 0) GTEST_SKIP() << "cannot lower the memory-lock limit: " << probe;
    const std::string ref = logits(parts_[0]);
    Result r;
    EXPECT_EQ(logits(parts_[0], "--mlock", prefix, &r), ref);
    EXPECT_NE(r.err.find("warning: --mlock: cannot lock"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the memory-lock limit (RLIMIT_MEMLOCK) is 64.00 KiB"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ulimit -l unlimited"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("mlock failed (not locked)"), std::string::npos) << r.err;
}

TEST_F(SplitFiles, LargerThanAvailableMemory) {
    const std::string ref = logits(parts_[0]);
    const std::string small = "TANDEM_MEMORY_AVAILABLE=100K";
    Result r;
    EXPECT_EQ(logits(parts_[1], "", small, &r), ref);
    EXPECT_NE(r.err.find("is larger than the available memory (100.00 KiB, TANDEM_MEMORY_AVAILABLE)"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("weights: mmap (larger than memory: read from disk as used)"), std::string::npos) << r.err;
    EXPECT_EQ(logits(parts_[1], "--mlock", small, &r), ref);
    EXPECT_NE(r.err.find("not locked (--mlock ignored)"), std::string::npos) << r.err;
    expect_one_line_error(tandem("logits -m " + shell_quote(parts_[1]) + " --tokens 1 -o /dev/null --no-mmap", small),
                          "--no-mmap reads the model (");
}

// A memory cgroup of this process's own, limited to `limit`; removed when destroyed. `ok` is
// false where no memory cgroup can be made (not root, a read-only or v2-delegated hierarchy).
struct MemoryCgroup {
    explicit MemoryCgroup(const std::string& limit) {
        std::ifstream in("/proc/self/cgroup");
        std::string line;
        while (std::getline(in, line)) {
            const size_t a = line.find(':'), b = line.find(':', a + 1);
            if (a == std::string::npos || b == std::string::npos) continue;
            const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
            std::string root, file;
            if (controllers.find(",memory,") != std::string::npos) {
                root = "/sys/fs/cgroup/memory";
                file = "memory.limit_in_bytes";
            } else if (line.compare(0, b + 1, "0::") == 0) {
                root = "/sys/fs/cgroup";
                file = "memory.max";
            } else {
                continue;
            }
            std::string parent = root + line.substr(b + 1);
            if (!std::filesystem::is_directory(parent)) parent = root;
            dir = parent + "/tandem-test-" + std::to_string(::getpid());
            std::error_code ec;
            if (!std::filesystem::create_directory(dir, ec)) return;
            std::ofstream(dir + "/" + file) << limit;
            ok = read_file(dir + "/" + file).find_first_of("0123456789") == 0;
            return;
        }
    }
    ~MemoryCgroup() {
        if (!dir.empty()) ::rmdir(dir.c_str());
    }
    // A shell prefix running a command inside the cgroup.
    std::string prefix() const { return "sh -c 'echo $$ > " + dir + "/cgroup.procs && exec \"$0\" \"$@\"'"; }
    std::string dir;
    bool ok = false;
};

// The real thing: a model of ~200 MiB run in a memory cgroup of 96 MiB. The limit is detected,
// the model runs from the mapping with its pages reclaimed as it goes, and nothing changes.
TEST_F(SplitFiles, RunsInAMemoryCgroupSmallerThanTheModel) {
    if (kSanitized) GTEST_SKIP() << "the AddressSanitizer runtime alone outgrows a 96 MiB cgroup";
    testing::TempDir dir;
    std::string out;
    ASSERT_EQ(run_command(shell_quote(tandem_binary()) +
                              " synth --fast-random --wtype q8_0 --layers 4 --embd 1024 --heads 8 --kv-heads 2"
                              " --head-dim 128 --experts 32 --experts-used 4 --expert-ffn 512 --vocab 300 --ctx 256"
                              " --split 2 -o " + shell_quote(dir.file("big.gguf")),
                          &out),
              0)
        << out;
    const std::string model = dir.file("big-00002-of-00002.gguf");
    ASSERT_GT(std::filesystem::file_size(model), uint64_t{90} << 20);
    MemoryCgroup cgroup("100663296");  // 96 MiB
    if (!cgroup.ok) GTEST_SKIP() << "cannot make a memory cgroup here";
    const std::string ref = logits(model);
    Result r;
    EXPECT_EQ(logits(model, "--mlock", cgroup.prefix(), &r), ref);
    EXPECT_NE(r.err.find("is larger than the available memory"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("memory cgroup limit"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not locked (--mlock ignored)"), std::string::npos) << r.err;
    expect_one_line_error(tandem("logits -m " + shell_quote(model) + " --tokens 1 -o /dev/null --no-mmap", cgroup.prefix()),
                          "--no-mmap reads the model (");
}

TEST_F(SplitFiles, BrokenSetsAreOneErrorLine) {
    testing::TempDir dir;
    const std::string p1 = dir.file("b-00001-of-00003.gguf"), p2 = dir.file("b-00002-of-00003.gguf"),
                      p3 = dir.file("b-00003-of-00003.gguf");
    std::filesystem::copy_file(parts_[0], p1);
    std::filesystem::copy_file(parts_[1], p2);
    for (const char* command : {"run -p hi -m", "logits --tokens 1 -o /dev/null -m", "inspect", "tokenize hi -m"}) {
        expect_one_line_error(tandem(std::string(command) + " " + shell_quote(p2)),
                              p3 + ": missing part 3 of 3 of the split model given as " + p2);
    }
    // Part 3 in place of part 3 of another model: here the whole model renamed.
    std::filesystem::copy_file(dir_->file("whole.gguf"), p3);
    expect_one_line_error(tandem("run -p hi -m " + shell_quote(p1)), p3 + ": not a part of the split model");
    // A part given under another name.
    std::filesystem::copy_file(parts_[1], dir.file("renamed.gguf"));
    expect_one_line_error(tandem("inspect " + shell_quote(dir.file("renamed.gguf"))), "so the other parts cannot be found");
    // More parts than tensors.
    expect_one_line_error(tandem("synth --layers 1 --split 50 -o " + shell_quote(dir.file("s.gguf"))),
                          "into 50 parts that each hold one or more");
}

TEST_F(SplitFiles, MetadataOnlyFirstPart) {
    testing::TempDir dir;
    std::string out;
    ASSERT_EQ(run_command(shell_quote(tandem_binary()) +
                              " synth --layers 2 --embd 64 --heads 4 --kv-heads 2 --head-dim 16 --experts 4"
                              " --experts-used 2 --expert-ffn 32 --vocab 300 --ctx 256 --seed 5 --threads 1"
                              " --split 4 --split-metadata-first -o " +
                              shell_quote(dir.file("e.gguf")),
                          &out),
              0)
        << out;
    const Result r = tandem("inspect " + shell_quote(dir.file("e-00001-of-00004.gguf")));
    EXPECT_NE(r.out.find("part 1: " + dir.file("e-00001-of-00004.gguf") + " ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(", 0 tensors)"), std::string::npos) << r.out;
    EXPECT_EQ(logits(dir.file("e-00003-of-00004.gguf")), logits(dir_->file("whole.gguf")));
}

}  // namespace
}  // namespace tandem
