// Stop strings over text arriving in pieces: matches across pieces, nothing of a stop string is
// ever emitted, held-back text comes out when it cannot be a stop string any more.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/stop_matcher.h"

namespace tandem {
namespace {

// Feeds the pieces and returns everything emitted, with whether a stop string matched.
std::pair<std::string, bool> run(std::vector<std::string> stops,
                                 const std::vector<std::string>& pieces) {
    StopMatcher m(std::move(stops));
    std::string out;
    for (const std::string& p : pieces) {
        StopMatcher::Result r = m.feed(p);
        out += r.text;
        if (r.stopped) return {out, true};
    }
    return {out + m.flush(), false};
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
    StopMatcher m;
    EXPECT_EQ(m.feed("abc").text, "abc");
    EXPECT_EQ(m.flush(), "");
    EXPECT_EQ(run({""}, {"a", "b"}), std::make_pair(std::string("ab"), false));
}

TEST(StopMatcher, MatchInsideOnePiece) {
    EXPECT_EQ(run({"STOP"}, {"hello STOP world"}), std::make_pair(std::string("hello "), true));
}

TEST(StopMatcher, MatchAcrossPieces) {
    EXPECT_EQ(run({"STOP"}, {"hel", "lo S", "T", "OP", "never"}),
              std::make_pair(std::string("hello "), true));
    EXPECT_EQ(run({"\n\n"}, {"a\n", "\nb"}), std::make_pair(std::string("a"), true));
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStillMatch) {
    StopMatcher m({"STOP"});
    EXPECT_EQ(m.feed("abc S").text, "abc ");
    EXPECT_EQ(m.feed("T").text, "");
    EXPECT_EQ(m.feed("x").text, "STx");  // "STx" cannot start "STOP" any more
    EXPECT_EQ(m.feed("ST").text, "");
    EXPECT_EQ(m.flush(), "ST");  // the end: a partial stop string is ordinary text
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
    EXPECT_EQ(run({"world", "lo w"}, {"hello world"}), std::make_pair(std::string("hel"), true));
    EXPECT_EQ(run({"abcd", "bc"}, {"ab", "cd"}), std::make_pair(std::string(""), true));
    EXPECT_EQ(run({"abce", "bc"}, {"ab", "cd"}), std::make_pair(std::string("a"), true));
}

TEST(StopMatcher, SaysWhichStopMatched) {
    StopMatcher m({"world", "lo w", "x"});
    EXPECT_EQ(m.matched(), "");
    EXPECT_FALSE(m.feed("hel").stopped);
    EXPECT_TRUE(m.feed("lo world").stopped);
    EXPECT_EQ(m.matched(), "lo w");
}

TEST(StopMatcher, OverlappingPrefixes) {
    // "aab": the held "a" of a failed "aa…" start must still be found.
    EXPECT_EQ(run({"aab"}, {"a", "a", "a", "b", "c"}), std::make_pair(std::string("a"), true));
    EXPECT_EQ(run({"aab"}, {"aaa", "c"}), std::make_pair(std::string("aaac"), false));
}

TEST(StopMatcher, NothingAfterTheMatch) {
    StopMatcher m({"x"});
    EXPECT_TRUE(m.feed("axb").stopped);
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.feed("more").text, "");
    EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, MultibyteTextStaysWhole) {
    // "é" is two bytes; the stop string starts with it, so the cut is at a character boundary.
    EXPECT_EQ(run({"été"}, {"un ", "é", "t", "é chaud"}), std::make_pair(std::string("un "), true));
    auto [text, stopped] = run({"éa"}, {"ééb"});
    EXPECT_FALSE(stopped);
    EXPECT_EQ(text, "ééb");
}

}  // namespace
}  // namespace tandem
