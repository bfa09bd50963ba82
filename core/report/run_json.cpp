#include "core/report/run_json.h"

#include <map>
#include <set>
#include <variant>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/analysis/run_summary.h"
#include "core/report/report.h"

namespace meshscope {
namespace {

nlohmann::json stackToJson(const RankReader& rank, StackId id) {
    nlohmann::json frames = nlohmann::json::array();
    if (!id) return frames;
    for (const Frame& f : rank.stack(id))
        frames.push_back({{"file", rank.string(f.file)},
                          {"line", f.line},
                          {"function", rank.string(f.function)}});
    return frames;
}

nlohmann::json tensorToJson(const RankReader& rank, TensorId id) {
    auto t = id ? rank.tensor(id) : std::nullopt;
    if (!t) return nullptr;
    return {{"id", t->id.value()},
            {"dtype", rank.string(t->dtype)},
            {"shape", rank.string(t->globalShape)},
            {"local_shape", rank.string(t->localShape)},
            {"device", rank.string(t->device)},
            {"is_dtensor", t->isDTensor},
            {"mesh", t->mesh.value()},
            {"placements", rank.string(t->placements)},
            {"numel", t->numel},
            {"label", rank.string(t->label)}};
}

nlohmann::json operandsToJson(const RankReader& rank, const std::vector<OperandRecord>& ops) {
    nlohmann::json out = nlohmann::json::array();
    for (const OperandRecord& op : ops)
        out.push_back({{"index", op.index},
                       {"role", op.role == OperandRole::Input ? "input" : "output"},
                       {"placements", rank.string(op.placements)},
                       {"tensor", tensorToJson(rank, op.tensor)}});
    return out;
}

nlohmann::json meshesToJson(const RankReader& rank) {
    nlohmann::json out = nlohmann::json::array();
    for (const MeshRecord& m : rank.meshes())
        out.push_back({{"id", m.id.value()},
                       {"device_type", m.deviceType},
                       {"shape", m.shape},
                       {"dim_names", m.dimNames},
                       {"ranks", m.ranks}});
    return out;
}

// What a collective's op says about it: the op's name and its call site
// (the innermost user frame, "file:line"; empty when it has no stack).
struct IssuingOp {
    std::string name, site;
};

// The ops with the given seqs, in one pass over the ops.
std::map<int64_t, IssuingOp> issuingOps(const RankReader& rank, const std::set<int64_t>& seqs) {
    std::map<int64_t, IssuingOp> ops;
    if (seqs.empty()) return ops;
    rank.scanOps(OpSeq{*seqs.begin() - 1}, kNoLimit, [&](const OpRecord& op) {
        if (!seqs.count(op.seq.value())) return;
        IssuingOp& o = ops[op.seq.value()];
        o.name = rank.string(op.name);
        if (!op.stack) return;
        std::vector<Frame> frames = rank.stack(op.stack);
        if (!frames.empty())
            o.site = fmt::format("{}:{}", rank.string(frames.front().file), frames.front().line);
    });
    return ops;
}

// Per kind: count and bytes; where known, the GPU time (device_ns), the
// ops that issued them (ops: name -> count), their call sites (sites:
// "file:line" -> count) and how their lives ended (states: "completed" ->
// count).
nlohmann::json collectivesToJson(const RankReader& rank) {
    std::map<int64_t, int64_t> deviceNs;  // collective seq -> GPU ns
    for (const DeviceTimeRecord& d : rank.deviceTimes())
        if (auto* seq = std::get_if<CollectiveSeq>(&d.subject))
            deviceNs[seq->value()] += d.durationNs;  // a collective NCCL ran in parts
    std::vector<CollectiveRecord> all = rank.collectivesInTimeRange(INT64_MIN, INT64_MAX);
    std::set<int64_t> opSeqs;
    for (const CollectiveRecord& c : all)
        if (c.op) opSeqs.insert(c.op.value());
    std::map<int64_t, IssuingOp> ops = issuingOps(rank, opSeqs);
    auto count = [](nlohmann::json& map, const std::string& key) {
        map[key] = map.is_null() ? 1 : map.value(key, int64_t(0)) + 1;
    };
    nlohmann::json out = nlohmann::json::object();
    for (const CollectiveRecord& c : all) {
        auto& entry = out[rank.string(c.kind)];
        if (entry.is_null()) entry = {{"count", 0}, {"bytes", int64_t(0)}};
        entry["count"] = entry["count"].get<int64_t>() + 1;
        entry["bytes"] = entry["bytes"].get<int64_t>() + c.bytes;
        if (auto it = deviceNs.find(c.seq.value()); it != deviceNs.end())
            entry["device_ns"] = entry.value("device_ns", int64_t(0)) + it->second;
        if (auto it = ops.find(c.op.value()); c.op && it != ops.end()) {
            count(entry["ops"], it->second.name);
            if (!it->second.site.empty()) count(entry["sites"], it->second.site);
        }
        std::string group = rank.string(c.group);
        if (!group.empty()) count(entry["groups"], group);
        count(entry["states"], std::string(toString(c.state)));
        if (!c.op && c.stack) {  // a functional collective: its own call site
            std::vector<Frame> frames = rank.stack(c.stack);
            if (!frames.empty())
                count(entry["sites"],
                      fmt::format("{}:{}", rank.string(frames.front().file), frames.front().line));
        }
    }
    return out;
}

// Ops timed on their GPU: how many, and their summed duration; null if none.
nlohmann::json opDeviceTimesToJson(const RankReader& rank) {
    int64_t count = 0, totalNs = 0;
    for (const DeviceTimeRecord& d : rank.deviceTimes())
        if (std::holds_alternative<OpSeq>(d.subject)) ++count, totalNs += d.durationNs;
    if (count == 0) return nullptr;
    return {{"count", count}, {"total_ns", totalNs}};
}

}  // namespace

nlohmann::json incidentToJson(const RankReader& rank, const IncidentRecord& inc) {
    nlohmann::json j = {{"seq", inc.seq.value()},
                        {"time_ns", inc.timeNs},
                        {"step", inc.step},
                        {"thread", inc.thread},
                        {"kind", toString(inc.kind)},
                        {"op", rank.string(inc.op)},
                        {"operand_index", inc.operandIndex},
                        {"plain_tensor", tensorToJson(rank, inc.plainTensor)},
                        {"origin", originText(inc.origin)},
                        {"evidence", rank.string(inc.evidence)},
                        {"policy_rule", rank.string(inc.policyRule)},
                        {"action", toString(inc.action)},
                        {"outcome", toString(inc.outcome)},
                        {"error", rank.string(inc.error)},
                        {"promoted_placements", rank.string(inc.promotedPlacements)},
                        {"detail", rank.string(inc.detail)},
                        {"stack", stackToJson(rank, inc.stack)},
                        {"operands", operandsToJson(rank, inc.operands)}};
    j["fingerprint"] =
        inc.fingerprint ? nlohmann::json(fmt::format("{:016x}", *inc.fingerprint)) : nullptr;
    j["explanation"] = explanationToJson(explainIncident(describeIncident(rank, inc)));
    return j;
}

nlohmann::json runToJson(const RunReader& run, const RunJsonOptions& options) {
    RunSummary summary = summarize(run);
    nlohmann::json out = summaryToJson(summary);
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankReader& rank : run.ranks()) {
        nlohmann::json r;
        r["rank"] = rank.info().rank;
        r["meta"] = rank.info().meta;
        r["meshes"] = meshesToJson(rank);
        nlohmann::json incidents = nlohmann::json::array();
        for (const IncidentRecord& inc : rank.incidentsAfter(IncidentSeq{}))
            incidents.push_back(incidentToJson(rank, inc));
        r["incidents"] = std::move(incidents);
        nlohmann::json steps = nlohmann::json::array();
        for (const OptimizerStepRecord& s : rank.optimizerSteps())
            steps.push_back({{"step", s.step},
                             {"optimizer", rank.string(s.optimizer)},
                             {"start_ns", s.startNs},
                             {"end_ns", s.endNs},
                             {"params", s.paramCount}});
        r["optimizer_steps"] = std::move(steps);
        r["collectives"] = collectivesToJson(rank);
        if (nlohmann::json gpu = opDeviceTimesToJson(rank); !gpu.is_null())
            r["op_device_times"] = std::move(gpu);
        if (options.opNameCounts) {
            std::map<std::string, int64_t> names;
            std::map<std::string, int64_t> phases;
            for (const OpRecord& op : rank.opsAfter(OpSeq{})) {
                ++names[rank.string(op.name)];
                ++phases[std::string(toString(op.phase))];
            }
            r["op_names"] = names;
            r["op_phases"] = phases;
        }
        ranks.push_back(std::move(r));
    }
    out["rank_details"] = std::move(ranks);
    return out;
}

}  // namespace meshscope
