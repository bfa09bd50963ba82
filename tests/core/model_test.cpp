// core/model: the vocabulary tables and the run clock.

#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "core/analysis/fix_suggestion.h"
#include "core/model/run_clock.h"
#include "core/model/vocabulary.h"

namespace meshscope {
namespace {

TEST(Vocabulary, EveryOriginLetterRoundTripsThroughItsRow) {
    std::set<std::string_view> names;
    for (const OriginInfo& o : kOrigins) {
        char letter = originLetter(o.origin);
        EXPECT_EQ(originFromChar(letter), o.origin);
        EXPECT_EQ(&originInfo(o.origin), &o);
        EXPECT_EQ(toString(o.origin).substr(0, 3), std::string(1, letter) + ": ");
        EXPECT_TRUE(names.insert(o.sarifName).second) << o.sarifName << " named twice";
    }
    EXPECT_FALSE(originFromChar(char(OriginClass::End)));
    EXPECT_FALSE(originFromChar('a'));
    EXPECT_EQ(originLetterRange(), "A-H");
    EXPECT_EQ(originInfo(OriginClass::End).origin, OriginClass::Unknown) << "out of table";
}

TEST(Vocabulary, FixCodeFillsInTheMeshAndBatchDim) {
    EXPECT_EQ(suggestFix(OriginClass::InputData, "tp_mesh", 1).code,
              "batch = DTensor.from_local(batch, tp_mesh, [Shard(1)])");
    EXPECT_EQ(suggestFix(OriginClass::Unknown).code, "");
    // The user's name for the tensor, when it is one a line of Python can hold.
    EXPECT_EQ(suggestFix(OriginClass::CreatedInForward, "mesh", 0, "self.mask").code,
              "self.mask = DTensor.from_local(self.mask, mesh, [Replicate()])");
    EXPECT_EQ(suggestFix(OriginClass::UserCode, "mesh", 0, "ids").code,
              "ids = distribute_tensor(ids, mesh, [Replicate()])");
    // a module path and container items as Python writes them
    EXPECT_EQ(suggestFix(OriginClass::UserCode, "mesh", 0, "model.layers.3.attn.mask").code,
              "model.layers[3].attn.mask = distribute_tensor(model.layers[3].attn.mask, mesh, "
              "[Replicate()])");
    EXPECT_EQ(suggestFix(OriginClass::WeightLoading, "mesh", 0, "sd['w']").code,
              "param.copy_(distribute_tensor(sd['w'], param.device_mesh, param.placements))");
    // input data on a mesh of model dims only: the same batch on every rank, replicated
    EXPECT_EQ(suggestFix(OriginClass::InputData, "mesh", 0, "input_ids", false).code,
              "input_ids = DTensor.from_local(input_ids, mesh, [Replicate()])");
    EXPECT_FALSE(meshHasBatchDim({"tp"}));
    EXPECT_TRUE(meshHasBatchDim({"dp", "tp"}));
    EXPECT_TRUE(meshHasBatchDim({}));
    // FSDP2: the fully_shard call the evidence names
    EXPECT_EQ(fullyShardFix("gradient of parameter head.weight of Model not in the sharding plan "
                            "(fully_shard(model.head) for its module, or fully_shard(model) for "
                            "the parameters no inner call took)")
                  ->code,
              "fully_shard(model.head)  # then fully_shard(model) for the root");
    EXPECT_FALSE(fullyShardFix("parameter w of M not in the sharding plan (add 'w': ...)"));
    // a Keras variable: the fix is the LayoutMap key, a tuple of the
    // variable's rank on the mesh's model axis, not a torch snippet
    FixFacts kernel{"model.get_layer('d3').kernel", 2, {"batch", "model"}};
    EXPECT_EQ(fixForIncident(OriginClass::UnshardedParam, "parameter ...", kernel).code,
              "layout_map['d3/kernel'] = (None, 'model')  # its 2 dim(s) on the mesh");
    FixFacts bias{"model.get_layer('d2').bias", 1, {"shards"}};
    EXPECT_EQ(fixForIncident(OriginClass::UnshardedParam, "parameter ...", bias).code,
              "layout_map['d2/bias'] = ('shards',)  # its 1 dim(s) on the mesh");
    // a buffer stays a buffer (the origin's Parameter fix would train it)
    FixFacts mask{"model.layers.0.mask", 2, {"tp"}};
    FixSuggestion buffer = fixForIncident(
        OriginClass::UnshardedParam,
        "buffer layers.0.mask of Net not in the sharding plan (no parallelize_module ...)", mask);
    EXPECT_EQ(buffer.code,
              "model.layers[0].mask = distribute_tensor(model.layers[0].mask, mesh, "
              "[Replicate()])  # still a buffer");
    EXPECT_EQ(buffer.code.find("Parameter"), std::string::npos);
    EXPECT_NE(fixForIncident(OriginClass::UnshardedParam, "parameter layers.0.w of Net ...", mask)
                  .code.find("nn.Parameter"),
              std::string::npos);
    EXPECT_EQ(shapeRank("[16, 32]"), 2);
    EXPECT_EQ(shapeRank("[]"), 0);
    EXPECT_EQ(shapeRank("float"), -1);
    EXPECT_EQ(suggestFix(OriginClass::InputData, "mesh", 0, "batch[0]").code,
              "batch[0] = DTensor.from_local(batch[0], mesh, [Shard(0)])");
    for (std::string_view bad : {"lab|el", "x; import os", "1x", "a..b", ".", "a[']", "a[x]",
                                 "a['x']y", "a.", "a[1", "a.3b"})
        EXPECT_EQ(suggestFix(OriginClass::InputData, "mesh", 0, bad).code,
                  "batch = DTensor.from_local(batch, mesh, [Shard(0)])")
            << bad;
    EXPECT_EQ(describeOrigin(OriginClass::StrippedDTensor), "a DTensor stripped to a plain tensor");
}

TEST(Vocabulary, FindingKindsParseByNameAndHaveTheirSarifRule) {
    for (const FindingKindInfo& k : kFindingKinds) {
        EXPECT_EQ(findingKindFromString(k.name), k.kind);
        EXPECT_EQ(toString(k.kind), k.name);
        EXPECT_FALSE(k.meaning.empty());
        // unreconciled incidents have a rule per origin class; reconciled
        // ones and stragglers are findings only for `check --fail-on KIND`
        bool optIn = k.kind == FindingKind::Reconciled || k.kind == FindingKind::Straggler;
        bool ownRule = k.kind != FindingKind::Unreconciled && !optIn;
        EXPECT_EQ(k.sarifRule.empty(), !ownRule) << k.name;
        EXPECT_EQ(k.inAny, !optIn) << k.name;
    }
    EXPECT_FALSE(findingKindFromString("any"));
}

TEST(RunClock, RanksStartAtTheirOriginsDistanceFromTheEarliest) {
    RunClock clock;
    clock.addRank(1, 5'000);
    clock.addRank(0, 2'000);
    EXPECT_EQ(clock.base(), 2'000);
    EXPECT_EQ(clock.offset(0), 0);
    EXPECT_EQ(clock.offset(1), 3'000);
    EXPECT_EQ(clock.offset(7), 0) << "a rank not added";
    EXPECT_EQ(clock.wall(1, 10), 5'010);
}

TEST(RunClock, ExtremeRecordedValuesSaturateInsteadOfOverflowing) {
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    RunClock clock;
    clock.addRank(0, kMin);
    clock.addRank(1, kMax);
    EXPECT_EQ(clock.offset(1), kMax);
    EXPECT_EQ(clock.wall(1, kMax), kMax);
    EXPECT_EQ(clock.wall(0, kMin), kMin);
    EXPECT_EQ(saturatingSub(0, kMin), kMax);
    EXPECT_EQ(saturatingAdd(kMin, -1), kMin);
}

}  // namespace
}  // namespace meshscope
