// Replica drift (core/analysis/replica_drift.h): fingerprints of state the
// ranks must hold equal, compared across ranks step by step. Each cause is a
// fixture written through the RankWriter the agent uses; the synthetic run's
// drifting norm goes through `analyze` and its finding.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/analysis/run_analysis.h"
#include "core/store/run_directory.h"
#include "core/synth/synthetic_run.h"
#include "tests/core/test_support.h"

namespace meshscope {
namespace {

// What one rank recorded for one tensor at one step.
struct Sample {
    int rank;
    int64_t step;
    std::string name, role, key;
    uint64_t fingerprint;
};

void writeRun(const std::filesystem::path& dir, int world, const std::vector<Sample>& samples) {
    for (int rank = 0; rank < world; ++rank) {
        Manifest initial;
        initial.runId = "replica-run";
        initial.worldSize = world;
        auto w = createRankWriter(dir, initial, rank);
        for (const Sample& s : samples)
            if (s.rank == rank)
                w->submit(Record{ReplicaRecord{s.step, w->intern(s.name), w->intern(s.role),
                                               w->intern(s.key), w->intern("[Replicate()] on tp"),
                                               w->intern("RMSNorm"), s.fingerprint, 16}});
        w->close();
    }
}

// Every rank records `name`'s param and grad at steps 0..steps-1; `param`
// and `grad` say from which step each rank's content is its own (-1: never).
std::vector<Sample> series(int world, int steps, const std::string& name, int64_t paramFrom,
                           int64_t gradFrom, const std::string& key = "") {
    std::vector<Sample> out;
    for (int r = 0; r < world; ++r)
        for (int64_t s = 0; s < steps; ++s) {
            bool paramOwn = paramFrom >= 0 && s >= paramFrom;
            bool gradOwn = gradFrom >= 0 && s >= gradFrom;
            out.push_back({r, s, name, "param", key, uint64_t(100 + s) + (paramOwn ? r * 7 : 0)});
            out.push_back({r, s, name, "grad", key, uint64_t(900 + s) + (gradOwn ? r * 7 : 0)});
        }
    return out;
}

ReplicaCheck checked(const std::filesystem::path& dir) {
    return checkReplicas(RunReader::open(dir));
}

TEST(ReplicaDrift, AGradientThatDiffersWhileTheParameterAgreesIsAnUnreducedGradient) {
    test::TempDir dir;
    writeRun(dir.path(), 2, series(2, 4, "layers.0.ffn_norm.weight", 1, 0));
    ReplicaCheck c = checked(dir.path());
    EXPECT_EQ(c.steps, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(c.tensorsCompared, 2);
    ASSERT_EQ(c.drifts.size(), 1u);
    const ReplicaDrift& d = c.drifts[0];
    EXPECT_EQ(d.name, "layers.0.ffn_norm.weight");
    EXPECT_EQ(d.cause, DriftCause::UnreducedGradient);
    EXPECT_EQ(d.firstRole, "grad");
    EXPECT_EQ(d.firstStep, 0);
    EXPECT_EQ(d.lastEqualStep, -1);
    EXPECT_EQ(formatRankGroups(d.groups), "0 | 1");
    EXPECT_NE(d.causeText.find("never reduced"), std::string::npos) << d.causeText;
    EXPECT_EQ(d.fix.code,
              "parallelize_module(model, tp_mesh, {\"layers.0.ffn_norm\": SequenceParallel()})");
}

TEST(ReplicaDrift, AParameterThatDiffersAtTheFirstCheckWasInitializedDifferently) {
    test::TempDir dir;
    writeRun(dir.path(), 3, series(3, 3, "head.weight", 0, 0));
    ReplicaCheck c = checked(dir.path());
    ASSERT_EQ(c.drifts.size(), 1u);
    EXPECT_EQ(c.drifts[0].cause, DriftCause::InitialValues);
    EXPECT_EQ(c.drifts[0].firstRole, "param");
    EXPECT_EQ(formatRankGroups(c.drifts[0].groups), "0 | 1 | 2");
    EXPECT_NE(c.drifts[0].fix.code.find("dist.broadcast"), std::string::npos);
}

TEST(ReplicaDrift, AParameterThatDiffersAfterAnUpdateWithEqualGradientsIsARankDependentUpdate) {
    test::TempDir dir;
    writeRun(dir.path(), 2, series(2, 4, "proj.weight", 2, -1));
    ReplicaCheck c = checked(dir.path());
    ASSERT_EQ(c.drifts.size(), 1u);
    const ReplicaDrift& d = c.drifts[0];
    EXPECT_EQ(d.cause, DriftCause::RankDependentUpdate);
    EXPECT_EQ(d.firstStep, 2);
    EXPECT_EQ(d.lastEqualStep, 1);
}

TEST(ReplicaDrift, OnlyRanksWithTheSameReplicaKeyAreCompared) {
    test::TempDir dir;
    // 4 ranks: dp=0 on ranks 0,1 and dp=1 on ranks 2,3 hold different shards;
    // within each, the content agrees
    std::vector<Sample> samples;
    for (int r = 0; r < 4; ++r)
        samples.push_back({r, 0, "w", "param", "dp=" + std::to_string(r / 2), uint64_t(r / 2)});
    // a tensor only one rank holds is not compared at all
    samples.push_back({3, 0, "lonely", "param", "dp=9", 5});
    writeRun(dir.path(), 4, samples);
    ReplicaCheck c = checked(dir.path());
    EXPECT_TRUE(c.drifts.empty());
    EXPECT_EQ(c.tensorsCompared, 2);
    ASSERT_EQ(c.series.size(), 2u);
    EXPECT_EQ(c.series[0].key, "dp=0");
    EXPECT_EQ(c.series[0].ranks, (std::vector<int>{0, 1}));
}

TEST(ReplicaDrift, ARunWithoutTheTableHasNothingToCompare) {
    test::TempDir dir;
    writeRun(dir.path(), 2, {});
    ReplicaCheck c = checked(dir.path());
    EXPECT_TRUE(c.series.empty());
    EXPECT_TRUE(c.drifts.empty());
}

TEST(ReplicaDrift, TheSyntheticDriftIsAFindingWithItsCauseAndFix) {
    test::TempDir dir;
    SyntheticRunSpec spec;
    spec.steps = 4;
    spec.drift = true;
    writeSyntheticRun(dir.path(), spec);
    RunAnalysis a = analyze(RunReader::open(dir.path()));
    ASSERT_EQ(a.replicas.drifts.size(), 1u);
    EXPECT_EQ(a.replicas.drifts[0].name, "layers.1.norm.weight");
    auto found = findingsOf(a, {FindingKind::Drift});
    ASSERT_EQ(found.size(), 1u);
    const std::string& m = found[0]->message;
    EXPECT_NE(m.find("layers.1.norm.weight (RMSNorm, [Replicate()] on model): replicas differ "
                     "across ranks 0 | 1 from step 1 (grad first, equal at step 0)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("SequenceParallel()"), std::string::npos) << m;
    // the sharded weights hold one rank each: compared nowhere, never a finding
    for (const ReplicaSeries& s : a.replicas.series)
        EXPECT_EQ(s.name.find(".w.weight"), std::string::npos) << s.name;
}

TEST(RankDependentData, ARandomTensorComesFromTheMeshRngElseABroadcast) {
    std::string_view made = "created by aten::rand inside NoisyLayer.forward at layer.py:12";
    FixSuggestion gpu = fixForRankDependentData(made, "noise", /*meshRng=*/true);
    EXPECT_EQ(gpu.code.substr(0, gpu.code.find("  #")),
              "noise = torch.distributed.tensor.rand(noise.shape, device_mesh=mesh, "
              "placements=[torch.distributed.tensor.Replicate()]).to_local()");
    FixSuggestion normal =
        fixForRankDependentData("created by aten::randn inside forward at m.py:3", "z", true);
    EXPECT_NE(normal.code.find("torch.distributed.tensor.randn(z.shape"), std::string::npos);
    // a CPU mesh: DTensor's RNG tracker does not serve it
    FixSuggestion cpu = fixForRankDependentData(made, "noise", false);
    EXPECT_EQ(cpu.code.substr(0, cpu.code.find("  #")), "dist.broadcast(noise, src=0)");
    // derived from random values (a 0/1 mask): regenerating it would change its meaning
    FixSuggestion derived = fixForRankDependentData(
        "derived from a tensor created by aten::rand inside forward at m.py:3", "mask", true);
    EXPECT_EQ(derived.code.substr(0, derived.code.find("  #")), "dist.broadcast(mask, src=0)");
    // randint is not rand; unnamed tensors get a placeholder
    FixSuggestion ints = fixForRankDependentData("created by aten::randint at m.py:3", "", true);
    EXPECT_EQ(ints.code.substr(0, ints.code.find("  #")), "dist.broadcast(t, src=0)");
    for (const FixSuggestion* f : {&gpu, &normal, &cpu, &derived, &ints})
        EXPECT_EQ(f->code.find("from_local"), std::string::npos) << f->code;
}

}  // namespace
}  // namespace meshscope
