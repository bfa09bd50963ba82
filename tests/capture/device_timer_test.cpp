// DeviceTimer without a GPU: a fake device registered as PrivateUse1 whose
// events the test completes by hand, standing in for CUDA's (the timer only
// uses torch's device-generic event interface). Durations reach the rank
// file once the device has passed an op's end event, and the timer never
// waits for the device.

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "capture/agent/ops/device_timer.h"
#include "core/store/rank_reader.h"
#include "tests/core/test_support.h"

namespace {

using c10::Device;
using c10::DeviceType;
using meshscope::DeviceTimeRecord;
using meshscope::OpSeq;
using meshscope::capture::DeviceTimer;

// The fake device's clock: record() stamps events with `now`; events stamped
// up to `completed` have passed.
std::atomic<double> g_nowMs{0}, g_completedMs{-1};
std::atomic<int> g_waits{0};        // synchronizeEvent/Stream/Device calls
std::atomic<int64_t> g_records{0};  // events recorded
std::atomic<int64_t> g_queries{0};  // events asked whether they have passed

struct FakeEvent {
    double atMs = 0;
};

struct FakeDevice final : c10::impl::DeviceGuardImplInterface {
    DeviceType type() const override { return DeviceType::PrivateUse1; }
    Device exchangeDevice(Device d) const override { return d; }
    Device getDevice() const override { return Device(DeviceType::PrivateUse1, 0); }
    void setDevice(Device) const override {}
    void uncheckedSetDevice(Device) const noexcept override {}
    c10::Stream getStream(Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
    c10::Stream exchangeStream(c10::Stream s) const override { return s; }
    c10::DeviceIndex deviceCount() const noexcept override { return 1; }
    void record(void** event, const c10::Stream&, c10::DeviceIndex, c10::EventFlag) const override {
        if (!*event) *event = new FakeEvent;
        static_cast<FakeEvent*>(*event)->atMs = g_nowMs;
        ++g_records;
    }
    bool queryEvent(void* event) const override {
        ++g_queries;
        return static_cast<FakeEvent*>(event)->atMs <= g_completedMs;
    }
    double elapsedTime(void* a, void* b, c10::DeviceIndex) const override {
        return static_cast<FakeEvent*>(b)->atMs - static_cast<FakeEvent*>(a)->atMs;
    }
    void destroyEvent(void* event, c10::DeviceIndex) const noexcept override {
        delete static_cast<FakeEvent*>(event);
    }
    void synchronizeEvent(void*) const override { ++g_waits; }
    void synchronizeStream(const c10::Stream&) const override { ++g_waits; }
    void synchronizeDevice(c10::DeviceIndex) const override { ++g_waits; }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, FakeDevice);

const Device kGpu(DeviceType::PrivateUse1, 0);

class DeviceTimerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        g_nowMs = 0;
        g_completedMs = -1;
        g_waits = 0;
        m_writer = meshscope::RankWriter::create(m_dir / "rank-00000.msdb", {0, 1, "run"});
        m_timer.emplace(*m_writer, [this](const std::string& w) { m_warnings.push_back(w); });
    }
    // An op that runs from now for `ms` on the fake device.
    void op(int64_t seq, double ms) {
        DeviceTimer::Span span(*m_timer, kGpu);
        g_nowMs = g_nowMs + ms;
        span.stop(OpSeq{seq});
    }
    std::vector<DeviceTimeRecord> written() {
        m_timer.reset();
        m_writer->close();
        return meshscope::RankReader::open(m_dir / "rank-00000.msdb").deviceTimes();
    }
    meshscope::test::TempDir m_dir;
    std::unique_ptr<meshscope::RankWriter> m_writer;
    std::optional<DeviceTimer> m_timer;
    std::vector<std::string> m_warnings;
};

TEST_F(DeviceTimerTest, DurationsAreWrittenOnceTheDeviceHasPassedTheOp) {
    op(1, 2.5);
    op(2, 1.5);
    m_timer->poll();
    g_completedMs = 3;  // op 1 has finished on the device, op 2 not yet
    m_timer->poll();
    op(3, 0.25);
    g_completedMs = 10;
    m_timer->poll();
    EXPECT_EQ(g_waits, 0) << "the timer waited for the device";
    auto times = written();
    ASSERT_EQ(times.size(), 3u);
    EXPECT_EQ(std::get<OpSeq>(times[0].subject), OpSeq{1});
    EXPECT_EQ(times[0].durationNs, 2'500'000);
    EXPECT_EQ(times[1].durationNs, 1'500'000);
    EXPECT_EQ(times[2].durationNs, 250'000);
    EXPECT_FALSE(times[0].deviceStartNs);
}

// An op's span asks the device nothing: query() and elapsedTime() are driver
// calls, which poll() makes on the agent's monitor thread. poll() says
// whether durations are still queued (the monitor polls again soon).
TEST_F(DeviceTimerTest, TheTimedOpAsksTheDeviceNothing) {
    g_completedMs = 1e9;  // every op has passed
    int64_t before = g_queries;
    for (int64_t i = 1; i <= 50; ++i)
        op(i, 1);
    EXPECT_EQ(g_queries, before) << "the training thread's op queried the device";
    EXPECT_FALSE(m_timer->poll());
    EXPECT_GE(g_queries, before + 50);  // elapsedTime() asks again
    g_completedMs = -1;
    op(51, 1);
    EXPECT_TRUE(m_timer->poll()) << "an op still running on the device is still queued";
    EXPECT_EQ(written().size(), 50u);
}

TEST_F(DeviceTimerTest, HostOpsAndUnrecordedOpsAreNotTimed) {
    {
        DeviceTimer::Span host(*m_timer, std::nullopt);
        host.stop(OpSeq{1});
        DeviceTimer::Span dropped(*m_timer, kGpu);  // destroyed without stop
        DeviceTimer::Span unrecorded(*m_timer, kGpu);
        unrecorded.stop(OpSeq{});  // its record was dropped by the writer
    }
    g_completedMs = 100;
    m_timer->poll();
    EXPECT_TRUE(written().empty());
}

TEST_F(DeviceTimerTest, OpsOutsideTheSampledStepsRecordNoEvents) {
    op(1, 1.0);
    m_timer->setActive(false);  // a step the sampling skips (Agent::advanceStep)
    int64_t before = g_records;
    op(2, 1.0);
    EXPECT_EQ(g_records, before) << "an op of a skipped step recorded device events";
    m_timer->setActive(true);
    op(3, 1.0);
    g_completedMs = 100;
    m_timer->poll();
    auto times = written();
    ASSERT_EQ(times.size(), 2u);
    EXPECT_EQ(std::get<OpSeq>(times[0].subject), OpSeq{1});
    EXPECT_EQ(std::get<OpSeq>(times[1].subject), OpSeq{3});
}

TEST_F(DeviceTimerTest, AFullQueueGivesUpNewOpsWithoutWaiting) {
    for (size_t i = 0; i < DeviceTimer::kMaxPending + 3; ++i)
        op(int64_t(i + 1), 1);
    EXPECT_EQ(m_timer->dropped(), 3u);
    EXPECT_EQ(g_waits, 0);
    g_completedMs = 1e9;
    m_timer->poll();
    EXPECT_EQ(written().size(), DeviceTimer::kMaxPending);
}

TEST_F(DeviceTimerTest, DrainWaitsBoundedAndCountsWhatIsLeft) {
    op(1, 1);
    g_completedMs = 1;
    op(2, 1);  // never finishes
    m_timer->drain(std::chrono::milliseconds(20));
    EXPECT_EQ(m_timer->dropped(), 1u);
    EXPECT_EQ(g_waits, 0);
    EXPECT_EQ(written().size(), 1u);
}

// (No CPU backend is linked into this test: creating its event throws, as
// recording one on a backend without timing events does.)
TEST_F(DeviceTimerTest, ABackendThatCannotTimeTurnsTimingOffOnceWithAWarning) {
    DeviceTimer::Span first(*m_timer, Device(DeviceType::CPU));
    first.stop(OpSeq{1});
    DeviceTimer::Span second(*m_timer, Device(DeviceType::CPU));
    second.stop(OpSeq{2});
    ASSERT_EQ(m_warnings.size(), 1u);
    EXPECT_NE(m_warnings[0].find("no GPU durations of ops on cpu"), std::string::npos)
        << m_warnings[0];
    op(3, 1);  // other devices keep their timing
    g_completedMs = 10;
    m_timer->poll();
    EXPECT_EQ(written().size(), 1u);
}

}  // namespace
