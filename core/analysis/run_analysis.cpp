#include "core/analysis/run_analysis.h"

#include "core/analysis/incident_explanation.h"
#include "core/analysis/sequence_compare.h"
#include "core/model/run_clock.h"

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

std::string joinRanks(const std::map<int, int64_t>& perRank) {
    std::vector<int> ranks;
    for (const auto& [r, n] : perRank)
        ranks.push_back(r);
    return formatRankList(ranks);
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

// The ops every rank recorded, as their files count them.
int64_t opsInAll(const RunSummary& summary) {
    int64_t total = 0;
    for (const RankSummaryRow& r : summary.ranks)
        total = saturatingAdd(total, r.summary.ops);
    return total;
}

void compareOps(const RunReader& run, const AnalysisOptions& options, RunAnalysis& out) {
    if (run.ranks().size() < 2) return;
    std::vector<RankStream> streams;
    for (size_t i = 0; i < run.ranks().size(); ++i) {
        const RankReader& r = run.ranks()[i];
        streams.push_back({&r, r.info().rank, &out.reach[i]});
    }
    const int64_t total = opsInAll(out.summary);
    std::function<void(int64_t)> progress;
    if (options.progress)
        progress = [&](int64_t done) {
            options.progress("comparing ops across ranks", done, total);
        };
    out.opsCompared = compareOpSequences(streams, out.divergences, progress);
    out.opsComparedFully = true;
    compareCollectiveSequences(streams, out.divergences);
}

// Fingerprints spelled out one per rank up to this many ranks; past it,
// the ranks are grouped by value.
constexpr size_t kFingerprintsListed = 8;
constexpr size_t kFingerprintGroupsListed = 4;

// "rank 0 1715609f7c746c69, rank 1 ..."; for a larger job the ranks that
// agree, by value: "2 different values on 1024 ranks: ranks 0-511 ...,
// ranks 512-1023 ...".
std::string verdictFingerprints(const PromotionCheck& check) {
    auto text = [](const std::optional<uint64_t>& fp) {
        return fp ? fmt::format("{:016x}", *fp) : std::string("-");
    };
    std::string out;
    if (check.fingerprints.size() <= kFingerprintsListed) {
        for (const auto& [rank, fp] : check.fingerprints)
            out += fmt::format("{}rank {} {}", out.empty() ? "" : ", ", rank, text(fp));
        return out;
    }
    // ranks by value, the values in order of their first rank (the map is by rank)
    std::vector<std::pair<std::optional<uint64_t>, std::vector<int>>> groups;
    std::map<std::optional<uint64_t>, size_t> groupOf;
    for (const auto& [rank, fp] : check.fingerprints) {
        auto [it, fresh] = groupOf.try_emplace(fp, groups.size());
        if (fresh) groups.push_back({fp, {}});
        groups[it->second].second.push_back(rank);
    }
    out = fmt::format("{} different value(s) on {} ranks: ", groups.size(),
                      check.fingerprints.size());
    for (size_t i = 0; i < groups.size() && i < kFingerprintGroupsListed; ++i)
        out += fmt::format("{}rank{} {} {}", i ? ", " : "", groups[i].second.size() > 1 ? "s" : "",
                           formatRankList(groups[i].second), text(groups[i].first));
    if (groups.size() > kFingerprintGroupsListed) {
        size_t ranks = 0;
        for (size_t i = kFingerprintGroupsListed; i < groups.size(); ++i)
            ranks += groups[i].second.size();
        out += fmt::format(" and {} more value(s) on {} rank(s)",
                           groups.size() - kFingerprintGroupsListed, ranks);
    }
    return out;
}

// "; fix: <summary>, e.g. <code>" (no code: the summary alone): how every
// finding ends, so `check` prints a fix for each.
std::string fixText(const FixSuggestion& fix) {
    if (fix.summary.empty()) return {};
    return "; fix: " + fixSentence(fix);
}

// The fix of ranks that departed from each other's op or collective order.
FixSuggestion divergenceFix(const Divergence& d) {
    if (d.kind == Divergence::Kind::Collectives && d.actual.empty())
        return {
            "give every rank the same number of steps and batches, and the same early "
            "exits (drop_last=True, or a DistributedSampler that pads), so every rank "
            "issues every collective",
            ""};
    if (d.kind == Divergence::Kind::Collectives)
        return {
            "issue the same collectives, with the same sizes and in the same order, on "
            "every rank: a collective inside a branch on the rank or on per-rank data "
            "is joined by no other rank",
            ""};
    return {fmt::format("run the same DTensor ops on every rank: DTensor ops issue collectives "
                        "the other ranks must join, so a branch on the rank ({}) must not hold "
                        "them; compute on every rank and print or log on one",
                        d.site.file.empty() ? "a rank-0 log line" : formatLocation(d.site)),
            "value = t.full_tensor()  # on every rank, then print(value) on rank 0 only"};
}

// The finding of a group of failures: what failed where, on which ranks,
// and for collectives where every other rank was.
std::string failureFinding(const IncidentGroup& g, const RunAnalysis& a) {
    const IncidentDetail& e = g.example;
    std::string ranks = joinRanks(g.perRank);
    switch (g.kind) {
        case IncidentKind::NoShardingStrategy: {
            std::string placements;
            for (const OperandDetail& o : e.operands)
                if (!o.output && !o.placements.empty())
                    placements += (placements.empty() ? "" : ", ") + o.placements;
            std::string inner = opWithoutStrategy(e.error, g.op);
            std::string args = e.detail.empty() ? "" : " with " + e.detail;
            return fmt::format(
                "{}: {}{} has no sharding strategy for operands {}; raised {} "
                "time(s) on rank(s) {}{}",
                formatLocation(g.site),
                inner == g.op ? g.op : fmt::format("{} (in {})", inner, g.op), args,
                placements.empty() ? "(not recorded)" : placements, g.count, ranks, fixText(g.fix));
        }
        case IncidentKind::DTensorError:
            return fmt::format(
                "{}: {} raised in DTensor's dispatch: {} ({} time(s) on rank(s) {}){}",
                formatLocation(g.site), g.op,
                e.error.empty() ? "(no error text recorded)" : firstLine(e.error), g.count, ranks,
                fixText(g.fix));
        case IncidentKind::CollectiveError:
        case IncidentKind::CollectiveHang: {
            std::string text =
                fmt::format("{}: rank(s) {} {} {}", formatLocation(g.site), ranks,
                            g.kind == IncidentKind::CollectiveHang ? "waited in" : "failed in",
                            e.evidence.empty() ? g.op : e.evidence);
            if (g.kind == IncidentKind::CollectiveError) text += ": " + firstLine(e.error, 100);
            for (const StopGroup& other :
                 groupStops(a.stops, [&](const RankStop& s) { return !g.perRank.count(s.rank); }))
                text += fmt::format("; rank{} {} {}", other.ranks.size() > 1 ? "(s)" : "",
                                    formatRankList(other.ranks), other.stop->state());
            for (int r : a.missingRanks)
                text += fmt::format("; rank {} left no file", r);
            if (a.missingRankCount > int64_t(a.missingRanks.size()))
                text += fmt::format("; {} more rank(s) left no file",
                                    a.missingRankCount - int64_t(a.missingRanks.size()));
            return text + fixText(g.fix);
        }
        case IncidentKind::PartialRead: {
            bool everyRank = int64_t(g.perRank.size()) >= a.summary.worldSize;
            return fmt::format(
                "{}: {}: each read is that rank's unreduced share, not the value; {} time(s) on "
                "rank(s) {}{}{}",
                formatLocation(g.site), e.evidence, g.count, ranks,
                everyRank ? "" : fmt::format(" only (of {})", a.summary.worldSize), fixText(g.fix));
        }
        case IncidentKind::MixedTensor:
        case IncidentKind::End:
            break;
    }
    return formatLocation(g.site) + ": " + g.op;
}

std::string driftFinding(const ReplicaDrift& d) {
    std::string what = d.module.empty() ? d.placements : d.module + ", " + d.placements;
    std::string equal =
        d.lastEqualStep >= 0 ? fmt::format(", equal at step {}", d.lastEqualStep) : "";
    return fmt::format(
        "{}{}{}: replicas differ across ranks {} from step {} ({} first{}): {}; "
        "the training goes on silently wrong{}",
        d.name, what.empty() ? "" : " (" + what + ")", d.key.empty() ? "" : " [" + d.key + "]",
        formatRankGroups(d.groups), d.firstStep, d.firstRole, equal, d.causeText, fixText(d.fix));
}

void addFindings(const RunReader& run, RunAnalysis& a) {
    const FixSuggestion unreadable{
        "the other ranks' files are read without it; a file cut short by a full disk or a "
        "killed writer keeps what it committed (`meshscope info` on it says how far), one "
        "from a newer meshscope needs that version",
        ""};
    for (const StoreError& p : run.problems())
        a.findings.push_back({FindingKind::Unreadable, p.what() + fixText(unreadable), -1, -1});
    const FixSuggestion missing{
        "a rank that never started under `meshscope record` (or `meshscope.attach()`), or died "
        "before torch.distributed was initialized, writes no file: read that rank's stderr, "
        "and record every rank of the job",
        ""};
    for (int r : a.missingRanks)
        a.findings.push_back({FindingKind::MissingRank,
                              fmt::format("rank {}: missing from the run (world size {}){}", r,
                                          a.summary.worldSize, fixText(missing)),
                              -1, r});
    if (a.missingRankCount > int64_t(a.missingRanks.size()))
        a.findings.push_back(
            {FindingKind::MissingRank,
             fmt::format("ranks after {}: {} more missing from the run (world size {}, {} rank "
                         "file(s) readable){}",
                         a.missingRanks.back(), a.missingRankCount - int64_t(a.missingRanks.size()),
                         a.summary.worldSize, run.ranks().size(), fixText(missing)),
             -1, -1});
    for (const IncidentGroup& g : a.groups) {
        if (g.kind != IncidentKind::MixedTensor) {
            // a Partial turned into a local tensor on every rank is how a
            // reduction by hand starts: recorded, a finding only on some ranks
            bool byHand = g.kind == IncidentKind::PartialRead &&
                          g.example.evidence.starts_with("to_local()") &&
                          int64_t(g.perRank.size()) >= a.summary.worldSize;
            if (!byHand)
                a.findings.push_back({findingKindOf(g.kind), failureFinding(g, a), g.id, -1});
            continue;
        }
        if (g.unreconciled > 0) {
            std::string how;
            for (const auto& [outcome, n] : g.outcomes)
                if (outcome != Outcome::Reconciled)
                    how += fmt::format("{}{} {}", how.empty() ? "" : ", ", n, toString(outcome));
            a.findings.push_back(
                {FindingKind::Unreconciled,
                 fmt::format("{}: {} mixed a plain tensor from {} ({}) with DTensors; {} "
                             "unreconciled ({}) on rank(s) {}{}",
                             formatLocation(g.site), g.op, originText(g.origin),
                             describeOrigin(g.origin), g.unreconciled, how, joinRanks(g.perRank),
                             fixText(g.fix)),
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
                             "ranks (first at step {}: {}); the result is silently wrong{}",
                             formatLocation(g.site), g.op, g.invalid, first ? first->step : -1,
                             first ? verdictFingerprints(*first) : "", fixText(g.fix)),
                 g.id, -1});
        }
    }
    for (const ReplicaDrift& d : a.replicas.drifts)
        a.findings.push_back({FindingKind::Drift, driftFinding(d), -1, -1});
    for (const Divergence& d : a.divergences) {
        std::string what =
            d.kind == Divergence::Kind::Ops ? fmt::format("op #{} on thread {}", d.index, d.thread)
            : d.kind == Divergence::Kind::Collectives ? fmt::format("collective #{}", d.index)
                                                      : fmt::format("incident #{}", d.index);
        std::string actual = d.actual.empty() ? "nothing more" : d.actual;
        std::string expected = d.expected.empty() ? "nothing more" : d.expected;
        std::string hint =
            d.kind != Divergence::Kind::Collectives
                ? (d.actual.empty() && d.kind == Divergence::Kind::Ops
                       ? "; the other ranks will wait for it in their next collective"
                       : "")
            : d.sizeOnly ? "; the same collective with another size: a rank issued one the other "
                           "did not (gloo aborts on the size mismatch; NCCL hangs or reads the "
                           "wrong data)"
            : d.actual.empty()
                ? fmt::format(
                      "; rank(s) {} wait for it in vain (a rank that runs fewer steps or "
                      "batches, or returns early)",
                      formatRankList(d.others))
                : "; each waits for the other in these collectives (a hang, or a gloo/NCCL "
                  "timeout)";
        a.findings.push_back({FindingKind::Divergent,
                              fmt::format("rank {}: {} (step {}) is {} where rank(s) {} have "
                                          "{}{}{}",
                                          d.rank, what, d.step, actual, formatRankList(d.others),
                                          expected, hint, fixText(divergenceFix(d))),
                              -1, d.rank});
    }
}

// The stages of analyze(), in the order it runs them.

// Ranks the run should have but does not (the first kMissingRanksListed).
void listMissingRanks(const RunReader& run, RunAnalysis& a) {
    std::set<int> present;
    for (const RankReader& r : run.ranks())
        present.insert(r.info().rank);
    MissingRanks missing = findMissingRanks(present, a.summary.worldSize, kMissingRanksListed);
    a.missingRanks = std::move(missing.listed);
    a.missingRankCount = missing.count;
}

// Promotions that must agree across ranks, by (group, step, occurrence).
using PromotionIndex = std::map<std::tuple<int, int64_t, int>, size_t>;

// Groups every incident of every rank by (op, origin, call site), keeps each
// group's distinct evidence, and collects the promotions to compare.
class IncidentGrouping {
  public:
    explicit IncidentGrouping(RunAnalysis& a) : m_a(a) {}

    void readRank(const RankReader& rank, const AnalysisOptions& options, int64_t total) {
        RankStrings strings(rank);
        std::map<std::pair<int, int64_t>, int> occurrences;
        // Interned ids of this rank -> group / evidence index, so a string is
        // resolved once per rank, not once per incident.
        std::map<std::tuple<int64_t, char, int64_t, int>, int> rankGroups;
        std::unordered_map<int64_t, uint32_t> rankEvidence;
        for (IncidentSeq after;;) {
            std::vector<IncidentRecord> page = rank.incidentsAfter(after, kIncidentPage, false);
            for (const IncidentRecord& inc : page) {
                IncidentGroup& g = group(rank, strings, inc, rankGroups);
                IncidentRef ref = count(g, rank.info().rank, inc);
                ref.occurrence = occurrences[{g.id, inc.step}]++;
                ref.evidence = evidence(rank, inc, rankEvidence);
                if (m_seen[size_t(g.id)].insert(ref.evidence).second) {
                    ++g.distinctEvidence;
                    if (g.evidence.size() < kEvidenceKept)
                        g.evidence.push_back(m_a.evidenceTexts[ref.evidence]);
                }
                if (mustAgreeAcrossRanks(ref)) addPromotion(ref, inc);
                m_a.incidents.push_back(ref);
            }
            if (options.progress)
                options.progress("reading incidents", int64_t(m_a.incidents.size()), total);
            if (int64_t(page.size()) < kIncidentPage) break;
            after = page.back().seq;
        }
    }

    const PromotionIndex& promotions() const { return m_checks; }

  private:
    IncidentGroup& group(const RankReader& rank, RankStrings& strings, const IncidentRecord& inc,
                         std::map<std::tuple<int64_t, char, int64_t, int>, int>& rankGroups) {
        auto rankKey = std::make_tuple(inc.op.value(), originLetter(inc.origin), inc.stack.value(),
                                       int(inc.kind));
        auto known = rankGroups.find(rankKey);
        if (known != rankGroups.end()) return m_a.groups[size_t(known->second)];
        const SourceFrame& site = strings.site(inc.stack);
        std::string op = rank.string(inc.op);
        auto key =
            std::make_tuple(op, originLetter(inc.origin), site.file, site.line, int(inc.kind));
        auto [it, fresh] = m_groups.try_emplace(key, int(m_a.groups.size()));
        if (fresh) {
            IncidentGroup g;
            g.id = it->second;
            g.kind = inc.kind;
            g.op = op;
            g.origin = inc.origin;
            g.site = site;
            IncidentRecord withOperands = inc;
            withOperands.operands = rank.incidentOperands(inc.seq);
            g.example = describeIncident(rank, withOperands);
            g.fix = suggestFixFor(g.example);
            m_a.groups.push_back(std::move(g));
            m_seen.emplace_back();
        }
        rankGroups.emplace(rankKey, it->second);
        return m_a.groups[size_t(it->second)];
    }

    // The incident counted into its group; its reference (without occurrence
    // and evidence).
    static IncidentRef count(IncidentGroup& g, int rank, const IncidentRecord& inc) {
        IncidentRef ref;
        ref.rank = rank;
        ref.seq = inc.seq;
        ref.timeNs = inc.timeNs;
        ref.step = inc.step;
        ref.thread = inc.thread;
        ref.kind = inc.kind;
        ref.group = g.id;
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
        return ref;
    }

    // Index of the incident's evidence text in RunAnalysis::evidenceTexts.
    uint32_t evidence(const RankReader& rank, const IncidentRecord& inc,
                      std::unordered_map<int64_t, uint32_t>& rankEvidence) {
        auto [ev, newText] = rankEvidence.try_emplace(inc.evidence.value(), 0);
        if (newText) {
            std::string text = rank.string(inc.evidence);
            auto [global, added] = m_evidence.try_emplace(text, uint32_t(m_a.evidenceTexts.size()));
            if (added) m_a.evidenceTexts.push_back(std::move(text));
            ev->second = global->second;
        }
        return ev->second;
    }

    void addPromotion(const IncidentRef& ref, const IncidentRecord& inc) {
        auto [c, added] = m_checks.try_emplace(std::make_tuple(ref.group, inc.step, ref.occurrence),
                                               m_a.promotionChecks.size());
        if (added) {
            PromotionCheck check;
            check.group = ref.group;
            check.step = inc.step;
            check.occurrence = ref.occurrence;
            check.action = inc.action;
            m_a.promotionChecks.push_back(check);
        }
        m_a.promotionChecks[c->second].fingerprints[ref.rank] = inc.fingerprint;
    }

    RunAnalysis& m_a;
    std::map<std::tuple<std::string, char, std::string, int, int>, int> m_groups;
    std::vector<std::unordered_set<uint32_t>> m_seen;  // evidence per group
    std::unordered_map<std::string, uint32_t> m_evidence;
    PromotionIndex m_checks;
};

PromotionIndex groupIncidents(const RunReader& run, const AnalysisOptions& options,
                              RunAnalysis& a) {
    int64_t total = 0;
    for (const auto& r : a.summary.ranks)
        total += r.summary.incidents;
    IncidentGrouping grouping(a);
    for (const RankReader& rank : run.ranks())
        grouping.readRank(rank, options, total);
    return grouping.promotions();
}

// Verdicts: promotions that must agree across ranks, and their groups' counts.
void judgePromotions(const PromotionIndex& checks, RunAnalysis& a) {
    for (PromotionCheck& c : a.promotionChecks)
        c.verdict = verdictOf(c);
    for (IncidentRef& ref : a.incidents) {
        if (!mustAgreeAcrossRanks(ref)) continue;
        const PromotionCheck& c =
            a.promotionChecks[checks.at(std::make_tuple(ref.group, ref.step, ref.occurrence))];
        ref.verdict = c.verdict;
        IncidentGroup& g = a.groups[size_t(ref.group)];
        (c.verdict == Verdict::Invalid    ? g.invalid
         : c.verdict == Verdict::Verified ? g.verified
                                          : g.unverified)++;
    }
    // A plain tensor that differs across ranks: its origin's fix (a
    // from_local(..., [Replicate()])) would keep it different. Per-rank
    // input data whose fix shards it by batch keeps that fix.
    for (IncidentGroup& g : a.groups)
        if (g.invalid > 0 && g.fix.code.find("Shard(") == std::string::npos)
            g.fix = fixForRankDependentData(g.example.evidence, plainOperandName(g.example),
                                            g.example.mesh && g.example.mesh->deviceType != "cpu");
}

// Incident sequences across ranks (by group).
void compareIncidents(const RunReader& run, RunAnalysis& a) {
    if (run.ranks().size() < 2) return;
    std::vector<int> rankIds;
    for (const RankReader& r : run.ranks())
        rankIds.push_back(r.info().rank);
    SequenceComparer incidents(Divergence::Kind::Incidents, 0, rankIds);
    std::map<int, const RecordingReach*> reach;
    for (const RecordingReach& r : a.reach)
        reach[r.rank] = &r;
    for (const IncidentRef& ref : a.incidents) {  // collective ones: where each rank stopped
        const RecordingReach* of = reach[ref.rank];
        if (!isCollectiveKind(ref.kind) && (!of || of->includes(ref.timeNs, ref.step)))
            incidents.push(ref.rank, {ref.group, ref.step, {}, false});
    }
    for (int r : rankIds) {
        incidents.setEnded(r);
        if (reach[r] && reach[r]->truncated) incidents.setTruncated(r);
    }
    auto describe = [&](int64_t g) {
        const IncidentGroup& group = a.groups[size_t(g)];
        if (group.kind != IncidentKind::MixedTensor)
            return fmt::format("{} at {} ({})", group.op, formatLocation(group.site),
                               incidentKindInfo(group.kind).tag);
        return fmt::format("{} at {} (origin {})", group.op, formatLocation(group.site),
                           originText(group.origin));
    };
    auto site = [&](int64_t g) { return a.groups[size_t(g)].site; };
    incidents.compare(describe, a.divergences, site);
}

// Most frequent groups first; ids follow the order.
void orderGroups(RunAnalysis& a) {
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
}

// Where each rank stopped (RankStop).
void findStops(const RunReader& run, RunAnalysis& a) {
    constexpr int64_t kPendingListed = 3;
    for (size_t i = 0; i < run.ranks().size(); ++i) {
        const RankReader& rank = run.ranks()[i];
        const RecordingReach& reach = a.reach[i];
        RankStop s;
        s.rank = rank.info().rank;
        s.closed = rank.info().endedNs.has_value();
        s.end = reach.end;
        s.ended = reach.end == RecordingReach::End::Closed && reach.how == "ended" ? "" : reach.how;
        const auto& meta = rank.info().meta;
        if (auto it = meta.find("exception"); it != meta.end()) s.exception = it->second;
        if (auto it = meta.find("exception.site"); it != meta.end()) {
            // "file:line in function"
            const std::string& site = it->second;
            size_t in = site.rfind(" in "), colon = site.rfind(':', in);
            if (colon != std::string::npos && in != std::string::npos && colon < in) {
                s.exceptionSite.file = site.substr(0, colon);
                s.exceptionSite.line = std::atoi(site.substr(colon + 1, in - colon - 1).c_str());
                s.exceptionSite.function = site.substr(in + 4);
            }
        }
        s.collectives = a.summary.ranks[i].summary.collectives;
        auto siteOf = [&](const CollectiveRecord& c) {
            StackId stack = c.stack;
            if (!stack && c.op) {
                std::vector<OpRecord> op = rank.opsAfter(OpSeq{c.op.value() - 1}, 1);
                if (!op.empty() && op.front().seq == c.op) stack = op.front().stack;
            }
            std::vector<SourceFrame> frames = resolveStack(rank, stack);
            return frames.empty() ? SourceFrame{} : frames.front();
        };
        auto describe = [&](const CollectiveRecord& c, const SourceFrame& site) {
            std::string text = fmt::format("{} on {}", rank.string(c.kind), rank.string(c.group));
            if (!site.file.empty()) text += " at " + formatLocation(site);
            return text + fmt::format(" (step {})", c.step);
        };
        if (std::optional<CollectiveRecord> last =
                rank.lastCollective(CollectiveState::Completed)) {
            s.lastCollectiveNs = last->startNs;
            s.lastCollectiveSite = siteOf(*last);
            s.lastCollective = describe(*last, s.lastCollectiveSite);
        }
        for (const CollectiveRecord& c :
             rank.collectivesIn(CollectiveState::Pending, kPendingListed))
            s.stillPending.push_back(describe(c, siteOf(c)) +
                                     fmt::format(", its collective #{}", c.seq.value() - 1));
        a.stops.push_back(std::move(s));
    }
    // the last collective incident of each rank
    std::map<int, const IncidentRef*> lastIncident;
    for (const IncidentRef& ref : a.incidents)
        if (isCollectiveKind(ref.kind)) lastIncident[ref.rank] = &ref;
    for (RankStop& s : a.stops) {
        auto it = lastIncident.find(s.rank);
        if (it == lastIncident.end()) continue;
        const IncidentRef& ref = *it->second;
        const IncidentGroup& g = a.groups[size_t(ref.group)];
        s.stoppedIn = ref.kind;
        for (const RankReader& rank : run.ranks())
            if (rank.info().rank == s.rank)
                for (const IncidentRecord& inc :
                     rank.incidentsAfter(IncidentSeq{ref.seq.value() - 1}, 1, false))
                    if (inc.seq == ref.seq) {
                        s.pending = rank.string(inc.evidence);
                        s.pendingIndex = inc.operandIndex;
                    }
        if (s.pending.empty()) s.pending = g.op;
        s.pendingSite = g.site;
        s.pendingNs = ref.timeNs;
        // the collective it ended in is named there already
        std::string index = fmt::format(", its collective #{}", s.pendingIndex);
        std::erase_if(s.stillPending, [&](const std::string& p) {
            return s.pendingIndex >= 0 && p.ends_with(index);
        });
    }
}

}  // namespace

std::string RankStop::state() const {
    std::vector<std::string> parts;
    if (!exception.empty())
        parts.push_back("raised " + firstLine(exception, 200) +
                        (exceptionSite.file.empty() ? "" : " at " + formatLocation(exceptionSite)));
    if (stoppedIn) {
        std::string text = fmt::format(
            "{} {}", *stoppedIn == IncidentKind::CollectiveHang ? "waited in" : "failed in",
            pending);
        if (!pendingSite.file.empty() && pending.find(" at ") == std::string::npos)
            text += " at " + formatLocation(pendingSite);
        parts.push_back(std::move(text));
    }
    for (const std::string& p : stillPending)
        parts.push_back("still pending: " + p);
    if (!stoppedIn && exception.empty()) {
        std::string text = closed ? "ended" : "stopped without closing its file";
        if (!ended.empty()) text += " (" + ended + ")";
        parts.push_back(text + fmt::format(" after {} collective(s)", collectives));
    } else if (!ended.empty()) {
        parts.push_back(ended);
    }
    if (!lastCollective.empty())
        parts.push_back("its last completed collective: " + lastCollective);
    std::string text;
    for (const std::string& p : parts)
        text += (text.empty() ? "" : "; ") + p;
    return text;
}

RunAnalysis analyze(const RunReader& run, const AnalysisOptions& options) {
    RunAnalysis a;
    // Each rank's counts are read once, side by side, for all of it.
    std::vector<RankSummary> counted = rankSummaries(run);
    a.reach = recordingReach(run, counted);
    a.summary = summarize(run, std::move(counted));
    listMissingRanks(run, a);
    PromotionIndex promotions = groupIncidents(run, options, a);
    judgePromotions(promotions, a);
    compareIncidents(run, a);
    if (options.compareOps) compareOps(run, options, a);
    if (options.timeBreakdown) {
        TimeBreakdownOptions timing;
        timing.totalOps = opsInAll(a.summary);
        if (options.progress)
            timing.progress = [&](int64_t done, int64_t total) {
                options.progress("timing ops and steps", done, total);
            };
        a.time = computeTimeBreakdown(run, a.incidents, timing);
    }
    orderGroups(a);
    findStops(run, a);
    a.replicas = checkReplicas(run);
    addFindings(run, a);
    return a;
}

std::string formatActions(const IncidentGroup& group) {
    std::string text;
    for (const auto& [action, n] : group.actions)
        text += fmt::format("{}{} {}", text.empty() ? "" : ", ", toString(action), n);
    return text;
}

std::vector<Finding> reconciledFindings(const RunAnalysis& analysis) {
    std::vector<Finding> out;
    for (const IncidentGroup& g : analysis.groups) {
        if (g.kind != IncidentKind::MixedTensor) continue;
        auto reconciled = g.outcomes.find(Outcome::Reconciled);
        if (reconciled == g.outcomes.end() || reconciled->second == 0) continue;
        std::string how = formatActions(g);
        out.push_back({FindingKind::Reconciled,
                       fmt::format("{}: {} mixed a plain tensor from {} ({}) with DTensors; {} "
                                   "reconciled by the policy ({}) on rank(s) {}{}",
                                   formatLocation(g.site), g.op, originText(g.origin),
                                   describeOrigin(g.origin), reconciled->second, how,
                                   joinRanks(g.perRank), fixText(g.fix)),
                       g.id, -1});
    }
    return out;
}

std::vector<const Finding*> findingsOf(const RunAnalysis& analysis,
                                       const std::vector<FindingKind>& kinds) {
    std::vector<const Finding*> out;
    for (const Finding& f : analysis.findings)
        if (std::find(kinds.begin(), kinds.end(), f.kind) != kinds.end()) out.push_back(&f);
    return out;
}

std::vector<StopGroup> groupStops(const std::vector<RankStop>& stops,
                                  const std::function<bool(const RankStop&)>& keep) {
    std::vector<StopGroup> groups;
    std::unordered_map<std::string, size_t> byState;  // kind and state -> group
    for (const RankStop& s : stops) {
        if (keep && !keep(s)) continue;
        std::string key = (s.stoppedIn ? std::to_string(int(*s.stoppedIn)) : "-") + ":" + s.state();
        auto [it, fresh] = byState.try_emplace(std::move(key), groups.size());
        if (fresh) groups.push_back({{}, &s});
        groups[it->second].ranks.push_back(s.rank);
    }
    return groups;
}

}  // namespace meshscope
