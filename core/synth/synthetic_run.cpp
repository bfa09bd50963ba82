#include "core/synth/synthetic_run.h"

#include <array>
#include <fstream>
#include <random>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>

#include "core/store/run_directory.h"

namespace meshscope {
namespace {

constexpr int64_t kOpsPerLayerForward = 4;   // linear (parent) > mm, add; relu
constexpr int64_t kOpsPerLayerBackward = 3;  // mm, mm, sum
constexpr int64_t kOpsPerStepFixed = 5;      // data, loss sub, loss mean, 2 optimizer foreach

struct Incident {
    const char* op;
    OriginClass origin;
    const char* evidence;
    Action action;
    const char* rule;
    const char* file;
    int line;
    bool rankDependent;  // plain tensor content differs across ranks
};

// One template per origin class, modelled on the developer notes the project started from.
constexpr std::array<Incident, 7> kIncidents = {{
    {"aten::sub.Tensor", OriginClass::InputData, "created by DataLoader batch",
     Action::ShardedFromLocal, "auto: per-rank data -> Shard(0)", "train.py", 58, true},
    {"aten::_foreach_mul_.Tensor", OriginClass::OptimizerState,
     "optimizer Adam hyperparameter beta1 kept as a tensor", Action::Scalarized,
     "auto: optimizer scalar -> Python float", "keras/optimizers/torch_adam.py", 41, false},
    {"aten::index.Tensor", OriginClass::InputData, "created by DataLoader __getitems__",
     Action::ShardedFromLocal, "auto: per-rank data -> Shard(0)", "data.py", 23, true},
    {"aten::add.Tensor", OriginClass::CreatedInForward, "torch.arange position ids in forward",
     Action::Replicated, "auto: identical on every rank -> Replicate()", "model.py", 77, false},
    {"aten::mm", OriginClass::StrippedDTensor, "output of to_local() at model.py:41",
     Action::Replicated, "replicate", "model.py", 44, true},
    {"aten::mul.Tensor", OriginClass::UnshardedParam,
     "parameter lm_head.weight not in the sharding plan", Action::Observed, "observe", "model.py",
     90, false},
    {"aten::copy_", OriginClass::WeightLoading, "inside load_state_dict", Action::StrictError,
     "strict", "checkpoint.py", 12, false},
}};

class RankGenerator {
  public:
    RankGenerator(RankWriter& w, const SyntheticRunSpec& spec, int rank)
        : m_w(w), m_spec(spec), m_rank(rank), m_rng(spec.seed * 7919 + uint64_t(rank)) {
        m_meshId = w.newMeshId();
        MeshRecord mesh{m_meshId, "cpu", {spec.ranks}, {"model"}, {}};
        for (int r = 0; r < spec.ranks; ++r)
            mesh.ranks.push_back(r);
        w.submit(Record{mesh});
        w.submit(Record{MetaRecord{"torch_version", "synthetic"}});
        w.submit(Record{MetaRecord{"backend", "gloo"}});
        w.submit(Record{MetaRecord{"device_type", "cpu"}});
        m_shard = w.intern("[Shard(0)]");
        m_replicate = w.intern("[Replicate()]");
        m_float = w.intern("torch.float32");
        m_cpu = w.intern("cpu");
        m_trainFile = w.intern("train.py");
        m_trainStep = w.intern("train_step");
        for (int l = 0; l < spec.layers; ++l)
            m_weights.push_back(weight(l));
    }

    SyntheticRankTotals run(int64_t steps) {
        for (int64_t s = 0; s < steps; ++s)
            step(s);
        if (m_spec.failures) fail(steps);
        return m_totals;
    }

    // The end of a broken job (SyntheticRunSpec::failures).
    void fail(int64_t s) {
        m_step = s;
        StringId file = m_w.intern("model.py");
        auto failure = [&](IncidentKind kind, const char* op, int line, const std::string& evidence,
                           const std::string& error, const std::string& detail, int32_t index) {
            IncidentRecord r;
            r.kind = kind;
            r.timeNs = advance(1000);
            r.step = s;
            r.thread = 0;
            r.op = m_w.intern(op);
            r.operandIndex = index;
            r.evidence = m_w.intern(evidence);
            r.error = m_w.intern(error);
            r.detail = detail.empty() ? StringId{} : m_w.intern(detail);
            r.stack = m_w.internStack(std::array{Frame{file, line, m_w.intern("forward")},
                                                 Frame{m_trainFile, 100, m_trainStep}});
            if (!isCollectiveKind(kind))
                r.operands = {
                    {0, OperandRole::Input, OperandKind::Tensor, m_weights[0], 0, m_shard},
                    {1, OperandRole::Input, OperandKind::Tensor, m_weights[0], 0, m_shard}};
            m_w.submit(std::move(r));
            ++m_totals.incidents;
        };
        if (m_rank == 0) {
            const char* sdpa = "aten._scaled_dot_product_flash_attention_for_cpu.default";
            failure(IncidentKind::NoShardingStrategy, sdpa, 58, "attention on head-sharded q, k, v",
                    std::string("NotImplementedError: Operator ") + sdpa +
                        " does not have a sharding strategy registered.",
                    "dropout_p=0, is_causal=True", 0);
            failure(IncidentKind::DTensorError, "aten.view.default", 61,
                    "view of a DTensor sharded on dim 0",
                    "RuntimeError: Attempted to flatten sharded dimension 0, but only the "
                    "leftmost dim of a Flatten can be sharded.",
                    "", 0);
        }
        // the collectives the ranks wait in: pending when their recording ended
        std::string kind = m_rank == 0 ? "all_reduce" : "broadcast";
        int line = m_rank == 0 ? 70 : 73;
        CollectiveRecord c;
        c.kind = m_w.intern(kind);
        c.group = m_w.intern("default_pg (" + std::to_string(m_spec.ranks) + " ranks)");
        c.bytes = 16;
        c.startNs = advance(100);
        c.issuedNs = advance(100);
        c.endNs = advance(600'000'000'000);
        c.step = s;
        Frame at{m_w.intern("model.py"), line, m_w.intern("forward")};
        c.stack = m_w.internStack(std::span<const Frame>(&at, 1));
        c.state = CollectiveState::Pending;
        c.error = m_w.intern("its agent detached (the process ended or detach() was called)");
        m_w.submit(std::move(c));
        ++m_totals.collectives;
        std::string pending = fmt::format("{} on default_pg ({} ranks), 16 B, its collective #{}",
                                          kind, m_spec.ranks, m_totals.collectives - 1);
        std::string stacks = fmt::format(
            "Thread 0x7f00 (MainThread), pending {} for 600.0 s:\n"
            "  File \"train.py\", line 100, in train_step\n"
            "  File \"model.py\", line {}, in forward\n"
            "Thread 0x7f01 (pin_memory):\n"
            "  File \"threading.py\", line 327, in wait\n",
            kind, line);
        failure(IncidentKind::CollectiveHang, kind.c_str(), line, pending,
                "pending for 600.0 s (watchdog: MESHSCOPE_WATCHDOG_S=600)", stacks,
                int32_t(m_totals.collectives - 1));
    }

  private:
    TensorId weight(int layer) {
        TensorRecord t{m_w.newTensorId(),
                       m_float,
                       m_w.intern("[256, 256]"),
                       m_w.intern("[" + std::to_string(256 / std::max(1, m_spec.ranks)) + ", 256]"),
                       m_cpu,
                       m_meshId,
                       m_shard,
                       m_w.intern("layers." + std::to_string(layer) + ".weight"),
                       {},
                       65536,
                       true};
        m_w.submit(Record{t});
        return t.id;
    }

    bool straggling() const { return m_rank == m_spec.straggler; }

    int64_t advance(int64_t ns) {
        m_now += ns + int64_t(m_rng() % 200);
        return m_now;
    }

    OpSeq op(const std::string& name, Phase phase, uint32_t thread, uint16_t depth, int64_t start,
             int64_t end, std::vector<OperandRecord> operands = {}, IncidentSeq incident = {}) {
        OpRecord r;
        r.startNs = start;
        r.endNs = end;
        r.thread = thread;
        r.name = m_w.intern(name);
        r.phase = phase;
        r.step = m_step;
        r.depth = depth;
        r.incident = incident;
        r.stack = m_stack;
        r.operands = std::move(operands);
        // Backpressure: a generator outruns any writer, and must never drop.
        if (++m_totals.ops % 65536 == 0) m_w.flushNow();
        return m_w.submit(std::move(r));
    }

    // An op `gap` ns after the last time taken, lasting `length`: its start
    // is taken before its end (as arguments of op() the order is unspecified,
    // and GCC took the end first: every such op had its end before its start).
    OpSeq opAfter(const std::string& name, Phase phase, uint32_t thread, uint16_t depth,
                  int64_t gap, int64_t length) {
        int64_t start = advance(gap);
        return op(name, phase, thread, depth, start, advance(length));
    }

    void step(int64_t s) {
        m_step = s;
        m_stack = m_w.internStack(std::array{Frame{m_trainFile, 100, m_trainStep}});
        int64_t t = advance(2000);
        op("aten::stack", Phase::Data, 0, 0, t,
           advance(5000 + (straggling() ? m_spec.stragglerNs : 0)));
        forward(s);
        t = advance(500);
        op("aten::sub.Tensor", Phase::Forward, 0, 0, t, advance(800));
        opAfter("aten::mean", Phase::Forward, 0, 0, 100, 400);
        backward();
        optimizer(s);
    }

    void forward(int64_t s) {
        for (int l = 0; l < m_spec.layers; ++l) {
            int64_t start = advance(300);
            OperandRecord in{
                0, OperandRole::Input, OperandKind::Tensor, m_weights[size_t(l)], 0, m_shard};
            int64_t mmStart = advance(100);
            op("aten::mm", Phase::Forward, 0, 1, mmStart, advance(20000));
            opAfter("aten::add.Tensor", Phase::Forward, 0, 1, 100, 1500);
            op("aten::linear", Phase::Forward, 0, 0, start, advance(200), {in});
            opAfter("aten::relu", Phase::Forward, 0, 0, 100, 900);
            if (l < m_spec.incidentsPerStep) incident(s, l);
        }
    }

    void incident(int64_t s, int slot) {
        const Incident& tpl = kIncidents[size_t((s * m_spec.incidentsPerStep + slot) % 7)];
        TensorRecord plain{m_w.newTensorId(),
                           m_float,
                           m_w.intern("[32, 256]"),
                           m_w.intern("[32, 256]"),
                           m_cpu,
                           {},
                           {},
                           m_w.intern("batch"),
                           {},
                           8192,
                           false};
        m_w.submit(Record{plain});
        IncidentRecord r;
        r.timeNs = advance(50);
        r.step = s;
        r.op = m_w.intern(tpl.op);
        r.operandIndex = 1;
        r.plainTensor = plain.id;
        r.origin = tpl.origin;
        r.evidence = m_w.intern(tpl.evidence);
        r.policyRule = m_w.intern(tpl.rule);
        r.action = tpl.action;
        bool reconciled = tpl.action != Action::Observed && tpl.action != Action::StrictError;
        r.outcome = reconciled ? Outcome::Reconciled : Outcome::Raised;
        if (!reconciled)
            r.error = m_w.intern(std::string(tpl.op) +
                                 ": got mixed torch.Tensor and DTensor, need to convert all "
                                 "torch.Tensor to DTensor before calling distributed operators!");
        if (reconciled) {
            r.fingerprint = 0x9e3779b97f4a7c15ull * uint64_t(s + 1) +
                            (tpl.rankDependent ? uint64_t(m_rank) : 0);
            r.promotedPlacements = tpl.action == Action::ShardedFromLocal ? m_shard : m_replicate;
        }
        r.stack =
            m_w.internStack(std::array{Frame{m_w.intern(tpl.file), tpl.line, m_w.intern("forward")},
                                       Frame{m_trainFile, 100, m_trainStep}});
        r.operands = {{0, OperandRole::Input, OperandKind::Tensor, m_weights[0], 0, m_shard},
                      {1, OperandRole::Input, OperandKind::Tensor, plain.id, 0, {}}};
        IncidentSeq seq = m_w.submit(std::move(r));
        ++m_totals.incidents;
        if (reconciled) {
            int64_t start = advance(100);
            op(tpl.op, Phase::Forward, 0, 0, start, advance(3000), {}, seq);
        }
    }

    void backward() {
        for (int l = m_spec.layers - 1; l >= 0; --l) {
            opAfter("aten::mm", Phase::Backward, 1, 0, 200, 18000);
            opAfter("aten::mm", Phase::Backward, 1, 0, 100, 18000);
            opAfter("aten::sum.dim_IntList", Phase::Backward, 1, 0, 100, 700);
        }
        CollectiveRecord c;
        c.kind = m_w.intern("all_reduce");
        c.group = m_w.intern("default_pg");
        c.bytes = int64_t(m_spec.layers) * 256 * 256 * 4 / std::max(1, m_spec.ranks);
        c.startNs = advance(100);
        // the others wait here for the straggler's late arrival
        bool waits = m_spec.straggler >= 0 && !straggling();
        c.endNs = advance(40000 + int64_t(m_rng() % 10000) + (waits ? m_spec.stragglerNs : 0));
        c.thread = 1;
        c.step = m_step;
        m_w.submit(std::move(c));
        ++m_totals.collectives;
    }

    void replicas(int64_t s) {
        StringId norm = m_w.intern("RMSNorm"), linear = m_w.intern("Linear");
        StringId replicated = m_w.intern("[Replicate()] on model");
        StringId sharded = m_w.intern("[Shard(dim=0)] on model");
        StringId every = m_w.intern(""), mine = m_w.intern("model=" + std::to_string(m_rank));
        for (int l = 0; l < m_spec.layers; ++l) {
            std::string layer = "layers." + std::to_string(l);
            bool drifting = l == 1;
            auto fingerprint = [&](int role, bool differs) {
                return uint64_t(l) * 1000003 + uint64_t(s) * 101 + uint64_t(role) * 7 +
                       (differs ? uint64_t(m_rank + 1) * 0x9E3779B97F4A7C15ull : 0);
            };
            auto add = [&](const std::string& name, const char* role, StringId key,
                           StringId placements, StringId module, uint64_t fp) {
                m_w.submit(Record{ReplicaRecord{s, m_w.intern(name), m_w.intern(role), key,
                                                placements, module, fp, 64}});
            };
            add(layer + ".norm.weight", "param", every, replicated, norm,
                fingerprint(0, drifting && s >= 2));
            add(layer + ".norm.weight", "grad", every, replicated, norm,
                fingerprint(1, drifting && s >= 1));
            add(layer + ".norm.weight", "state exp_avg", every, replicated, norm,
                fingerprint(2, drifting && s >= 2));
            add(layer + ".w.weight", "param", mine, sharded, linear, fingerprint(3, true));
        }
    }

    void optimizer(int64_t s) {
        int64_t start = advance(100);
        if (m_spec.drift) replicas(s);
        opAfter("aten::_foreach_mul_.Scalar", Phase::Optimizer, 0, 0, 50, 3000);
        opAfter("aten::_foreach_add_.List", Phase::Optimizer, 0, 0, 50, 3000);
        m_w.submit(Record{OptimizerStepRecord{s, m_w.intern("torch.optim.Adam"), start,
                                              advance(100), int64_t(m_spec.layers)}});
        ++m_totals.steps;
    }

    RankWriter& m_w;
    const SyntheticRunSpec& m_spec;
    int m_rank;
    std::mt19937_64 m_rng;
    MeshId m_meshId;
    StringId m_shard, m_replicate, m_float, m_cpu, m_trainFile, m_trainStep;
    std::vector<TensorId> m_weights;
    StackId m_stack;
    int64_t m_now = 0;
    int64_t m_step = 0;
    SyntheticRankTotals m_totals;
};

}  // namespace

int64_t syntheticOpsPerStep(int layers) {
    return kOpsPerStepFixed + int64_t(layers) * (kOpsPerLayerForward + kOpsPerLayerBackward);
}

SyntheticRankTotals writeSyntheticRank(RankWriter& writer, const SyntheticRunSpec& spec, int rank) {
    int64_t steps = spec.steps;
    if (spec.opsPerRank > 0)
        steps = std::max<int64_t>(1, spec.opsPerRank / syntheticOpsPerStep(spec.layers));
    return RankGenerator(writer, spec, rank).run(steps);
}

SyntheticRankTotals writeSyntheticRun(const std::filesystem::path& runDir,
                                      const SyntheticRunSpec& spec) {
    Manifest initial;
    initial.worldSize = spec.ranks;
    initial.command = {"meshscope", "synth"};
    initial.torchVersion = "synthetic";
    SyntheticRankTotals totals;
    for (int rank = 0; rank < spec.ranks; ++rank) {
        auto writer = createRankWriter(runDir, initial, rank);
        auto t = writeSyntheticRank(*writer, spec, rank);
        writer->close();
        totals.ops += t.ops;
        totals.incidents += t.incidents;
        totals.collectives += t.collectives;
        totals.steps = t.steps;
    }
    if (spec.failures) {  // what `meshscope record` notes when it kills hung ranks
        nlohmann::json ends;
        ends["stop_signal"] = "SIGINT";
        for (int rank = 0; rank < spec.ranks; ++rank)
            ends["ranks"].push_back(
                {{"rank", rank},
                 {"pid", 1000 + rank},
                 {"ended", "killed by SIGKILL from meshscope after the 10 s grace"}});
        std::ofstream(runDir / "launch.json") << ends.dump(1) << "\n";
    }
    return totals;
}

}  // namespace meshscope
