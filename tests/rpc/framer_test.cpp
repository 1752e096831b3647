#include "rpc/framer.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace warden::rpc {
namespace {

struct Got {
    Frame::Kind kind;
    std::string bytes;
    bool first, last;
};

// Feeds `input` in pieces of `step` bytes and collects every frame, finish() included.
std::vector<Got> feed(Framer& f, std::string_view input, size_t step, bool eof = true) {
    std::vector<Got> out;
    auto drain = [&](std::optional<Frame> fr) {
        if (!fr) return false;
        out.push_back({fr->kind, std::string(fr->bytes), fr->first, fr->last});
        EXPECT_GE(fr->capacity, fr->bytes.size() + kParsePadding);
        return true;
    };
    size_t pos = 0;
    while (pos < input.size()) {
        auto space = f.prepare();
        size_t n = std::min({step, space.size(), input.size() - pos});
        std::memcpy(space.data(), input.data() + pos, n);
        f.commit(n);
        pos += n;
        while (drain(f.next())) {
        }
    }
    if (eof)
        while (drain(f.finish())) {
        }
    return out;
}

TEST(Framer, SplitsLinesAcrossEveryChunkBoundary) {
    const std::string input = "{\"a\":1}\n{\"b\":2}\n\n{\"c\":3}\n";
    for (size_t step = 1; step <= input.size(); ++step) {
        Framer f(1024, 64);
        auto got = feed(f, input, step);
        ASSERT_EQ(got.size(), 4u) << "step " << step;
        EXPECT_EQ(got[0].bytes, "{\"a\":1}\n");
        EXPECT_EQ(got[1].bytes, "{\"b\":2}\n");
        EXPECT_EQ(got[2].bytes, "\n");
        EXPECT_EQ(got[3].bytes, "{\"c\":3}\n");
        for (auto& g : got)
            EXPECT_EQ(g.kind, Frame::Kind::line);
    }
}

TEST(Framer, ContentDropsLfAndCrButBytesKeepThem) {
    Framer f(1024, 64);
    auto sp = f.prepare();
    std::memcpy(sp.data(), "abc\r\n", 5);
    f.commit(5);
    auto fr = f.next();
    ASSERT_TRUE(fr);
    EXPECT_EQ(fr->bytes, "abc\r\n");
    EXPECT_EQ(fr->content(), "abc");
}

TEST(Framer, PartialLastLineIsReportedAtEof) {
    Framer f(1024, 64);
    auto got = feed(f, "one\ntwo", 3);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].kind, Frame::Kind::line);
    EXPECT_EQ(got[1].kind, Frame::Kind::partial);
    EXPECT_EQ(got[1].bytes, "two");
    Framer g(1024, 64);
    EXPECT_TRUE(feed(g, "one\n", 2).size() == 1);  // nothing partial after a clean end
}

TEST(Framer, OversizeLineIsHandedOutInPiecesNeverTruncated) {
    const size_t max = 100;
    std::string big(1000, 'x');
    const std::string input = "small\n" + big + "\nafter\n";
    for (size_t step : {1u, 7u, 64u, 300u}) {
        Framer f(max, 64);
        auto got = feed(f, input, step);
        ASSERT_GE(got.size(), 3u);
        EXPECT_EQ(got.front().bytes, "small\n");
        EXPECT_EQ(got.back().bytes, "after\n");
        std::string joined;
        for (size_t i = 1; i + 1 < got.size(); ++i) {
            EXPECT_EQ(got[i].kind, Frame::Kind::oversize);
            EXPECT_EQ(got[i].first, i == 1);
            EXPECT_EQ(got[i].last, i + 2 == got.size());
            joined += got[i].bytes;
        }
        EXPECT_EQ(joined, big + "\n") << "step " << step;
        // Memory stays bounded by the limit plus a read chunk, whatever the line length.
        EXPECT_LE(f.capacity(), 4 * (max + 64));
    }
}

TEST(Framer, LineAtTheLimitIsNotOversize) {
    Framer f(10, 64);
    auto got = feed(f, std::string(10, 'y') + "\r\n" + std::string(11, 'z') + "\n", 64);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].kind, Frame::Kind::line);
    EXPECT_EQ(got[1].kind, Frame::Kind::oversize);
    EXPECT_TRUE(got[1].first && got[1].last);
}

TEST(Framer, OversizeLineEndingAtEofIsClosed) {
    Framer f(10, 64);
    auto got = feed(f, std::string(100, 'q'), 5);
    ASSERT_FALSE(got.empty());
    EXPECT_TRUE(got.front().first);
    EXPECT_TRUE(got.back().last);
    std::string joined;
    for (auto& g : got)
        joined += g.bytes;
    EXPECT_EQ(joined, std::string(100, 'q'));
}

TEST(Framer, LargeMessageUnderTheLimitGrowsKeepsItForTheNextThenGivesMemoryBack) {
    Framer f(1 << 20, 64);
    std::string big(200000, 'm');
    auto got = feed(f, big + "\n", 4096, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].bytes.size(), big.size() + 1);
    EXPECT_GT(f.capacity(), 200000u);
    // Kept while large messages may follow (one at a time, each emptying the buffer): a
    // second one needs no reallocation.
    (void)f.prepare();
    size_t grown = f.capacity();
    EXPECT_GT(grown, 200000u);
    got = feed(f, big + "\n", 4096, false);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(f.capacity(), grown);
    // Given back once small lines have gone through for a while (bounded count).
    for (int i = 0; i < 16 && f.capacity() > 4 * 64u; ++i) {
        got = feed(f, "small\n", 4096, false);
        ASSERT_EQ(got.size(), 1u);
        (void)f.prepare();
    }
    (void)f.prepare();
    EXPECT_LE(f.capacity(), 4 * 64u);
}

}  // namespace
// The memory bound (rpc/framer.hpp, "Memory"): however a line arrives, the buffer never grows
// past max_message + 1 + one read chunk, and a line at the limit still fits whole.
TEST(Framer, BufferNeverGrowsPastItsLimit) {
    const size_t max = 100000, chunk = 4096;
    Framer f(max, chunk);
    EXPECT_EQ(f.capacity_limit(), max + 1 + chunk);
    std::string at_limit(max, 'a');
    auto got = feed(f, at_limit + "\n" + std::string(3 * max, 'b') + "\n", chunk, false);
    EXPECT_LE(f.capacity(), f.capacity_limit());
    ASSERT_GE(got.size(), 2u);
    EXPECT_EQ(got[0].kind, Frame::Kind::line);
    EXPECT_EQ(got[0].bytes.size(), max + 1);
    EXPECT_EQ(got[1].kind, Frame::Kind::oversize);
}

}  // namespace warden::rpc
