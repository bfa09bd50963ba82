// Where mixed-tensor fixes go (core/analysis/fix_placement.h): each rule on
// a small source file, and the cases that must stay unplaced.
#include "core/analysis/fix_placement.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace meshscope {
namespace {

namespace fs = std::filesystem;
using How = FixPlace::How;

class FixPlacementTest : public ::testing::Test {
  protected:
    void SetUp() override {
        m_file = (fs::temp_directory_path() /
                  ("fix_placement_" + std::to_string(::getpid()) + "_" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".py"))
                     .string();
    }
    void TearDown() override { fs::remove(m_file); }

    // A source file with `lines` (line 1 first).
    void source(std::initializer_list<std::string_view> lines) {
        std::ofstream out(m_file);
        for (std::string_view l : lines)
            out << l << "\n";
    }
    std::string at(int line) const { return m_file + ":" + std::to_string(line); }

    // A mixed-tensor incident: plain operand `name` at `index`, born at
    // `birthLine` in `birthFunction`, met at `opLine` of `function`.
    IncidentDetail incident(OriginClass origin, std::string name, int birthLine, int opLine,
                            std::string detail, std::string op = "aten::mul.Tensor", int index = 1,
                            std::string function = "f", std::string birthFunction = "f") {
        IncidentDetail d;
        d.kind = IncidentKind::MixedTensor;
        d.op = std::move(op);
        d.origin = origin;
        d.operandIndex = index;
        d.createdAt = at(birthLine);
        d.createdIn = std::move(birthFunction);
        d.stack = {{m_file, opLine, std::move(function)}};
        d.detail = std::move(detail);
        OperandDetail plain;
        plain.index = index;
        plain.plain = true;
        plain.label = std::move(name);
        plain.shape = "[4, 8]";
        OperandDetail dtensor;
        dtensor.index = index == 0 ? 1 : 0;
        dtensor.placements = "[Shard(0)]";
        d.operands = {dtensor, plain};
        return d;
    }
    FixSuggestion place(const IncidentDetail& d) {
        SourceLines lines;
        FixFacts facts;
        facts.name = d.operands[1].label;
        return placeFix(fixForIncident(d.origin, d.evidence, facts), d, lines);
    }

    std::string m_file;
};

TEST_F(FixPlacementTest, StrippedDTensorIsKeptOnTheLineThatStrippedIt) {
    source({"def f(grad):", "    norm = grad.to_local().norm(dim=1)  # here",
            "    return grad / norm"});
    IncidentDetail d = incident(OriginClass::StrippedDTensor, "norm", 2, 3,
                                "at=" + at(3) + "; mesh=grad.device_mesh; dtensor=grad");
    FixSuggestion fix = place(d);
    EXPECT_EQ(fix.place.how, How::Replace);
    EXPECT_EQ(fix.place.line, 2);
    EXPECT_EQ(fix.code, "norm = grad.norm(dim=1)");  // its comment was about the old line

    source({"def f(p):", "    shadow = p.detach().full_tensor()", "    shadow.lerp_(p, 0.1)"});
    fix = place(incident(OriginClass::StrippedDTensor, "shadow", 2, 3, ""));
    EXPECT_EQ(fix.code, "shadow = p.detach().clone()");  // a copy, as full_tensor() made
}

TEST_F(FixPlacementTest, StateMadeFromAShapeBecomesLikeTheDTensor) {
    source({"def step(p):", "    state['buf'] = torch.zeros(p.shape)", "    buf.add_(p.grad)"});
    FixSuggestion fix =
        place(incident(OriginClass::OptimizerState, "buf", 2, 3, "", "aten::add_.Tensor", 0));
    EXPECT_EQ(fix.place.how, How::Replace);
    EXPECT_EQ(fix.code, "state['buf'] = torch.zeros_like(p)");

    source({"def step(lrs):", "    step_size = torch.tensor(lrs)  # per param",
            "    torch._foreach_addcdiv_(ps, ms, ds, step_size)"});
    fix = place(incident(OriginClass::OptimizerState, "step_size", 2, 3, ""));
    EXPECT_EQ(fix.code.substr(0, 16), "step_size = lrs ");
}

TEST_F(FixPlacementTest, PromotedBeforeTheOpSoTheCodeBeforeItStillRunsOnAPlainTensor) {
    // the loop writes into the mask as a plain tensor (DTensor has no
    // strategy for fill_.Tensor): the promotion goes after it, before the op
    source({"def f(x):", "    mask = torch.ones(4, 8)", "    mask[0, 2:] = 0", "    y = x * 2",
            "    return y * mask"});
    FixSuggestion fix = place(
        incident(OriginClass::UserCode, "mask", 2, 5, "at=" + at(5) + "; mesh=mesh; dtensor=y"));
    EXPECT_EQ(fix.place.how, How::Before);
    EXPECT_EQ(fix.place.line, 5);
    EXPECT_EQ(fix.code, "mask = distribute_tensor(mask, mesh, [Replicate()])");
    EXPECT_NE(fixSentence(fix).find("(before " + at(5) + ")"), std::string::npos);

    // an in-place op on a local born under its name here: rebinding it is fine
    source({"def f(x):", "    hits = torch.zeros(4, 8)", "    hits.scatter_(1, x, 1)",
            "    return hits"});
    fix = place(incident(OriginClass::CreatedInForward, "hits", 2, 3,
                         "at=" + at(3) + "; mesh=x.device_mesh; dtensor=x", "aten::scatter_.value",
                         0));
    EXPECT_EQ(fix.place.how, How::Before);
    EXPECT_EQ(fix.code, "hits = DTensor.from_local(hits, x.device_mesh, [Replicate()])");
}

TEST_F(FixPlacementTest, ElsewhereItIsPromotedBeforeTheOpInTheNamesOfThatFrame) {
    source({"def loss(weight, hidden):", "    return hidden @ weight", "", "w = torch.randn(2)"});
    IncidentDetail d = incident(OriginClass::UserCode, "weight", 4, 2,
                                "at=" + at(2) + "; mesh=hidden.device_mesh; dtensor=hidden",
                                "aten::matmul", 1, "loss", "<module>");
    FixSuggestion fix = place(d);
    EXPECT_EQ(fix.place.how, How::Before);
    EXPECT_EQ(fix.place.line, 2);
    EXPECT_EQ(fix.code, "weight = distribute_tensor(weight, hidden.device_mesh, [Replicate()])");

    // copied into a DTensor: distributed as that DTensor is
    d.origin = OriginClass::WeightLoading;
    EXPECT_EQ(place(d).code, "weight = distribute_tensor(weight, hidden.device_mesh, [Shard(0)])");
}

TEST_F(FixPlacementTest, WhatCannotBePlacedSaysWhy) {
    source(
        {"def step(state, grad):", "    left, right = state['GG']", "    left.lerp_(grad, 0.1)"});
    // changed in place and kept in the state: rebinding the name loses the write
    FixSuggestion fix = place(incident(OriginClass::OptimizerState, "left", 2, 3,
                                       "at=" + at(3) + "; mesh=mesh", "aten::lerp_.Scalar", 0));
    EXPECT_EQ(fix.place.how, How::Unplaced);
    EXPECT_NE(fix.place.unplaced.find("changed in place"), std::string::npos);
    EXPECT_EQ(describePlace(fix.place), "");

    // no name for the mesh where it is held
    fix = place(incident(OriginClass::UserCode, "left", 2, 3, "at=" + at(3)));
    EXPECT_NE(fix.place.unplaced.find("no name for the DTensor's mesh"), std::string::npos);
    // a temporary
    fix = place(incident(OriginClass::UserCode, "", 2, 3, "at=" + at(3) + "; mesh=mesh"));
    EXPECT_NE(fix.place.unplaced.find("temporary"), std::string::npos);
    // a source file that is gone: the stripped rule cannot read it
    IncidentDetail gone = incident(OriginClass::StrippedDTensor, "", 2, 3, "");
    gone.createdAt = "/nonexistent/train.py:2";
    EXPECT_EQ(place(gone).place.how, How::Unplaced);
}

TEST_F(FixPlacementTest, AParameterLeftOutOfThePlanGoesAfterThePlanCall) {
    source({"block = parallelize_module(Block(), mesh, plan)", "block(x)"});
    IncidentDetail d = incident(OriginClass::UnshardedParam, "self.gamma", 1, 2, "");
    d.evidence =
        "parameter gamma of Block not in the sharding plan (block.gamma = "
        "nn.Parameter(distribute_tensor(block.gamma, mesh, [Replicate()]))); the plan "
        "is applied at " +
        at(1);
    FixSuggestion fix = place(d);
    EXPECT_EQ(fix.place.how, How::After);
    EXPECT_EQ(fix.place.line, 1);
    EXPECT_EQ(fix.code,
              "block.gamma = nn.Parameter(distribute_tensor(block.gamma, mesh, "
              "[Replicate()]))");
    // no plan call seen: the statement, unplaced
    d.evidence = d.evidence.substr(0, d.evidence.find("; the plan"));
    fix = place(d);
    EXPECT_EQ(fix.place.how, How::Unplaced);
    EXPECT_EQ(fix.code.substr(0, 14), "block.gamma = ");

    // a buffer is distributed where the op meets it; a view of one is not
    d.evidence = "buffer scale of Block not in the sharding plan";
    d.detail = "at=" + at(2) + "; mesh=x.device_mesh";
    d.operands[1].label = "self.scale";
    EXPECT_EQ(place(d).code,
              "self.scale = distribute_tensor(self.scale, x.device_mesh, [Replicate()])  # still "
              "a buffer");
    d.evidence = "a view of buffer k_cache of Attention not in the sharding plan";
    EXPECT_EQ(place(d).place.how, How::Unplaced);
}

TEST(FixNamesTest, ParsesTheAgentsDetail) {
    FixNames n = parseFixNames("at=/a/b:c.py:12; mesh=self.w.device_mesh; dtensor=h");
    EXPECT_EQ(n.file, "/a/b:c.py");
    EXPECT_EQ(n.line, 12);
    EXPECT_EQ(n.mesh, "self.w.device_mesh");
    EXPECT_EQ(n.dtensor, "h");
    EXPECT_EQ(parseFixNames("").file, "");
    EXPECT_EQ(parseFixNames("at=nonsense").line, 0);
}

}  // namespace
}  // namespace meshscope
