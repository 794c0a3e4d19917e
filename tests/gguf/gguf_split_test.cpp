// Split GGUF models: part names as llama.cpp spells them, parts written as gguf-split writes
// them, any part opening the whole model with every tensor read from the part that holds it,
// and one clear refusal for each way a set of parts can be wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_copy.h"
#include "gguf/gguf_split.h"
#include "gguf/model_files.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

using testing::TempDir;

// A small "model": metadata of a few types and `n` f32 tensors of different sizes, tensor i
// filled with the value i + 1 so a view into the wrong part or offset shows.
GgufWriter small_model(int n, const std::string& arch = "llama") {
    GgufWriter w;
    w.set_string("general.architecture", arch);
    w.set<uint32_t>(arch + ".block_count", static_cast<uint32_t>(n));
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
    for (int i = 0; i < n; ++i) {
        const int64_t cols = 8 * (1 + i % 3), rows = 1 + i;
        std::vector<float> values(static_cast<size_t>(cols * rows), static_cast<float>(i + 1));
        std::vector<uint8_t> bytes(values.size() * 4);
        std::memcpy(bytes.data(), values.data(), bytes.size());
        w.add_tensor("t" + std::to_string(i) + ".weight", GgmlType::kF32, {cols, rows}, std::move(bytes));
    }
    return w;
}

std::unique_ptr<GgufFile> open_mapped(const std::string& path) {
    return open_gguf_parts(path, [](const std::string& p) { return FileImage::map(p); });
}

// The error text of opening `path`, or "" when it opens.
std::string open_error(const std::string& path) {
    try {
        open_mapped(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

void expect_same_tensors(const GgufFile& whole, const GgufFile& joined) {
    ASSERT_EQ(whole.tensors().size(), joined.tensors().size());
    for (size_t i = 0; i < whole.tensors().size(); ++i) {
        const GgufTensor& a = whole.tensors()[i];
        const GgufTensor* b = joined.find_tensor(a.name);
        ASSERT_NE(b, nullptr) << a.name;
        EXPECT_EQ(b->name, joined.tensors()[i].name) << "tensors keep the model's order";
        EXPECT_EQ(a.type, b->type);
        EXPECT_EQ(a.ne, b->ne);
        ASSERT_EQ(a.n_bytes, b->n_bytes);
        EXPECT_EQ(std::memcmp(a.data, b->data, a.n_bytes), 0) << a.name;
        const GgufPart& part = joined.parts().at(b->part);
        EXPECT_GE(b->data, part.data) << "a view into the part that holds it";
        EXPECT_LE(b->data + b->n_bytes, part.data + part.size);
    }
}

TEST(GgufSplit, PartNamesAsLlamaCppSpellsThem) {
    EXPECT_EQ(split_part_path("dir/Model-Q4_K_M", 0, 3), "dir/Model-Q4_K_M-00001-of-00003.gguf");
    EXPECT_EQ(split_part_path("m", 99999, 100000), "m-100000-of-100000.gguf");
    std::optional<SplitName> n = parse_split_path("dir/Model-Q4_K_M-00002-of-00003.gguf");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->prefix, "dir/Model-Q4_K_M");
    EXPECT_EQ(n->index, 1);
    EXPECT_EQ(n->count, 3);
    for (const char* other : {"m.gguf", "m-1-of-3.gguf", "m-00004-of-00003.gguf", "m-00000-of-00003.gguf",
                              "-00001-of-00003.gguf", "m-00001-of-00003.bin", "m-000001-of-00003.gguf",
                              "m-0000a-of-00003.gguf", "m-00001-00003.gguf"}) {
        EXPECT_FALSE(parse_split_path(other)) << other;
    }
}

TEST(GgufSplit, PartsAsGgufSplitWritesThem) {
    TempDir dir;
    GgufWriter w = small_model(10);
    const std::vector<std::string> paths = write_gguf_parts(w, dir.file("m.gguf"), {3});
    ASSERT_EQ(paths.size(), 3u);
    EXPECT_FALSE(std::filesystem::exists(dir.file("m.gguf")));
    size_t tensors = 0;
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(paths[i], dir.file("m-0000" + std::to_string(i + 1) + "-of-00003.gguf"));
        auto part = GgufFile::open(paths[i]);
        EXPECT_EQ(part->find(split_keys::kNo)->type, GgufValueType::kU16);
        EXPECT_EQ(part->get<uint16_t>(split_keys::kNo), i);
        EXPECT_EQ(part->get<uint16_t>(split_keys::kCount), 3);
        EXPECT_EQ(part->get<int32_t>(split_keys::kTensorsCount), 10);
        // The metadata lies in the first part only.
        EXPECT_EQ(part->has("general.architecture"), i == 0);
        EXPECT_EQ(part->metadata().size(), i == 0 ? 6u : 3u);
        EXPECT_GE(part->tensors().size(), 1u);
        tensors += part->tensors().size();
    }
    EXPECT_EQ(tensors, 10u);

    // One part: the whole model under its own name.
    GgufWriter w1 = small_model(2);
    EXPECT_EQ(write_gguf_parts(w1, dir.file("one.gguf"), {1}), std::vector<std::string>{dir.file("one.gguf")});
    EXPECT_FALSE(GgufFile::open(dir.file("one.gguf"))->has(split_keys::kCount));

    // Metadata only in the first (gguf-split --no-tensor-first-split).
    GgufWriter w2 = small_model(4);
    const auto empty_first = write_gguf_parts(w2, dir.file("e.gguf"), {3, true});
    EXPECT_EQ(GgufFile::open(empty_first[0])->tensors().size(), 0u);

    // More parts than tensors, and nonsense counts, are refused.
    GgufWriter w3 = small_model(2);
    EXPECT_THROW(write_gguf_parts(w3, dir.file("x.gguf"), {3}), Error);
    EXPECT_THROW(write_gguf_parts(w3, dir.file("x.gguf"), {0}), Error);
    EXPECT_THROW(write_gguf_parts(w3, dir.file("x.gguf"), {1, true}), Error);
    EXPECT_FALSE(std::filesystem::exists(dir.file("x-00001-of-00003.gguf")));
}

TEST(GgufSplit, PartsSpreadByBytes) {
    TempDir dir;
    GgufWriter w;
    // One big tensor then many small ones: the big one gets a part to itself.
    w.add_tensor("big", GgmlType::kF32, {64, 64}, std::vector<uint8_t>(64 * 64 * 4, 1));
    for (int i = 0; i < 8; ++i) w.add_tensor("s" + std::to_string(i), GgmlType::kF32, {8}, std::vector<uint8_t>(32, 2));
    const auto paths = write_gguf_parts(w, dir.file("b.gguf"), {2});
    EXPECT_EQ(GgufFile::open(paths[0])->tensors().size(), 1u);
    EXPECT_EQ(GgufFile::open(paths[1])->tensors().size(), 8u);
}

TEST(GgufSplit, AnyPartOpensTheWholeModel) {
    TempDir dir;
    GgufWriter w = small_model(12);
    w.write(dir.file("whole.gguf"));
    auto whole = GgufFile::open(dir.file("whole.gguf"));
    for (int n : {2, 3, 7}) {
        const auto paths = write_gguf_parts(w, dir.file("m" + std::to_string(n) + ".gguf"), {n});
        for (const std::string& given : paths) {
            SCOPED_TRACE(given);
            auto joined = open_mapped(given);
            EXPECT_EQ(joined->path(), paths[0]) << "metadata from the first part";
            EXPECT_EQ(joined->architecture(), "llama");
            EXPECT_EQ(joined->get_string_array("tokenizer.ggml.tokens").size(), 3u);
            ASSERT_EQ(joined->parts().size(), static_cast<size_t>(n));
            for (int i = 0; i < n; ++i) EXPECT_EQ(joined->parts()[i].path, paths[i]);
            expect_same_tensors(*whole, *joined);
        }
    }
    // A first part with metadata only.
    const auto paths = write_gguf_parts(w, dir.file("e.gguf"), {4, true});
    expect_same_tensors(*whole, *open_mapped(paths[2]));
}

TEST(GgufSplit, NoMmapAndMlockReadTheSameBytes) {
    TempDir dir;
    GgufWriter w = small_model(9);
    w.write(dir.file("whole.gguf"));
    auto whole = GgufFile::open(dir.file("whole.gguf"));
    const auto paths = write_gguf_parts(w, dir.file("m.gguf"), {3});
    for (bool mmap : {true, false}) {
        for (bool mlock : {false, true}) {
            LoadOptions o;
            o.mmap = mmap;
            o.mlock = mlock;
            auto model = open_gguf_model(paths[1], o);
            expect_same_tensors(*whole, *model);
            for (const GgufPart& p : model->parts()) EXPECT_EQ(p.mapped, mmap);
        }
    }
}

TEST(GgufSplit, CopyOfTheJoinedModelIsOneWholeFile) {
    TempDir dir;
    GgufWriter w = small_model(6);
    w.write(dir.file("whole.gguf"));
    const auto paths = write_gguf_parts(w, dir.file("m.gguf"), {3});
    auto joined = open_mapped(paths[0]);
    copy_gguf(*joined).write(dir.file("merged.gguf"));
    auto merged = GgufFile::open(dir.file("merged.gguf"));
    EXPECT_FALSE(merged->has(split_keys::kCount));
    EXPECT_EQ(merged->parts().size(), 1u);
    expect_same_tensors(*GgufFile::open(dir.file("whole.gguf")), *merged);
}

// Rewrites one part file with an edit applied to its keys and tensors.
void edit_part(const std::string& src, const std::string& dst, const GgufEdit& edit) {
    std::vector<uint8_t> bytes;
    {
        auto file = GgufFile::open(src);
        bytes = copy_gguf(*file, edit).to_bytes();
    }
    std::FILE* f = std::fopen(dst.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
}

GgufEdit set_split_key(const char* key, int64_t value) {
    GgufEdit e;
    e.keep_key = [key](std::string_view k) { return k != key; };
    e.add_keys = [key, value](GgufWriter& w) {
        if (std::string_view(key) == split_keys::kTensorsCount) {
            w.set<int32_t>(key, static_cast<int32_t>(value));
        } else {
            w.set<uint16_t>(key, static_cast<uint16_t>(value));
        }
    };
    return e;
}

class GgufSplitRefusal : public ::testing::Test {
protected:
    void SetUp() override {
        GgufWriter w = small_model(9);
        paths_ = write_gguf_parts(w, dir_.file("m.gguf"), {3});
    }
    void expect_refused(const std::string& given, const std::string& fragment) {
        const std::string error = open_error(given);
        EXPECT_NE(error.find(fragment), std::string::npos) << "error: '" << error << "'";
        EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
        LoadOptions o;
        EXPECT_THROW(open_gguf_model(given, o), Error) << "never a partial model";
    }
    TempDir dir_;
    std::vector<std::string> paths_;
};

TEST_F(GgufSplitRefusal, MissingPartNamesTheFileLookedFor) {
    std::filesystem::remove(paths_[2]);
    for (int given : {0, 1}) {
        expect_refused(paths_[given], paths_[2] + ": missing part 3 of 3 of the split model given as " + paths_[given]);
    }
    std::filesystem::remove(paths_[0]);
    expect_refused(paths_[1], paths_[0] + ": missing part 1 of 3");
}

TEST_F(GgufSplitRefusal, PartsOfDifferentCounts) {
    edit_part(paths_[1], paths_[1], set_split_key(split_keys::kCount, 2));
    expect_refused(paths_[0], paths_[1] + ": split.count is 2, but " + paths_[0] + " says 3: parts of different split models");
}

TEST_F(GgufSplitRefusal, PartsOfDifferentModels) {
    // The second part of a model with more tensors, named as this model's second part.
    GgufWriter other = small_model(11);
    TempDir other_dir;
    const auto other_paths = write_gguf_parts(other, other_dir.file("m.gguf"), {3});
    std::filesystem::copy_file(other_paths[1], paths_[1], std::filesystem::copy_options::overwrite_existing);
    expect_refused(paths_[0], paths_[1] + ": split.tensors.count is 11, but " + paths_[0] + " says 9: parts of different models");

    // A later part that names another architecture.
    GgufWriter w = small_model(9);
    write_gguf_parts(w, dir_.file("m.gguf"), {3});
    GgufEdit arch;
    arch.add_keys = [](GgufWriter& out) { out.set_string("general.architecture", "qwen3"); };
    edit_part(paths_[2], paths_[2], arch);
    expect_refused(paths_[0], paths_[2] + ": architecture 'qwen3', but the first part " + paths_[0] +
                                  " is 'llama': parts of different models");
}

TEST_F(GgufSplitRefusal, TensorInTwoParts) {
    // Part 3 also holds part 1's first tensor (the counts otherwise agree).
    auto first = GgufFile::open(paths_[0]);
    const GgufTensor& t = first->tensors().front();
    const std::string name(t.name);
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    GgufEdit e;
    e.add_keys = [](GgufWriter&) {};
    {
        auto part = GgufFile::open(paths_[2]);
        GgufWriter w = copy_gguf(*part, e);
        w.add_tensor(name, t.type, ne, bytes);
        std::vector<uint8_t> out = w.to_bytes();
        part.reset();
        std::FILE* f = std::fopen(paths_[2].c_str(), "wb");
        std::fwrite(out.data(), 1, out.size(), f);
        std::fclose(f);
    }
    expect_refused(paths_[1], paths_[2] + ": tensor '" + name + "' is also in " + paths_[0] + ": a tensor in two parts");
}

TEST_F(GgufSplitRefusal, TensorsCountNotWhatThePartsHold) {
    for (const std::string& p : paths_) edit_part(p, p, set_split_key(split_keys::kTensorsCount, 10));
    expect_refused(paths_[2], paths_[0] + ": split.tensors.count is 10, but the 3 parts hold 9 tensors");
}

TEST_F(GgufSplitRefusal, PartNotOfTheSet) {
    // A whole model named as part 2.
    GgufWriter whole = small_model(3);
    whole.write(paths_[1]);
    expect_refused(paths_[0], paths_[1] + ": not a part of the split model given as " + paths_[0] +
                                  ": it has no split.count key, though its name says part 2 of 3");
    // Part 3 copied over part 2.
    std::filesystem::copy_file(paths_[2], paths_[1], std::filesystem::copy_options::overwrite_existing);
    expect_refused(paths_[0], paths_[1] + ": split.no is 2 (part 3), but its name says part 2: a part of another split model");
}

TEST_F(GgufSplitRefusal, GivenPartWithoutItsName) {
    const std::string renamed = dir_.file("renamed.gguf");
    std::filesystem::copy_file(paths_[1], renamed);
    expect_refused(renamed, renamed + ": part 2 of 3 of a split model (split.no 1), but its name does not end in "
                                      "'-00002-of-00003.gguf', so the other parts cannot be found");
}

TEST_F(GgufSplitRefusal, BrokenSplitKeys) {
    GgufEdit no_count;
    no_count.keep_key = [](std::string_view k) { return k != split_keys::kCount; };
    edit_part(paths_[0], paths_[0], no_count);
    expect_refused(paths_[0], paths_[0] + ": has split.no but no split.count");

    write_gguf_parts(small_model(9), dir_.file("m.gguf"), {3});
    edit_part(paths_[0], paths_[0], set_split_key(split_keys::kNo, 5));
    expect_refused(paths_[0], "split.no' is 5, outside the valid range [0, 2]");

    write_gguf_parts(small_model(9), dir_.file("m.gguf"), {3});
    edit_part(paths_[0], paths_[0], set_split_key(split_keys::kCount, 0));
    expect_refused(paths_[0], "split.count' is 0, outside the valid range [1, 65535]");
}

TEST(GgufJoin, RefusesATensorInTwoParts) {
    GgufWriter a = small_model(2), b = small_model(3);
    std::vector<uint8_t> ab = a.to_bytes(), bb = b.to_bytes();
    std::vector<std::unique_ptr<GgufFile>> parts;
    parts.push_back(GgufFile::parse("a.gguf", ab.data(), ab.size()));
    parts.push_back(GgufFile::parse("b.gguf", bb.data(), bb.size()));
    try {
        GgufFile::join(std::move(parts));
        FAIL() << "joined";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "b.gguf: tensor 't0.weight' is also in a.gguf: a tensor in two parts");
    }
}

}  // namespace
}  // namespace tandem
