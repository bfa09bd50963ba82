// The collective tracker's table of pending collectives, without Python or an
// Agent: when a collective's life ends (by its work, its wait, its result,
// or the end of the recording), which ones the watchdog finds overdue, and
// that nothing the table lets go of (the sink's record, a Work's last
// reference, whose destructor takes the GIL in torch) happens under its lock.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "capture/agent/collectives/pending_collectives.h"

namespace {

using meshscope::CollectiveSeq;
using meshscope::CollectiveState;
using meshscope::OpSeq;
using meshscope::capture::EndedCollective;
using meshscope::capture::PendingCollectives;
using meshscope::capture::TrackedCollective;

// A backend's work the test completes by hand, as NCCL's completes on the
// device; its destructor notes whether the table's lock was held.
class FakeWork : public c10d::Work {
  public:
    FakeWork(const PendingCollectives& table, std::vector<bool>& destroyedLocked)
        : m_table(table), m_destroyedLocked(destroyedLocked) {}
    ~FakeWork() override { m_destroyedLocked.push_back(m_table.locked()); }
    bool isCompleted() override { return m_done; }
    std::exception_ptr exception() const override { return m_error; }
    void complete() { m_done = true; }
    void fail(const std::string& what) {
        m_error = std::make_exception_ptr(std::runtime_error(what));
        m_done = true;
    }

  private:
    const PendingCollectives& m_table;
    std::vector<bool>& m_destroyedLocked;
    bool m_done = false;
    std::exception_ptr m_error;
};

class PendingCollectivesTest : public ::testing::Test {
  protected:
    // What the sink got, and whether the lock was held meanwhile.
    struct Sunk {
        int64_t seq;
        CollectiveState state;
        int64_t endNs;
        std::string error;
        bool heldWork;
        bool locked;
    };
    std::vector<Sunk> sunk;
    std::vector<bool> workDestroyedLocked;
    int64_t now = 1000;
    PendingCollectives table{[this](const EndedCollective& e) {
                                 sunk.push_back({e.collective.seq.value(), e.state, e.endNs,
                                                 e.error, bool(e.collective.work), table.locked()});
                             },
                             [this] { return now; }};

    TrackedCollective collective(int64_t seq, int64_t startNs, uint32_t thread = 0) {
        TrackedCollective c;
        c.seq = CollectiveSeq(seq);
        c.kind = "all_reduce";
        c.startNs = startNs;
        c.issuedNs = startNs;
        c.thread = thread;
        return c;
    }
    c10::intrusive_ptr<FakeWork> work() {
        return c10::make_intrusive<FakeWork>(table, workDestroyedLocked);
    }
};

TEST_F(PendingCollectivesTest, ACallWithNothingToWaitForCompletesWhenItReturns) {
    ASSERT_TRUE(table.add(collective(1, 100)));
    EXPECT_FALSE(table.returned(CollectiveSeq(1), 250, {}, false, at::Tensor(), OpSeq(7), {}));
    ASSERT_EQ(sunk.size(), 1u);
    EXPECT_EQ(sunk[0].state, CollectiveState::Completed);
    EXPECT_EQ(sunk[0].endNs, 250);
    EXPECT_EQ(table.size(), 0u);
}

TEST_F(PendingCollectivesTest, AWorkThatCompletesOnTheDeviceEndsWhenThePollSeesIt) {
    table.add(collective(1, 100));
    auto w = work();
    EXPECT_TRUE(table.returned(CollectiveSeq(1), 200, w, /*completesOnWait=*/false, at::Tensor(),
                               OpSeq(), {}));
    table.waited(CollectiveSeq(1));  // wait() returned on the host: NCCL is not done yet
    EXPECT_TRUE(sunk.empty());
    EXPECT_TRUE(table.poll().stillOnDevice);
    w->complete();
    now = 5000;
    EXPECT_FALSE(table.poll().stillOnDevice);
    ASSERT_EQ(sunk.size(), 1u);
    EXPECT_EQ(sunk[0].state, CollectiveState::Completed);
    EXPECT_EQ(sunk[0].endNs, 5000);
}

TEST_F(PendingCollectivesTest, AWorkCompleteOnceWaitedForEndsAtItsWait) {
    table.add(collective(1, 100));
    auto w = work();  // gloo's reduce_scatter never says it is complete
    EXPECT_FALSE(table.returned(CollectiveSeq(1), 200, w, /*completesOnWait=*/true, at::Tensor(),
                                OpSeq(), {}));
    EXPECT_TRUE(sunk.empty());
    now = 300;
    table.waited(CollectiveSeq(1));
    ASSERT_EQ(sunk.size(), 1u);
    EXPECT_EQ(sunk[0].state, CollectiveState::Completed);
    EXPECT_EQ(sunk[0].endNs, 300);
}

TEST_F(PendingCollectivesTest, AnErrorTheBackendRaisesAsynchronouslyIsAFailureOfThatCollective) {
    table.add(collective(1, 100));
    table.add(collective(2, 110));
    auto failing = work(), fine = work();
    table.returned(CollectiveSeq(1), 200, failing, false, at::Tensor(), OpSeq(), {});
    table.returned(CollectiveSeq(2), 210, fine, false, at::Tensor(), OpSeq(), {});
    failing->fail("NCCL error: unhandled system error");
    PendingCollectives::Polled polled = table.poll();
    ASSERT_EQ(polled.failures.size(), 1u);
    EXPECT_EQ(polled.failures[0].first.seq, CollectiveSeq(1));
    EXPECT_FALSE(polled.failures[0].first.work) << "a detached copy holds no work";
    EXPECT_EQ(polled.failures[0].second, "NCCL error: unhandled system error");
    EXPECT_TRUE(polled.stillOnDevice);
    ASSERT_EQ(sunk.size(), 1u);
    EXPECT_EQ(sunk[0].state, CollectiveState::Failed);
    EXPECT_EQ(sunk[0].error, "NCCL error: unhandled system error");
    // a wait that raises for it now finds it ended by the poll, as failed:
    // the tracker then names it and its incident instead of the wait
    EXPECT_FALSE(table.fail(CollectiveSeq(1), "Connection closed by peer"));
    EXPECT_TRUE(table.failedByPoll(CollectiveSeq(1)));
    EXPECT_FALSE(table.failedByPoll(CollectiveSeq(2)));
}

TEST_F(PendingCollectivesTest, OverdueFindsEachLateCollectiveOnce) {
    table.add(collective(1, 0));
    table.add(collective(2, 100));
    table.add(collective(3, 200));
    std::vector<TrackedCollective> late = table.overdue(/*nowNs=*/250, /*ns=*/100);
    std::vector<int64_t> seqs;
    for (const TrackedCollective& c : late)
        seqs.push_back(c.seq.value());
    std::sort(seqs.begin(), seqs.end());
    EXPECT_EQ(seqs, (std::vector<int64_t>{1, 2}));
    EXPECT_TRUE(table.overdue(250, 100).empty()) << "reported once";
    table.returned(CollectiveSeq(3), 260, {}, false, at::Tensor(), OpSeq(), {});  // ended
    EXPECT_TRUE(table.overdue(10'000, 100).empty()) << "an ended collective is never late";
}

TEST_F(PendingCollectivesTest, WorksAndRecordsAreLetGoOfOutsideTheLock) {
    table.add(collective(1, 100));
    table.add(collective(2, 100));
    table.add(collective(3, 100));
    {
        auto a = work(), b = work(), c = work();
        table.returned(CollectiveSeq(1), 200, a, false, at::Tensor(), OpSeq(), {});
        table.returned(CollectiveSeq(2), 200, b, false, at::Tensor(), OpSeq(), {});
        table.returned(CollectiveSeq(3), 200, c, true, at::Tensor(), OpSeq(), {});
        a->complete();
    }                                         // the table holds the last references now
    table.poll();                             // 1 completes
    table.fail(CollectiveSeq(2), "aborted");  // 2 fails
    table.endAll("the process exited");       // 3 is left pending
    ASSERT_EQ(sunk.size(), 3u);
    for (const Sunk& s : sunk) {
        EXPECT_FALSE(s.locked) << "collective " << s.seq << " was sunk under the lock";
        EXPECT_TRUE(s.heldWork) << "the sink sees the work, so a record can ask it";
    }
    ASSERT_EQ(workDestroyedLocked.size(), 3u) << "every work's last reference was let go of";
    for (bool locked : workDestroyedLocked)
        EXPECT_FALSE(locked) << "a work was destroyed under the table's lock";
}

TEST_F(PendingCollectivesTest, AFunctionalCollectiveEndsByItsResult) {
    at::Tensor waitedFor = at::zeros({4}), dropped = at::zeros({4});
    table.add(collective(1, 100));
    table.add(collective(2, 100));
    table.returned(CollectiveSeq(1), 200, {}, false, waitedFor, OpSeq(), {});
    table.returned(CollectiveSeq(2), 200, {}, false, dropped, OpSeq(), {});
    EXPECT_TRUE(sunk.empty()) << "pending until wait_tensor";
    EXPECT_EQ(table.waitingForResult(waitedFor, /*waiter=*/42), CollectiveSeq(1));
    EXPECT_FALSE(table.waitingForResult(at::zeros({4}), 42)) << "another tensor's storage";
    table.waited(CollectiveSeq(1));
    dropped.reset();  // nobody waits for this one: its result is gone
    table.poll();
    ASSERT_EQ(sunk.size(), 2u);
    EXPECT_EQ(sunk[0].seq, 1);
    EXPECT_EQ(sunk[0].state, CollectiveState::Completed);
    EXPECT_EQ(sunk[1].seq, 2);
    EXPECT_EQ(sunk[1].state, CollectiveState::Unwaited);
}

TEST_F(PendingCollectivesTest, AFullTableRecordsTheCollectiveAsNotFollowed) {
    PendingCollectives small(
        [this](const EndedCollective& e) {
            sunk.push_back({e.collective.seq.value(), e.state, e.endNs, e.error, false, false});
        },
        [this] { return now; }, /*capacity=*/2);
    EXPECT_TRUE(small.add(collective(1, 100)));
    EXPECT_TRUE(small.add(collective(2, 100)));
    EXPECT_FALSE(small.add(collective(3, 150)));
    ASSERT_EQ(sunk.size(), 1u);
    EXPECT_EQ(sunk[0].seq, 3);
    EXPECT_EQ(sunk[0].state, CollectiveState::Unwaited);
    EXPECT_EQ(sunk[0].endNs, 150);
    EXPECT_NE(sunk[0].error.find("not followed"), std::string::npos);
    EXPECT_EQ(small.size(), 2u);
}

TEST_F(PendingCollectivesTest, AtTheEndEachThreadsLatestPendingCollectiveIsTheOneItWasIn) {
    at::Tensor result = at::zeros({2});
    table.add(collective(1, 100, /*thread=*/0));
    table.add(collective(2, 110, /*thread=*/0));
    table.add(collective(3, 120, /*thread=*/1));
    table.add(collective(4, 130, /*thread=*/1));  // a functional one nobody waited for
    table.returned(CollectiveSeq(4), 140, {}, false, result, OpSeq(), {});
    EXPECT_EQ(table.latestOn(0)->seq, CollectiveSeq(2));
    EXPECT_FALSE(table.latestOn(7));
    std::map<uint32_t, TrackedCollective> stuck = table.endAll("its rank got SIGTERM");
    EXPECT_EQ(stuck.at(0).seq, CollectiveSeq(2));
    EXPECT_EQ(stuck.at(1).seq, CollectiveSeq(3)) << "not the unwaited functional collective";
    ASSERT_EQ(sunk.size(), 4u);
    for (const Sunk& s : sunk) {
        EXPECT_EQ(s.state, s.seq == 4 ? CollectiveState::Unwaited : CollectiveState::Pending);
        EXPECT_EQ(s.error, s.seq == 4 ? "" : "its rank got SIGTERM");
    }
    EXPECT_EQ(table.size(), 0u);
}

}  // namespace
