// The GGUF writer and reader agree: every metadata type, arrays, tensors and alignment.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "base/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/temp_dir.h"

namespace tandem {
namespace {

std::unique_ptr<GgufFile> parse(const std::vector<uint8_t>& bytes) {
    return GgufFile::parse("test.gguf", bytes.data(), bytes.size());
}

TEST(GgufRoundTrip, EveryScalarType) {
    GgufWriter w;
    w.set<uint8_t>("u8", 200);
    w.set<int8_t>("i8", -100);
    w.set<uint16_t>("u16", 60000);
    w.set<int16_t>("i16", -30000);
    w.set<uint32_t>("u32", 4000000000u);
    w.set<int32_t>("i32", -2000000000);
    w.set<uint64_t>("u64", 18000000000000000000ull);
    w.set<int64_t>("i64", -9000000000000000000ll);
    w.set<float>("f32", 3.25f);
    w.set<double>("f64", -1.0e300);
    w.set<bool>("bool", true);
    w.set_string("string", "héllo\nworld");
    std::vector<uint8_t> bytes = w.to_bytes();
    auto f = parse(bytes);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->get<uint8_t>("u8"), 200);
    EXPECT_EQ(f->get<int8_t>("i8"), -100);
    EXPECT_EQ(f->get<uint16_t>("u16"), 60000);
    EXPECT_EQ(f->get<int16_t>("i16"), -30000);
    EXPECT_EQ(f->get<uint32_t>("u32"), 4000000000u);
    EXPECT_EQ(f->get<int32_t>("i32"), -2000000000);
    EXPECT_EQ(f->get<uint64_t>("u64"), 18000000000000000000ull);
    EXPECT_EQ(f->get<int64_t>("i64"), -9000000000000000000ll);
    EXPECT_EQ(f->get<float>("f32"), 3.25f);
    EXPECT_EQ(f->get<double>("f64"), -1.0e300);
    EXPECT_EQ(f->get<bool>("bool"), true);
    EXPECT_EQ(f->get<std::string_view>("string"), "héllo\nworld");
    EXPECT_EQ(f->metadata().size(), 12u);
    // Flexible integer access.
    EXPECT_EQ(f->get_int("u16"), 60000);
    EXPECT_EQ(f->get_int("i8"), -100);
    EXPECT_DOUBLE_EQ(f->get_float("f32"), 3.25);
}

TEST(GgufRoundTrip, Arrays) {
    GgufWriter w;
    std::vector<int32_t> ints = {1, -2, 3, 400000};
    std::vector<float> floats = {0.5f, -1.5f};
    std::vector<uint64_t> empty;
    w.set_array<int32_t>("ints", ints);
    w.set_array<float>("floats", floats);
    w.set_array<uint64_t>("empty", empty);
    w.set_array("bools", std::vector<bool>{true, false, true});
    w.set_string_array("strings", {"a", "", "ccc"});
    auto bytes = w.to_bytes();
    auto f = parse(bytes);
    EXPECT_EQ(f->get_array<int32_t>("ints"), ints);
    EXPECT_EQ(f->get_array<float>("floats"), floats);
    EXPECT_TRUE(f->get_array<uint64_t>("empty").empty());
    EXPECT_EQ(f->get_int_array("bools"), (std::vector<int64_t>{1, 0, 1}));
    auto strings = f->get_string_array("strings");
    ASSERT_EQ(strings.size(), 3u);
    EXPECT_EQ(strings[0], "a");
    EXPECT_EQ(strings[1], "");
    EXPECT_EQ(strings[2], "ccc");
    EXPECT_EQ(f->get_int_array("ints"), (std::vector<int64_t>{1, -2, 3, 400000}));
    EXPECT_EQ(f->get_float_array("floats"), (std::vector<double>{0.5, -1.5}));
}

TEST(GgufRoundTrip, TypedAccessErrors) {
    GgufWriter w;
    w.set<uint32_t>("qwen3moe.block_count", 48);
    w.set<int32_t>("negative", -1);
    auto bytes = w.to_bytes();
    auto f = parse(bytes);
    EXPECT_EQ(f->get<uint32_t>("qwen3moe.block_count"), 48u);
    try {
        f->get<uint32_t>("qwen3moe.expert_count");
        FAIL() << "missing key accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("missing metadata key 'qwen3moe.expert_count'"), std::string::npos);
    }
    try {
        f->get<int32_t>("qwen3moe.block_count");
        FAIL() << "wrong type accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("has type u32, expected i32"), std::string::npos) << e.what();
    }
    EXPECT_THROW(f->get_int("negative", 0, 100), Error);
    EXPECT_THROW(f->get_array<int32_t>("negative"), Error);
    EXPECT_THROW(f->get_float("negative"), Error);
}

TEST(GgufRoundTrip, TensorsAndAlignment) {
    for (uint32_t alignment : {32u, 64u, 1u, 4096u}) {
        GgufWriter w(alignment);
        std::vector<uint8_t> a(4 * 3 * 5), b(18 * 2 * 7);
        std::iota(a.begin(), a.end(), 0);
        std::iota(b.begin(), b.end(), 7);
        w.add_tensor("a", GgmlType::kF32, {3, 5}, a);
        w.add_tensor("b.weight", GgmlType::kQ4_0, {64, 7}, b);
        w.add_tensor("c", GgmlType::kF32, {1, 1, 1, 2}, std::vector<uint8_t>(8, 0xab));
        auto bytes = w.to_bytes();
        auto f = parse(bytes);
        EXPECT_EQ(f->alignment(), alignment);
        ASSERT_EQ(f->tensors().size(), 3u);
        const GgufTensor* ta = f->find_tensor("a");
        const GgufTensor* tb = f->find_tensor("b.weight");
        const GgufTensor* tc = f->find_tensor("c");
        ASSERT_TRUE(ta && tb && tc);
        EXPECT_EQ(ta->n_dims, 2);
        EXPECT_EQ(ta->ne[0], 3);
        EXPECT_EQ(ta->ne[1], 5);
        EXPECT_EQ(ta->n_bytes, a.size());
        EXPECT_EQ(tb->type, GgmlType::kQ4_0);
        EXPECT_EQ(tb->n_rows(), 7);
        EXPECT_EQ(tb->row_bytes(), 36u);
        EXPECT_EQ(tc->n_dims, 4);
        EXPECT_EQ(tc->ne[3], 2);
        for (const GgufTensor* t : {ta, tb, tc}) EXPECT_EQ(t->offset % alignment, 0u) << t->name;
        EXPECT_EQ(0, std::memcmp(ta->data, a.data(), a.size()));
        EXPECT_EQ(0, std::memcmp(tb->data, b.data(), b.size()));
        EXPECT_EQ(f->find_tensor("missing"), nullptr);
    }
}

TEST(GgufRoundTrip, WritesFileThroughTemporary) {
    testing::TempDir dir;
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.add_tensor("t", GgmlType::kF16, {8}, std::vector<uint8_t>(16, 1));
    w.write(dir.file("m.gguf"));
    auto f = GgufFile::open(dir.file("m.gguf"));
    EXPECT_EQ(f->architecture(), "llama");
    EXPECT_EQ(f->tensors().size(), 1u);
    // A failing data callback leaves nothing behind.
    GgufWriter bad;
    bad.add_tensor("t", GgmlType::kF32, {4}, std::vector<uint8_t>(3, 0));
    EXPECT_THROW(bad.write(dir.file("bad.gguf")), Error);
    EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf.tmp")));
}

TEST(GgufRoundTrip, WriterRefusesBadInput) {
    EXPECT_THROW(GgufWriter(3), Error);
    GgufWriter w;
    w.set<uint32_t>("k", 1);
    EXPECT_THROW(w.set<uint32_t>("k", 2), Error);
    EXPECT_THROW(w.add_tensor("q", GgmlType::kQ4_0, {33}, std::vector<uint8_t>()), Error);
    EXPECT_THROW(w.add_tensor(std::string(64, 'x'), GgmlType::kF32, {1}, std::vector<uint8_t>(4)), Error);
}

TEST(GgufRoundTrip, ValueToString) {
    GgufWriter w;
    std::vector<uint32_t> many(100, 7);
    w.set_array<uint32_t>("many", many);
    w.set_string("s", "a\"b");
    auto bytes = w.to_bytes();
    auto f = parse(bytes);
    EXPECT_EQ(gguf_value_to_string(*f->find("many"), 3), "[7, 7, 7, ... 100 items]");
    EXPECT_EQ(gguf_value_to_string(*f->find("s")), "\"a\\\"b\"");
}

}  // namespace
}  // namespace tandem
