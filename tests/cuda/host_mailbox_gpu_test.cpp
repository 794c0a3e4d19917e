// The stream-to-host mailbox (cuda/host_mailbox.h): requests' rows and bytes reach a host thread,
// its answers come back in order, eagerly and replayed from a CUDA graph.
#include "cuda/host_mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "base/error.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"

namespace tandem {
namespace {

using testing::DeviceArray;

constexpr int kRows = 3;
constexpr int64_t kCols = 300, kStride = 320, kAnswerCols = 300;

// The answer the host thread gives: each value times the request's extra factor, plus its tag.
float answer_value(float in, int32_t factor, int tag) {
    return in * static_cast<float>(factor) + static_cast<float>(tag);
}

// A host thread that answers until `stop`, counting its answers.
class Answerer {
  public:
    explicit Answerer(cuda::HostMailbox& box) : box_(box), thread_([this] { serve(); }) {}
    ~Answerer() {
        stop_ = true;
        thread_.join();
    }
    int answered() const { return answered_; }

  private:
    void serve() {
        while (!stop_) {
            cuda::HostMailbox::Request r;
            if (!box_.pending(&r)) continue;
            int32_t factor = 0;
            std::memcpy(&factor, box_.request_extra(), sizeof factor);
            for (int64_t i = 0; i < r.rows * kCols; ++i)
                box_.answer_rows()[i] = answer_value(box_.request_rows()[i], factor, r.tag);
            box_.answer(r.number);
            ++answered_;
        }
    }
    cuda::HostMailbox& box_;
    std::atomic<bool> stop_{false};
    std::atomic<int> answered_{0};
    std::thread thread_;
};

TEST(HostMailbox, AnswersEveryRequestInOrderEagerlyAndFromAGraph) {
    TANDEM_REQUIRE_GPU();
    cuda::HostMailbox box(kRows, kCols, sizeof(int32_t), kAnswerCols);
    Answerer answerer(box);
    cuda::Stream stream;
    // Three requests a pass, of 1, 3 and 2 rows, each with its factor, into rows of their own.
    const int rows[3] = {1, 3, 2};
    const std::vector<float> host_in = testing::random_floats(kRows * kStride, 7);
    DeviceArray<float> in(host_in);
    DeviceArray<int32_t> factors(std::vector<int32_t>{2, -3, 5});
    DeviceArray<float> out(3 * kRows * kStride);
    const auto pass = [&] {
        for (int q = 0; q < 3; ++q) {
            box.post(cuda::DeviceRows{in.get(), rows[q], kCols, kStride}, factors.get() + q,
                     sizeof(int32_t), 0, 10 + q, stream.get());
            box.await(
                cuda::DeviceRows{out.get() + q * kRows * kStride, rows[q], kAnswerCols, kStride},
                stream.get());
        }
    };
    const auto expect_answers = [&](const char* how) {
        const std::vector<float> got = out.download();
        const int32_t factor[3] = {2, -3, 5};
        for (int q = 0; q < 3; ++q)
            for (int r = 0; r < rows[q]; ++r)
                for (int64_t c = 0; c < kCols; ++c)
                    ASSERT_EQ(got[(q * kRows + r) * kStride + c],
                              answer_value(host_in[r * kStride + c], factor[q], 10 + q))
                        << how << ": request " << q << " row " << r << " col " << c;
    };
    pass();
    stream.synchronize("mailbox eager pass");
    expect_answers("eager");
    EXPECT_EQ(answerer.answered(), 3);

    cuda::GraphCache graphs(stream);
    for (int replay = 0; replay < 4; ++replay) {
        cuda::check(cudaMemset(out.get(), 0, sizeof(float) * out.size()), "test clear");
        graphs.run(1, pass);
        stream.synchronize("mailbox graph pass");
        expect_answers("graph");
    }
    EXPECT_EQ(answerer.answered(), 15);
}

TEST(HostMailbox, ARequestWhoseKeysAreAllNegativeIsAnsweredWithZerosOnTheDevice) {
    TANDEM_REQUIRE_GPU();
    // Records of two int32s, the key first: the factor is the second word of the first record.
    cuda::HostMailbox box(kRows, kCols, 4 * sizeof(int32_t), kAnswerCols);
    Answerer answerer(box);
    cuda::Stream stream;
    const std::vector<float> host_in = testing::random_floats(kRows * kStride, 9);
    DeviceArray<float> in(host_in);
    DeviceArray<float> out(kRows * kStride);
    for (const bool present : {false, true, false}) {
        // present: the second record's key is 3 (the first's is -1 either way).
        DeviceArray<int32_t> records(std::vector<int32_t>{-1, 4, present ? 3 : -1, 0});
        cuda::check(cudaMemset(out.get(), 0x7f, sizeof(float) * out.size()), "test fill");
        const int before = answerer.answered();
        box.post(cuda::DeviceRows{in.get(), 2, kCols, kStride}, records.get(), 4 * sizeof(int32_t),
                 2, 5, stream.get());
        box.await(cuda::DeviceRows{out.get(), 2, kAnswerCols, kStride}, stream.get());
        stream.synchronize("mailbox pass");
        const std::vector<float> got = out.download();
        for (int r = 0; r < 2; ++r)
            for (int64_t c = 0; c < kCols; ++c)
                ASSERT_EQ(got[r * kStride + c],
                          present ? answer_value(host_in[r * kStride + c], -1, 5) : 0.0f)
                    << (present ? "sent" : "not sent") << ": row " << r << " col " << c;
        EXPECT_EQ(answerer.answered(), before + (present ? 1 : 0));
    }
}

TEST(HostMailbox, RefusesARequestLargerThanItsRoom) {
    TANDEM_REQUIRE_GPU();
    cuda::HostMailbox box(kRows, kCols, sizeof(int32_t), kAnswerCols);
    DeviceArray<float> in(4 * kCols);
    EXPECT_THROW(box.post(cuda::DeviceRows{in.get(), 4, kCols, kCols}, nullptr, 0, 0, 0, nullptr),
                 Error);
    EXPECT_THROW(box.post(cuda::DeviceRows{in.get(), 1, kCols, kCols}, in.get(), 8, 0, 0, nullptr),
                 Error);
    EXPECT_THROW(box.await(cuda::DeviceRows{in.get(), 1, kCols + 1, kCols + 1}, nullptr), Error);
}

}  // namespace
}  // namespace tandem
