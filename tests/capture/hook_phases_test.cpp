// The benchmarks' phase timer (MESHSCOPE_BENCH_HOOK=phases) for the
// adapters' calls: what a call releases for torch (HookPhases::Moved) counts
// apart from the call's own time, and nothing inside the call it wraps.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "capture/agent/hooks/hook_phases.h"

namespace {

using meshscope::capture::AdapterCall;
using meshscope::capture::HookPhases;

// Runs until the time-stamp counter moved on by `ticks` (a preemption only
// adds to it).
void spin(uint64_t ticks) {
    uint64_t start = HookPhases::ticks();
    while (HookPhases::ticks() - start < ticks) {
    }
}

constexpr uint64_t kSpin = 2'000'000;  // about 1 ms at 2-3 GHz

class HookPhasesTest : public ::testing::Test {
  protected:
    void SetUp() override { HookPhases::enable(true); }
    void TearDown() override { HookPhases::enable(false); }
};

TEST_F(HookPhasesTest, WhatACallReleasesForTorchIsCountedApartFromItsOwnTime) {
    {
        HookPhases::Adapter step(AdapterCall::Step);
        {
            HookPhases::Moved released;  // the specs only the agent still held
            spin(4 * kSpin);
        }
    }
    std::map<std::string, double> per = HookPhases::perOp();
    EXPECT_EQ(per["adapter_step_calls"], 1);
    // the release is moved time, not the call's
    EXPECT_GT(per["adapter_step_moved_ns"], per["adapter_step_ns"]);
    EXPECT_GT(per["adapter_step_moved_ns"], 0);
    EXPECT_EQ(per["adapter_wait_tensor_moved_ns"], 0);
}

TEST_F(HookPhasesTest, ReleasesInsideTheCallAnAdapterWrapsAreNeitherItsOwnNorMoved) {
    {
        HookPhases::Adapter wait(AdapterCall::WaitTensor);
        wait.pause();  // the original wait_tensor runs
        {
            HookPhases::Moved released;  // torch's own release, inside it
            spin(kSpin);
        }
        wait.resume();
    }
    std::map<std::string, double> per = HookPhases::perOp();
    EXPECT_EQ(per["adapter_wait_tensor_calls"], 1);
    EXPECT_EQ(per["adapter_wait_tensor_moved_ns"], 0);
}

TEST_F(HookPhasesTest, NestedCallsEachCountTheirOwnRelease) {
    {
        HookPhases::Adapter collective(AdapterCall::Collective);
        collective.pause();
        {
            HookPhases::Adapter wait(AdapterCall::WaitTensor);
            HookPhases::Moved released;
            spin(kSpin);
        }
        collective.resume();
        HookPhases::Moved released;
        spin(kSpin);
    }
    std::map<std::string, double> per = HookPhases::perOp();
    EXPECT_GT(per["adapter_wait_tensor_moved_ns"], 0);
    EXPECT_GT(per["adapter_collective_moved_ns"], 0);
    EXPECT_LT(per["adapter_collective_ns"], per["adapter_collective_moved_ns"]);
}

TEST(HookPhasesOff, AReleaseOutsideAnyTimedCallCountsNothing) {
    HookPhases::enable(true);
    {
        HookPhases::Moved released;  // no adapter call on this thread
        spin(kSpin / 10);
    }
    HookPhases::enable(false);
    {
        HookPhases::Adapter step(AdapterCall::Step);  // timing off: not timed
        HookPhases::Moved released;
    }
    std::map<std::string, double> per = HookPhases::perOp();
    EXPECT_EQ(per["adapter_step_calls"], 0);
    EXPECT_EQ(per["adapter_step_moved_ns"], 0);
}

}  // namespace
