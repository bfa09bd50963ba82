#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "core/store/op_chunk.h"

namespace meshscope {
namespace {

OpRecord op(int64_t seq, int64_t start, int64_t end, int64_t step) {
    OpRecord r;
    r.seq = OpSeq{seq};
    r.startNs = start;
    r.endNs = end;
    r.step = step;
    r.name = StringId{seq % 7 + 1};
    return r;
}

TEST(OpChunk, RoundTripKeepsEveryFieldAndBounds) {
    OpChunkEncoder enc;
    OpRecord a = op(10, 500, 900, 3);
    a.thread = 4;
    a.phase = Phase::Optimizer;
    a.stack = StackId{99};
    a.depth = 2;
    a.incident = IncidentSeq{7};
    a.operands = {{0, OperandRole::Input, OperandKind::Tensor, TensorId{5}, 0, StringId{3}},
                  {1, OperandRole::Input, OperandKind::Scalar, {}, -0.125, {}},
                  {0, OperandRole::Output, OperandKind::None, {}, 0, {}}};
    OpRecord b = op(11, 100, 2000, 2);  // earlier start, later end: out of order is fine
    OpRecord c =
        op(12, std::numeric_limits<int64_t>::max() - 5, std::numeric_limits<int64_t>::max(), -1);
    for (const auto& r : {a, b, c})
        ASSERT_TRUE(enc.add(r));
    const OpChunkBounds& bounds = enc.bounds();
    EXPECT_EQ(bounds.firstSeq, OpSeq{10});
    EXPECT_EQ(bounds.lastSeq, OpSeq{12});
    EXPECT_EQ(bounds.count, 3);
    EXPECT_EQ(bounds.minStartNs, 100);
    EXPECT_EQ(bounds.maxEndNs, std::numeric_limits<int64_t>::max());
    EXPECT_EQ(bounds.minStep, -1);
    EXPECT_EQ(bounds.maxStep, 3);

    auto back = decodeOpChunk(bounds, enc.bytes());
    ASSERT_EQ(back.size(), 3u);
    EXPECT_EQ(back[0].seq, a.seq);
    EXPECT_EQ(back[0].startNs, 500);
    EXPECT_EQ(back[0].endNs, 900);
    EXPECT_EQ(back[0].thread, 4u);
    EXPECT_EQ(back[0].phase, Phase::Optimizer);
    EXPECT_EQ(back[0].stack, StackId{99});
    EXPECT_EQ(back[0].depth, 2);
    EXPECT_EQ(back[0].incident, IncidentSeq{7});
    EXPECT_EQ(back[0].operands, a.operands);
    EXPECT_EQ(back[1].startNs, 100);
    EXPECT_EQ(back[1].step, 2);
    EXPECT_EQ(back[2].startNs, c.startNs);
    EXPECT_EQ(back[2].endNs, c.endNs);
    EXPECT_EQ(back[2].step, -1);
}

TEST(OpChunk, RefusesGapsAndOverflow) {
    OpChunkEncoder enc;
    EXPECT_TRUE(enc.add(op(1, 0, 1, 0)));
    EXPECT_FALSE(enc.add(op(3, 0, 1, 0)));  // seq 2 missing
    for (int64_t s = 2; s <= kMaxOpsPerChunk; ++s)
        ASSERT_TRUE(enc.add(op(s, s, s + 1, 0)));
    EXPECT_FALSE(enc.add(op(kMaxOpsPerChunk + 1, 0, 1, 0)));
    enc.clear();
    EXPECT_TRUE(enc.empty());
    EXPECT_TRUE(enc.add(op(500, 0, 1, 0)));
}

TEST(OpChunk, DamagedBytesThrowInsteadOfReadingPastTheEnd) {
    OpChunkEncoder enc;
    for (int64_t s = 1; s <= 50; ++s) {
        OpRecord r = op(s, s * 10, s * 10 + 3, s / 10);
        r.operands = {{0, OperandRole::Input, OperandKind::Scalar, {}, 1.5, {}}};
        enc.add(r);
    }
    std::string bytes = enc.bytes();
    OpChunkBounds bounds = enc.bounds();
    for (size_t cut = 0; cut < bytes.size(); cut += 7)
        EXPECT_THROW(decodeOpChunk(bounds, std::string_view(bytes).substr(0, cut)), ChunkError);
    bounds.count = kMaxOpsPerChunk + 1;
    EXPECT_THROW(decodeOpChunk(bounds, bytes), ChunkError);
    std::mt19937 rng(5);
    for (int round = 0; round < 500; ++round) {
        std::string damaged = bytes;
        damaged[rng() % damaged.size()] = char(rng());
        try {
            decodeOpChunk(enc.bounds(), damaged);
        } catch (const ChunkError&) {
        }
    }
}

}  // namespace
}  // namespace meshscope
