// The NCCL profiler plugin as NCCL sees it (dlopen'ed, driven through its
// exported ncclProfiler_v5/_v4 by FakeNccl) and as the capture agent sees it
// (the collective sink below, exported from this executable so the plugin
// finds it with dlsym(RTLD_DEFAULT) the way it finds the real agent's).

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/plugin_abi/collective_sink.h"
#include "tests/plugins/fake_nccl.h"

namespace {

using meshscope::test::FakeNccl;
using namespace meshscope::nccl_abi;

struct Recorded {
    std::string kind;
    MeshscopeCollectiveEvent event;
};

struct Communicator {
    uint64_t hash;
    std::string name;
    int rank, size, nodes;
};

// The agent's side: what the plugin handed over, a clock, an op token.
struct FakeAgent {
    std::mutex mutex;
    std::vector<Recorded> recorded;
    std::vector<Communicator> communicators;
    uint64_t dropped = 0;
    std::atomic<int64_t> clock{1000};  // advances 10 ns per read
    uint64_t generation = 1;           // new for every agent that attaches
};
FakeAgent* g_agent = nullptr;  // null: no agent attached
thread_local uint64_t t_op = 0;

// As the real agent's: each does nothing while no agent is attached.
int64_t now(void*) {
    return g_agent ? g_agent->clock.fetch_add(10) : 0;
}
uint64_t currentOp(void*) {
    return t_op;
}
void communicator(void*, uint64_t hash, const char* name, int32_t rank, int32_t size,
                  int32_t nodes) {
    if (!g_agent) return;
    std::lock_guard lock(g_agent->mutex);
    g_agent->communicators.push_back({hash, name, rank, size, nodes});
}
void record(void*, const MeshscopeCollectiveEvent* e) {
    if (!g_agent) return;
    std::lock_guard lock(g_agent->mutex);
    g_agent->recorded.push_back({e->kind, *e});
}
void dropped(void*, uint64_t total) {
    if (!g_agent) return;
    std::lock_guard lock(g_agent->mutex);
    g_agent->dropped = total;
}
uint64_t generation(void*) {
    return g_agent ? g_agent->generation : 0;
}
MeshscopeCollectiveSink g_sink{MESHSCOPE_COLLECTIVE_SINK_ABI_VERSION,
                               nullptr,
                               now,
                               currentOp,
                               communicator,
                               record,
                               dropped,
                               generation};

}  // namespace

extern "C" __attribute__((visibility("default"))) const MeshscopeCollectiveSink*
meshscope_collective_sink(void) {
    return g_agent ? &g_sink : nullptr;
}

namespace {

class NcclProfiler : public ::testing::Test {
  protected:
    void SetUp() override { g_agent = &m_agent; }
    void TearDown() override { g_agent = nullptr; }
    std::vector<Recorded> recorded() {
        std::lock_guard lock(m_agent.mutex);
        return m_agent.recorded;
    }
    FakeAgent m_agent;
    FakeNccl m_nccl{MESHSCOPE_NCCL_PLUGIN};
};

TEST_F(NcclProfiler, ExportsBothVersionsUnderItsName) {
    EXPECT_STREQ(m_nccl.v5().name, "meshscope");
    ASSERT_NE(m_nccl.v4(), nullptr);
    EXPECT_STREQ(m_nccl.v4()->name, "meshscope");
    for (auto fn :
         {(void*)m_nccl.v5().init, (void*)m_nccl.v5().startEvent, (void*)m_nccl.v5().stopEvent,
          (void*)m_nccl.v5().recordEventState, (void*)m_nccl.v5().finalize})
        EXPECT_NE(fn, nullptr);
}

TEST_F(NcclProfiler, InitActivatesCollectivesAndAnnouncesTheCommunicator) {
    FakeNccl::Comm comm = m_nccl.init(0xABCDEF, 1, 4, "tp group");
    ASSERT_NE(comm.context, nullptr);
    EXPECT_EQ(comm.mask, kCollApi | kP2pApi | kColl | kP2p | kKernelCh);
    ASSERT_EQ(m_agent.communicators.size(), 1u);
    EXPECT_EQ(m_agent.communicators[0].hash, 0xABCDEFu);
    EXPECT_EQ(m_agent.communicators[0].name, "tp group");
    EXPECT_EQ(m_agent.communicators[0].rank, 1);
    EXPECT_EQ(m_agent.communicators[0].size, 4);
    m_nccl.finalize(comm);
}

TEST_F(NcclProfiler, RecordsKindBytesCommunicatorTimesAndTheCallersOp) {
    FakeNccl::Comm comm = m_nccl.init(0xC0FFEE, 1, 4);
    t_op = 77;  // the op running on the thread that calls NCCL
    void* api = m_nccl.apiCall(comm, kCollApi, "AllReduce", 1024, "ncclFloat32");
    t_op = 0;  // the task runs later, on a CUDA callback thread
    void* task = m_nccl.startTask(comm, api, kColl, "AllReduce", 1024, "ncclFloat32", 2);
    m_nccl.stop(task);
    m_nccl.kernelChannel(comm, task, 5'000'000, 5'004'000);
    EXPECT_TRUE(recorded().empty()) << "recorded before its last kernel channel reported";
    m_nccl.kernelChannel(comm, task, 5'001'000, 5'009'000);

    auto all = recorded();
    ASSERT_EQ(all.size(), 1u);
    const MeshscopeCollectiveEvent& e = all[0].event;
    EXPECT_EQ(all[0].kind, "AllReduce");
    EXPECT_EQ(e.bytes, 4096);
    EXPECT_EQ(e.commHash, 0xC0FFEEu);
    EXPECT_EQ(e.commRank, 1);
    EXPECT_EQ(e.commSize, 4);
    EXPECT_EQ(e.opToken, 77u);
    EXPECT_GE(e.hostStartNs, 1000);
    EXPECT_GT(e.hostEndNs, e.hostStartNs);
    EXPECT_EQ(e.deviceStartNs, 5'000'000);
    EXPECT_EQ(e.deviceEndNs, 5'009'000);
    m_nccl.finalize(comm);
}

TEST_F(NcclProfiler, PointToPointIsRecordedAtItsStopWithHostTimesOnly) {
    FakeNccl::Comm comm = m_nccl.init(7, 0, 2);
    void* api = m_nccl.apiCall(comm, kP2pApi, "Send", 10, "ncclInt64");
    void* task = m_nccl.startTask(comm, api, kP2p, "Send", 10, "ncclInt64", 1);
    m_nccl.stop(task);
    auto all = recorded();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].kind, "Send");
    EXPECT_EQ(all[0].event.bytes, 80);
    EXPECT_EQ(all[0].event.deviceStartNs, 0);
    EXPECT_EQ(all[0].event.deviceEndNs, 0);
    m_nccl.stop(task);  // a second stop of a finished task changes nothing
    EXPECT_EQ(recorded().size(), 1u);
    m_nccl.finalize(comm);
}

TEST_F(NcclProfiler, VersionFourTasksTakeTheOpOfTheThreadThatStartsThem) {
    FakeNccl::Comm comm = m_nccl.initV4(9, 0, 2);
    ASSERT_NE(comm.context, nullptr);
    EXPECT_EQ(comm.mask, kColl | kP2p | kKernelCh);
    EventDescrV4 d{};
    d.type = kColl;
    d.coll.func = "Broadcast";
    d.coll.count = 3;
    d.coll.datatype = "ncclFloat16";
    void* task = nullptr;
    t_op = 5;
    m_nccl.v4()->startEvent(comm.context, &task, &d);
    t_op = 0;
    m_nccl.v4()->stopEvent(task);
    auto all = recorded();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].kind, "Broadcast");
    EXPECT_EQ(all[0].event.bytes, 6);
    EXPECT_EQ(all[0].event.opToken, 5u);
    m_nccl.v4()->finalize(comm.context);
}

TEST_F(NcclProfiler, UnknownDatatypeCountsNoBytes) {
    FakeNccl::Comm comm = m_nccl.init(1, 0, 1);
    m_nccl.collective(comm, "AllGather", 100, "Unknown", 1, 10, 20);
    ASSERT_EQ(recorded().size(), 1u);
    EXPECT_EQ(recorded()[0].event.bytes, 0);
    m_nccl.finalize(comm);
}

TEST_F(NcclProfiler, ChannelsThatNeverReportAreRecordedAtFinalize) {
    FakeNccl::Comm comm = m_nccl.init(1, 0, 1);
    void* api = m_nccl.apiCall(comm, kCollApi, "ReduceScatter", 8, "ncclFloat64");
    void* task = m_nccl.startTask(comm, api, kColl, "ReduceScatter", 8, "ncclFloat64", 4);
    m_nccl.stop(task);
    m_nccl.kernelChannel(comm, task, 100, 180);
    m_nccl.kernelChannel(comm, task, 110, 150);
    EXPECT_TRUE(recorded().empty());
    m_nccl.finalize(comm);
    auto all = recorded();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].event.deviceStartNs, 100);
    EXPECT_EQ(all[0].event.deviceEndNs, 180);
}

TEST_F(NcclProfiler, FullPoolDropsAndCountsWithoutDisturbingNccl) {
    setenv("MESHSCOPE_NCCL_PROFILER_SLOTS", "16", 1);
    FakeNccl nccl(MESHSCOPE_NCCL_PLUGIN);      // a fresh plugin: its first init
    FakeNccl::Comm comm = nccl.init(1, 0, 1);  // reads the size
    unsetenv("MESHSCOPE_NCCL_PROFILER_SLOTS");
    std::vector<void*> tasks;
    int nulls = 0;
    for (int i = 0; i < 20; ++i) {
        void* api = nccl.apiCall(comm, kCollApi, "AllReduce", 1, "ncclInt32");
        void* task = nccl.startTask(comm, api, kColl, "AllReduce", 1, "ncclInt32", 1);
        nulls += task == nullptr;
        tasks.push_back(task);
    }
    EXPECT_EQ(nulls, 4);
    EXPECT_EQ(m_agent.dropped, 1u);  // told at the first drop
    for (void* task : tasks) {
        nccl.stop(task);  // NCCL stops only non-null handles; null ones are ignored too
        nccl.kernelChannel(comm, task, 1, 2);
    }
    EXPECT_EQ(recorded().size(), 16u);
    void* api = nccl.apiCall(comm, kCollApi, "AllReduce", 1, "ncclInt32");
    EXPECT_NE(nccl.startTask(comm, api, kColl, "AllReduce", 1, "ncclInt32", 0), nullptr)
        << "slots are free again";
    nccl.finalize(comm);
    EXPECT_EQ(m_agent.dropped, 4u);  // the total, at finalize
    EXPECT_EQ(recorded().size(), 17u);
}

TEST_F(NcclProfiler, StaleAndForeignHandlesAreIgnored) {
    FakeNccl::Comm comm = m_nccl.init(1, 0, 1);
    void* api = m_nccl.apiCall(comm, kCollApi, "AllReduce", 1, "ncclInt32");
    void* task = m_nccl.startTask(comm, api, kColl, "AllReduce", 1, "ncclInt32", 0);
    m_nccl.stop(task);
    ASSERT_EQ(recorded().size(), 1u);
    m_nccl.kernelChannel(comm, task, 1, 2);  // its slot is free: no kernel event for it
    m_nccl.stop(task);
    m_nccl.stop(reinterpret_cast<void*>(uintptr_t(0xDEAD0002)));
    m_nccl.stop(reinterpret_cast<void*>(uintptr_t(2) | uintptr_t(999) << 24));  // wrong generation
    EventStateArgs args{};
    m_nccl.v5().recordEventState(reinterpret_cast<void*>(uintptr_t(0xBEEF0003)), kKernelChStop,
                                 &args);
    EXPECT_EQ(recorded().size(), 1u);
    m_nccl.finalize(comm);
}

// The way NCCL and torch meet a late attach: init_process_group(device_id=)
// creates the world communicator eagerly, meshscope.attach() comes after,
// DeviceMesh splits sub-group communicators after that, and a second
// attach() (another rank file) follows a detach(). In a fresh process, so
// the plugin has not met a sink yet. Exits 0, or the number of the first
// expectation that failed (said on stderr).
int lateAttach() {
    auto fail = [](int code, const char* what) {
        std::fprintf(stderr, "late attach: %s\n", what);
        return code;
    };
    g_agent = nullptr;
    FakeNccl nccl(MESHSCOPE_NCCL_PLUGIN);
    FakeNccl::Comm world = nccl.init(0x1, 0, 2, "world");
    if (!world.context || world.mask == 0) return fail(1, "the early communicator is not followed");
    nccl.collective(world, "AllReduce", 256, "ncclFloat32", 1, 10, 20);  // unattached: lost

    static FakeAgent first;
    g_agent = &first;
    usleep(30'000);  // the plugin asks for the sink again at most every 10 ms
    nccl.collective(world, "AllReduce", 256, "ncclFloat32", 1, 30, 40);
    FakeNccl::Comm split = nccl.init(0x2, 0, 1, "mesh dim tp");
    nccl.collective(split, "AllGather", 64, "ncclFloat32", 1, 50, 60);
    if (first.recorded.size() != 2) return fail(2, "not both collectives after attach recorded");
    if (first.recorded[0].event.commHash != 0x1 || first.recorded[0].event.deviceEndNs != 40)
        return fail(3, "the early communicator's collective is not the one recorded");
    if (first.communicators.size() != 2 || first.communicators[0].name != "world" ||
        first.communicators[1].name != "mesh dim tp")
        return fail(4, "the communicators were not each announced once");

    static FakeAgent second;  // detach(), then attach() into another run
    second.generation = 2;
    g_agent = &second;
    nccl.collective(world, "Broadcast", 16, "ncclFloat32", 1, 70, 80);
    if (second.communicators.size() != 1 || second.communicators[0].hash != 0x1)
        return fail(5, "the next agent did not hear of the communicator in use");
    if (second.recorded.size() != 1) return fail(6, "the next agent did not get the collective");
    nccl.finalize(world);
    nccl.finalize(split);
    return 0;
}

TEST(NcclProfilerAttach, CommunicatorsMadeBeforeAttachAreFollowedAndAnnouncedToEachAgent) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::exit(lateAttach()), testing::ExitedWithCode(0), "");
}

// Runs `body` in a fresh process with the fake libnccl.so.2 of `version`
// loaded, and exits with the number of lines the plugin wrote to stderr,
// plus 100 if it followed a communicator anyway.
int linesWithNccl(const char* version, bool v4) {
    setenv("FAKE_NCCL_VERSION", version, 1);
    if (!dlopen(FAKE_LIBNCCL, RTLD_NOW | RTLD_GLOBAL)) return 200;
    std::FILE* err = std::tmpfile();
    dup2(fileno(err), 2);
    static FakeAgent agent;
    g_agent = &agent;
    FakeNccl nccl(MESHSCOPE_NCCL_PLUGIN);
    FakeNccl::Comm a = v4 ? nccl.initV4(1, 0, 1) : nccl.init(1, 0, 1);
    FakeNccl::Comm b = v4 ? nccl.initV4(2, 0, 1) : nccl.init(2, 0, 1);
    std::fflush(stderr);
    std::rewind(err);
    int lines = 0;
    for (int c; (c = std::fgetc(err)) != EOF;)
        lines += c == '\n';
    return lines + (a.context || b.context ? 100 : 0);
}

TEST(NcclProfilerVersion, NcclBeforeTheV4InterfaceIsToldOnceAndGetsNothing) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::exit(linesWithNccl("22605", true)), testing::ExitedWithCode(1), "");
}

TEST(NcclProfilerVersion, NcclCallingV5BeforeItExistedIsToldOnce) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::exit(linesWithNccl("22704", false)), testing::ExitedWithCode(1), "");
}

TEST(NcclProfilerVersion, TheNcclTorchShipsIsFollowedSilently) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::exit(linesWithNccl("22809", false)), testing::ExitedWithCode(100), "");
}

}  // namespace
