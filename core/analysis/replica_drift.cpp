#include "core/analysis/replica_drift.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "core/store/run_directory.h"

namespace meshscope {
namespace {

using Gathered = ReplicaGathering::Gathered;

std::vector<std::vector<int>> rankGroups(const std::map<uint64_t, std::vector<int>>& byContent) {
    std::vector<std::vector<int>> groups;
    for (const auto& [fingerprint, ranks] : byContent)
        groups.push_back(ranks);
    for (auto& g : groups)
        std::sort(g.begin(), g.end());
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
        return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
    });
    return groups;
}

void judge(Gathered& g) {
    ReplicaSeries& s = g.series;
    std::sort(s.ranks.begin(), s.ranks.end());
    s.ranks.erase(std::unique(s.ranks.begin(), s.ranks.end()), s.ranks.end());
    for (const auto& [step, byContent] : g.byStep) {
        size_t ranks = 0;
        for (const auto& [fingerprint, r] : byContent)
            ranks += r.size();
        if (ranks < 2) continue;  // nothing to compare with at this step
        bool agrees = byContent.size() == 1;
        s.steps.emplace_back(step, agrees);
        if (agrees && s.firstDiffering < 0) s.lastEqualBefore = step;
        if (!agrees && s.firstDiffering < 0) {
            s.firstDiffering = step;
            s.groups = rankGroups(byContent);
        }
    }
}

// "layers.0.ffn_norm.weight" -> "layers.0.ffn_norm"
std::string modulePath(const std::string& name) {
    size_t dot = name.rfind('.');
    return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

bool looksLikeNorm(const ReplicaDrift& d) {
    std::string text = d.module + " " + d.name;
    std::transform(text.begin(), text.end(), text.begin(), ::tolower);
    return text.find("norm") != std::string::npos;
}

void explain(ReplicaDrift& d) {
    std::string module = modulePath(d.name);
    switch (d.cause) {
        case DriftCause::UnreducedGradient:
            d.causeText =
                "its gradient differs across these ranks while the parameter was still equal: "
                "the gradient comes from different data on each rank (sequence or batch shards) "
                "and is never reduced across them";
            if (looksLikeNorm(d) && !module.empty()) {
                d.causeText += fmt::format("; {} ({}) looks left out of the SequenceParallel plan",
                                           module, d.module.empty() ? "a norm" : d.module);
                d.fix = {
                    fmt::format("parallelize {} with SequenceParallel() on the tensor-parallel "
                                "mesh, so its gradient is reduced across those ranks",
                                module),
                    fmt::format("parallelize_module(model, tp_mesh, {{\"{}\": "
                                "SequenceParallel()}})",
                                module)};
            } else {
                d.causeText +=
                    "; a module left out of the parallelize plan, a gradient all-reduce "
                    "missing, or per-rank inputs declared Replicate()";
                d.fix = {
                    "reduce its gradient across the ranks that hold the replica before the "
                    "optimizer step (sum for sequence shards, average for batch shards), or "
                    "parallelize its module",
                    fmt::format("dist.all_reduce(model.get_parameter(\"{}\").grad, "
                                "group=tp_mesh.get_group())",
                                d.name)};
            }
            break;
        case DriftCause::InitialValues:
            d.causeText =
                "it differs at the first check, before any update could make it differ: the "
                "ranks initialized or loaded it differently";
            d.fix = {
                "initialize it identically on every rank: the same seed on every rank before "
                "the model is built, or a broadcast from one rank",
                fmt::format("dist.broadcast(model.get_parameter(\"{}\").data, src=0)  # or "
                            "torch.manual_seed(seed) on every rank before building the model",
                            d.name)};
            break;
        case DriftCause::RankDependentUpdate:
            d.causeText =
                "it was equal and its gradient equal, then the update made it differ: the "
                "optimizer step depends on the rank (a rank-local norm, learning rate or scale, "
                "a Partial value read as a number), or its gradient differed at steps between "
                "the checks";
            d.fix = {
                "compute every input of the update from values equal on every rank "
                "(full_tensor() of a Partial or sharded value, never one rank's local share)",
                "total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  "
                "# on DTensors: the global norm on every rank"};
            break;
        case DriftCause::StateOnly:
            d.causeText =
                "only its optimizer state differs while the parameter and gradient "
                "agree: the state was loaded or initialized differently";
            d.fix = {"load the same optimizer state on every rank that holds this replica",
                     "optimizer.load_state_dict(state)  # the same state on every rank"};
            break;
    }
}

const ReplicaSeries* role(const std::vector<const ReplicaSeries*>& roles, std::string_view name) {
    for (const ReplicaSeries* s : roles)
        if (s->role == name) return s;
    return nullptr;
}

std::vector<ReplicaDrift> findDrifts(const std::vector<ReplicaSeries>& series) {
    std::map<std::pair<std::string, std::string>, std::vector<const ReplicaSeries*>> byParameter;
    for (const ReplicaSeries& s : series)
        byParameter[{s.name, s.key}].push_back(&s);
    std::vector<ReplicaDrift> drifts;
    for (const auto& [id, roles] : byParameter) {
        const ReplicaSeries* first = nullptr;
        for (const ReplicaSeries* s : roles)
            if (s->firstDiffering >= 0 && (!first || s->firstDiffering < first->firstDiffering))
                first = s;
        if (!first) continue;
        const ReplicaSeries* param = role(roles, "param");
        const ReplicaSeries* grad = role(roles, "grad");
        ReplicaDrift d;
        d.name = id.first;
        d.key = id.second;
        d.module = first->module;
        d.placements = (param ? param : first)->placements;
        d.firstStep = first->firstDiffering;
        int64_t paramFirst = param ? param->firstDiffering : -1;
        int64_t gradFirst = grad ? grad->firstDiffering : -1;
        if (paramFirst >= 0 && param->lastEqualBefore < 0 && !param->steps.empty() &&
            param->steps.front().first == paramFirst) {
            d.cause = DriftCause::InitialValues;
            first = param;
        } else if (gradFirst >= 0 && (paramFirst < 0 || gradFirst < paramFirst)) {
            d.cause = DriftCause::UnreducedGradient;
            first = grad;
        } else if (paramFirst >= 0) {
            d.cause = DriftCause::RankDependentUpdate;
            first = param;
        } else {
            d.cause = DriftCause::StateOnly;
        }
        d.firstStep = first->firstDiffering;
        d.firstRole = first->role;
        d.groups = first->groups;
        d.lastEqualStep = first->lastEqualBefore;
        explain(d);
        drifts.push_back(std::move(d));
    }
    std::sort(drifts.begin(), drifts.end(), [](const ReplicaDrift& a, const ReplicaDrift& b) {
        return std::tie(a.firstStep, a.name, a.key) < std::tie(b.firstStep, b.name, b.key);
    });
    return drifts;
}

}  // namespace

std::string_view toString(DriftCause cause) {
    switch (cause) {
        case DriftCause::UnreducedGradient:
            return "unreduced_gradient";
        case DriftCause::InitialValues:
            return "initial_values";
        case DriftCause::RankDependentUpdate:
            return "rank_dependent_update";
        case DriftCause::StateOnly:
            return "state_only";
    }
    return "";
}

std::string formatRankGroups(const std::vector<std::vector<int>>& groups) {
    std::string text;
    for (const std::vector<int>& g : groups) {
        if (!text.empty()) text += " | ";
        for (size_t i = 0; i < g.size(); ++i)
            text += (i ? "," : "") + std::to_string(g[i]);
    }
    return text;
}

void ReplicaGathering::add(const RankReader& rank, const std::vector<ReplicaRecord>& records) {
    int r = rank.info().rank;
    std::unordered_map<int64_t, std::string> strings;  // this rank's, resolved once
    auto text = [&](StringId id) -> const std::string& {
        auto [it, fresh] = strings.try_emplace(id.value());
        if (fresh && id) it->second = rank.string(id);
        return it->second;
    };
    for (const ReplicaRecord& rec : records) {
        auto [it, fresh] = m_series.try_emplace(
            std::make_tuple(text(rec.name), text(rec.role), text(rec.replicaKey)));
        Gathered& g = it->second;
        if (fresh) {
            g.series.name = std::get<0>(it->first);
            g.series.role = std::get<1>(it->first);
            g.series.key = std::get<2>(it->first);
            g.series.placements = text(rec.placements);
            g.series.module = text(rec.module);
        }
        g.series.ranks.push_back(r);
        g.byStep[rec.step][rec.fingerprint].push_back(r);
        m_steps.insert(rec.step);
    }
}

ReplicaCheck ReplicaGathering::check() const {
    ReplicaCheck check;
    check.steps.assign(m_steps.begin(), m_steps.end());
    for (const auto& [key, gathered] : m_series) {
        Gathered g = gathered;
        judge(g);
        if (g.series.steps.empty()) continue;  // held by one rank only: nothing to compare
        ++check.tensorsCompared;
        check.series.push_back(std::move(g.series));
    }
    std::sort(check.series.begin(), check.series.end(),
              [](const ReplicaSeries& a, const ReplicaSeries& b) {
                  return std::tie(a.name, a.role, a.key) < std::tie(b.name, b.role, b.key);
              });
    check.drifts = findDrifts(check.series);
    return check;
}

ReplicaCheck checkReplicas(const RunReader& run) {
    ReplicaGathering gathering;
    for (const RankReader& rank : run.ranks())
        gathering.add(rank, rank.replicas());
    return gathering.check();
}

ReplicaWatch::ReplicaWatch(std::filesystem::path runDir) : m_runDir(std::move(runDir)) {}
ReplicaWatch::~ReplicaWatch() = default;

std::vector<ReplicaDrift> ReplicaWatch::poll() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(m_runDir, ec)) {
        std::optional<int> rank = rankFromFileName(entry.path());
        if (!rank || m_readers.count(*rank)) continue;
        try {
            m_readers.emplace(*rank, std::make_unique<RankReader>(RankReader::open(entry.path())));
        } catch (const StoreError&) {  // not written far enough yet: next time
        }
    }
    bool grew = false;
    for (auto& [rank, reader] : m_readers) {
        try {
            int64_t& cursor = m_cursor[rank];
            std::vector<ReplicaRecord> fresh;
            for (ReplicaRecord& rec : reader->replicasFrom(cursor)) {
                if (!m_seen[rank].insert({rec.step, rec.name.value(), rec.role.value()}).second)
                    continue;
                cursor = std::max(cursor, rec.step);
                fresh.push_back(std::move(rec));
            }
            grew = grew || !fresh.empty();
            m_gathering.add(*reader, fresh);
        } catch (const StoreError&) {  // a busy or damaged file: read again next time
        }
    }
    std::vector<ReplicaDrift> news;
    if (!grew) return news;
    for (ReplicaDrift& d : m_gathering.check().drifts)
        if (m_reported.insert({d.name, d.key}).second) news.push_back(std::move(d));
    return news;
}

}  // namespace meshscope
