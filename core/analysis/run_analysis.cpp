#include "core/analysis/run_analysis.h"

#include "core/analysis/sequence_compare.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace meshscope {
namespace {

constexpr int64_t kIncidentPage = 20000;
constexpr size_t kEvidenceKept = 5;

std::string joinRanks(const std::vector<int>& ranks) {
    std::string out;
    for (int r : ranks)
        out += (out.empty() ? "" : ",") + std::to_string(r);
    return out;
}

std::string joinRanks(const std::map<int, int64_t>& perRank) {
    std::vector<int> ranks;
    for (const auto& [r, n] : perRank)
        ranks.push_back(r);
    return joinRanks(ranks);
}

// Interned strings of one rank resolved through a per-rank cache of
// innermost frames (stacks are a query each; call sites repeat).
class RankStrings {
  public:
    explicit RankStrings(const RankReader& rank) : m_rank(rank) {}

    const SourceFrame& site(StackId id) {
        auto [it, fresh] = m_sites.try_emplace(id.value());
        if (fresh && id) {
            std::vector<Frame> frames = m_rank.stack(id);
            if (!frames.empty())
                it->second = {m_rank.string(frames[0].file), frames[0].line,
                              m_rank.string(frames[0].function)};
        }
        return it->second;
    }

  private:
    const RankReader& m_rank;
    std::unordered_map<int64_t, SourceFrame> m_sites;
};

bool mustAgreeAcrossRanks(const IncidentRef& ref) {
    return ref.outcome == Outcome::Reconciled &&
           (ref.action == Action::Replicated || ref.action == Action::Scalarized);
}

Verdict verdictOf(const PromotionCheck& check) {
    std::optional<uint64_t> first;
    int withFingerprint = 0;
    for (const auto& [rank, fp] : check.fingerprints) {
        if (!fp) continue;
        if (withFingerprint++ == 0)
            first = fp;
        else if (*fp != *first)
            return Verdict::Invalid;
    }
    return withFingerprint >= 2 ? Verdict::Verified : Verdict::Unverified;
}

void compareOps(const RunReader& run, const AnalysisOptions& options, RunAnalysis& out) {
    if (run.ranks().size() < 2) return;
    std::vector<RankStream> streams;
    int64_t total = 0;
    for (const RankReader& r : run.ranks()) {
        streams.push_back({&r, r.info().rank});
        total += r.summary().ops;
    }
    std::function<void(int64_t)> progress;
    if (options.progress)
        progress = [&](int64_t done) {
            options.progress("comparing ops across ranks", done, total);
        };
    out.opsCompared = compareOpSequences(streams, out.divergences, progress);
    out.opsComparedFully = true;
}

std::string verdictFingerprints(const PromotionCheck& check) {
    std::string out;
    for (const auto& [rank, fp] : check.fingerprints)
        out += fmt::format("{}rank {} {}", out.empty() ? "" : ", ", rank,
                           fp ? fmt::format("{:016x}", *fp) : "-");
    return out;
}

void addFindings(const RunReader& run, RunAnalysis& a) {
    for (const StoreError& p : run.problems())
        a.findings.push_back({FindingKind::Unreadable, p.what(), -1, -1});
    for (int r : a.missingRanks)
        a.findings.push_back(
            {FindingKind::MissingRank,
             fmt::format("rank {}: missing from the run (world size {})", r, a.summary.worldSize),
             -1, r});
    for (const IncidentGroup& g : a.groups) {
        if (g.unreconciled > 0) {
            std::string how;
            for (const auto& [outcome, n] : g.outcomes)
                if (outcome != Outcome::Reconciled)
                    how += fmt::format("{}{} {}", how.empty() ? "" : ", ", n, toString(outcome));
            a.findings.push_back(
                {FindingKind::Unreconciled,
                 fmt::format("{}: {} mixed a plain tensor from {} ({}) with DTensors; {} "
                             "unreconciled ({}) on rank(s) {}",
                             formatLocation(g.site), g.op, originText(g.origin),
                             describeOrigin(g.origin), g.unreconciled, how, joinRanks(g.perRank)),
                 g.id, -1});
        }
        if (g.invalid > 0) {
            const PromotionCheck* first = nullptr;
            for (const PromotionCheck& c : a.promotionChecks)
                if (c.group == g.id && c.verdict == Verdict::Invalid) {
                    first = &c;
                    break;
                }
            a.findings.push_back(
                {FindingKind::Invalid,
                 fmt::format("{}: {}: {} promotion(s) of a plain tensor that differs across "
                             "ranks (first at step {}: {}); the result is silently wrong",
                             formatLocation(g.site), g.op, g.invalid, first ? first->step : -1,
                             first ? verdictFingerprints(*first) : ""),
                 g.id, -1});
        }
    }
    for (const Divergence& d : a.divergences) {
        std::string what = d.kind == Divergence::Kind::Ops
                               ? fmt::format("op #{} on thread {}", d.index, d.thread)
                               : fmt::format("incident #{}", d.index);
        std::string actual = d.actual.empty() ? "nothing more" : d.actual;
        std::string expected = d.expected.empty() ? "nothing more" : d.expected;
        std::string hint = d.actual.empty() && d.kind == Divergence::Kind::Ops
                               ? "; the other ranks will wait for it in their next collective"
                               : "";
        a.findings.push_back(
            {FindingKind::Divergent,
             fmt::format("rank {}: {} (step {}) is {} where rank(s) {} have "
                         "{}{}",
                         d.rank, what, d.step, actual, joinRanks(d.others), expected, hint),
             -1, d.rank});
    }
}

}  // namespace

std::string formatLocation(const SourceFrame& frame) {
    return frame.file.empty() ? "<unknown>" : fmt::format("{}:{}", frame.file, frame.line);
}

std::string_view toString(Verdict verdict) {
    switch (verdict) {
        case Verdict::NotChecked:
            return "not checked";
        case Verdict::Verified:
            return "verified";
        case Verdict::Invalid:
            return "INVALID";
        case Verdict::Unverified:
            return "unverified";
    }
    return "?";
}

namespace {

void describeTensor(const RankReader& rank, const TensorRecord& t, OperandDetail& od) {
    od.dtype = rank.string(t.dtype);
    od.shape = rank.string(t.globalShape);
    od.localShape = rank.string(t.localShape);
    od.device = rank.string(t.device);
    od.label = rank.string(t.label);
    od.numel = t.numel;
}

}  // namespace

std::vector<SourceFrame> resolveStack(const RankReader& rank, StackId stack) {
    std::vector<SourceFrame> frames;
    if (stack)
        for (const Frame& f : rank.stack(stack))
            frames.push_back({rank.string(f.file), f.line, rank.string(f.function)});
    return frames;
}

OperandDetail describeOperand(const RankReader& rank, const OperandRecord& o,
                              std::optional<TensorRecord>* tensorOut) {
    OperandDetail od;
    od.index = o.index;
    od.output = o.role == OperandRole::Output;
    od.scalar = o.kind == OperandKind::Scalar;
    od.scalarValue = o.scalar;
    od.placements = rank.string(o.placements);
    if (o.kind != OperandKind::Tensor || !o.tensor) return od;
    std::optional<TensorRecord> t = rank.tensor(o.tensor);
    if (t) {
        describeTensor(rank, *t, od);
        if (od.placements.empty()) od.placements = rank.string(t->placements);
        od.plain = !t->isDTensor && !od.output;
    }
    if (tensorOut) *tensorOut = t;
    return od;
}

IncidentDetail describeIncident(const RankReader& rank, const IncidentRecord& inc) {
    IncidentDetail d;
    d.rank = rank.info().rank;
    d.seq = inc.seq;
    d.step = inc.step;
    d.op = rank.string(inc.op);
    d.origin = inc.origin;
    d.evidence = rank.string(inc.evidence);
    d.policyRule = rank.string(inc.policyRule);
    d.error = rank.string(inc.error);
    d.promotedPlacements = rank.string(inc.promotedPlacements);
    d.action = inc.action;
    d.outcome = inc.outcome;
    d.fingerprint = inc.fingerprint;
    d.operandIndex = inc.operandIndex;
    d.stack = resolveStack(rank, inc.stack);
    std::optional<MeshId> mesh;
    bool plainSeen = false;
    for (const OperandRecord& o : inc.operands) {
        std::optional<TensorRecord> t;
        OperandDetail od = describeOperand(rank, o, &t);
        if (t && t->isDTensor && !mesh && t->mesh) mesh = t->mesh;
        if (t && o.tensor == inc.plainTensor) {
            od.plain = true;
            plainSeen = true;
            std::vector<SourceFrame> created = resolveStack(rank, t->createdAt);
            if (!created.empty()) d.createdAt = formatLocation(created[0]);
        }
        d.operands.push_back(std::move(od));
    }
    if (!plainSeen && inc.plainTensor) {
        if (auto t = rank.tensor(inc.plainTensor)) {
            OperandDetail od;
            od.index = inc.operandIndex;
            od.plain = true;
            describeTensor(rank, *t, od);
            d.operands.push_back(std::move(od));
        }
    }
    if (mesh) d.mesh = findMesh(rank, *mesh);
    return d;
}

std::optional<MeshRecord> findMesh(const RankReader& rank, MeshId id) {
    for (const MeshRecord& m : rank.meshes())
        if (m.id == id) return m;
    return std::nullopt;
}

RunAnalysis analyze(const RunReader& run, const AnalysisOptions& options) {
    RunAnalysis a;
    a.summary = summarize(run);

    // Ranks the run should have but does not.
    std::set<int> present;
    for (const RankReader& r : run.ranks())
        present.insert(r.info().rank);
    for (int r = 0; r < a.summary.worldSize; ++r)
        if (!present.count(r)) a.missingRanks.push_back(r);

    // Incidents, grouped by (op, origin, call site).
    int64_t totalIncidents = 0;
    for (const auto& r : a.summary.ranks)
        totalIncidents += r.summary.incidents;
    std::map<std::tuple<std::string, char, std::string, int>, int> groupIndex;
    std::vector<std::unordered_set<uint32_t>> evidenceSeen;
    std::map<std::tuple<int, int64_t, int>, size_t> checkIndex;
    std::unordered_map<std::string, uint32_t> evidenceIndex;
    for (const RankReader& rank : run.ranks()) {
        RankStrings strings(rank);
        std::map<std::pair<int, int64_t>, int> occurrences;
        // Interned ids of this rank -> group / evidence index, so a string is
        // resolved once per rank, not once per incident.
        std::map<std::tuple<int64_t, char, int64_t>, int> rankGroups;
        std::unordered_map<int64_t, uint32_t> rankEvidence;
        for (IncidentSeq after;;) {
            std::vector<IncidentRecord> page = rank.incidentsAfter(after, kIncidentPage, false);
            for (const IncidentRecord& inc : page) {
                auto rankKey = std::make_tuple(inc.op.value(), char(inc.origin), inc.stack.value());
                auto known = rankGroups.find(rankKey);
                if (known == rankGroups.end()) {
                    const SourceFrame& site = strings.site(inc.stack);
                    std::string op = rank.string(inc.op);
                    auto key = std::make_tuple(op, char(inc.origin), site.file, site.line);
                    auto [it, fresh] = groupIndex.try_emplace(key, int(a.groups.size()));
                    if (fresh) {
                        IncidentGroup g;
                        g.id = it->second;
                        g.op = op;
                        g.origin = inc.origin;
                        g.site = site;
                        IncidentRecord withOperands = inc;
                        withOperands.operands = rank.incidentOperands(inc.seq);
                        g.example = describeIncident(rank, withOperands);
                        g.fix = suggestFix(inc.origin);
                        a.groups.push_back(std::move(g));
                        evidenceSeen.emplace_back();
                    }
                    known = rankGroups.emplace(rankKey, it->second).first;
                }
                IncidentGroup& g = a.groups[size_t(known->second)];
                IncidentRef ref;
                ref.rank = rank.info().rank;
                ref.seq = inc.seq;
                ref.timeNs = inc.timeNs;
                ref.step = inc.step;
                ref.thread = inc.thread;
                ref.group = g.id;
                ref.occurrence = occurrences[{g.id, inc.step}]++;
                ref.action = inc.action;
                ref.outcome = inc.outcome;
                ref.fingerprint = inc.fingerprint;
                ++g.count;
                ++g.perRank[ref.rank];
                ++g.perStep[inc.step];
                ++g.actions[inc.action];
                ++g.outcomes[inc.outcome];
                if (inc.outcome != Outcome::Reconciled) ++g.unreconciled;
                g.firstStep = g.firstStep < 0 ? inc.step : std::min(g.firstStep, inc.step);
                g.lastStep = std::max(g.lastStep, inc.step);
                auto [ev, newText] = rankEvidence.try_emplace(inc.evidence.value(), 0);
                if (newText) {
                    std::string text = rank.string(inc.evidence);
                    auto [global, added] =
                        evidenceIndex.try_emplace(text, uint32_t(a.evidenceTexts.size()));
                    if (added) a.evidenceTexts.push_back(std::move(text));
                    ev->second = global->second;
                }
                ref.evidence = ev->second;
                if (evidenceSeen[size_t(g.id)].insert(ref.evidence).second) {
                    ++g.distinctEvidence;
                    if (g.evidence.size() < kEvidenceKept)
                        g.evidence.push_back(a.evidenceTexts[ref.evidence]);
                }
                if (mustAgreeAcrossRanks(ref)) {
                    auto [c, added] = checkIndex.try_emplace(
                        std::make_tuple(g.id, inc.step, ref.occurrence), a.promotionChecks.size());
                    if (added) {
                        PromotionCheck check;
                        check.group = g.id;
                        check.step = inc.step;
                        check.occurrence = ref.occurrence;
                        check.action = inc.action;
                        a.promotionChecks.push_back(check);
                    }
                    a.promotionChecks[c->second].fingerprints[ref.rank] = inc.fingerprint;
                }
                a.incidents.push_back(ref);
            }
            if (options.progress)
                options.progress("reading incidents", int64_t(a.incidents.size()), totalIncidents);
            if (int64_t(page.size()) < kIncidentPage) break;
            after = page.back().seq;
        }
    }

    // Verdicts: promotions that must agree across ranks.
    for (PromotionCheck& c : a.promotionChecks)
        c.verdict = verdictOf(c);
    for (IncidentRef& ref : a.incidents) {
        if (!mustAgreeAcrossRanks(ref)) continue;
        const PromotionCheck& c =
            a.promotionChecks[checkIndex.at(std::make_tuple(ref.group, ref.step, ref.occurrence))];
        ref.verdict = c.verdict;
        IncidentGroup& g = a.groups[size_t(ref.group)];
        (c.verdict == Verdict::Invalid    ? g.invalid
         : c.verdict == Verdict::Verified ? g.verified
                                          : g.unverified)++;
    }

    // Incident sequences across ranks (by group).
    if (run.ranks().size() >= 2) {
        std::vector<int> rankIds;
        for (const RankReader& r : run.ranks())
            rankIds.push_back(r.info().rank);
        SequenceComparer incidents(Divergence::Kind::Incidents, 0, rankIds);
        for (const IncidentRef& ref : a.incidents)
            incidents.push(ref.rank, {ref.group, ref.step});
        for (int r : rankIds)
            incidents.setEnded(r);
        auto describe = [&](int64_t g) {
            const IncidentGroup& group = a.groups[size_t(g)];
            return fmt::format("{} at {} (origin {})", group.op, formatLocation(group.site),
                               std::string(1, char(group.origin)));
        };
        auto site = [&](int64_t g) { return a.groups[size_t(g)].site; };
        incidents.compare(describe, a.divergences, site);
    }
    if (options.compareOps) compareOps(run, options, a);

    // Most frequent groups first; ids follow the order.
    std::vector<int> order(a.groups.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = int(i);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
        const auto& gx = a.groups[size_t(x)];
        const auto& gy = a.groups[size_t(y)];
        return std::tuple(gx.invalid, gx.unreconciled, gx.count) >
               std::tuple(gy.invalid, gy.unreconciled, gy.count);
    });
    std::vector<int> newId(order.size());
    std::vector<IncidentGroup> sorted;
    for (size_t i = 0; i < order.size(); ++i) {
        newId[size_t(order[i])] = int(i);
        sorted.push_back(std::move(a.groups[size_t(order[i])]));
        sorted.back().id = int(i);
    }
    a.groups = std::move(sorted);
    for (IncidentRef& ref : a.incidents)
        ref.group = newId[size_t(ref.group)];
    for (PromotionCheck& c : a.promotionChecks)
        c.group = newId[size_t(c.group)];

    addFindings(run, a);
    return a;
}

std::vector<const Finding*> findingsOf(const RunAnalysis& analysis,
                                       const std::vector<FindingKind>& kinds) {
    std::vector<const Finding*> out;
    for (const Finding& f : analysis.findings)
        if (std::find(kinds.begin(), kinds.end(), f.kind) != kinds.end()) out.push_back(&f);
    return out;
}

}  // namespace meshscope
