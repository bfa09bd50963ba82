#include "core/analysis/time_breakdown.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "core/analysis/run_analysis.h"
#include "core/model/run_clock.h"
#include "core/util/parallel.h"

namespace meshscope {
namespace {

constexpr int64_t kOpPage = 65536;
constexpr int64_t kCollectivePage = 16384;
// Ranks read side by side in one batch (their figures are held until the
// batch is taken into the tables in rank order).
constexpr size_t kRanksSideBySide = 32;

// The lower median: of two ranks, the faster one is the typical one.
int64_t median(std::vector<int64_t> values) {
    if (values.empty()) return 0;
    auto mid = values.begin() + std::ptrdiff_t((values.size() - 1) / 2);
    std::nth_element(values.begin(), mid, values.end());
    return *mid;
}

// Time covered by intervals, each clipped to [lo, hi).
int64_t coveredNs(std::vector<std::pair<int64_t, int64_t>>& spans, int64_t lo, int64_t hi) {
    std::sort(spans.begin(), spans.end());
    int64_t covered = 0, reach = lo;
    for (auto [a, b] : spans) {
        a = std::max(a, reach);
        b = std::min(b, hi);
        if (b <= a) continue;
        covered = saturatingAdd(covered, b - a);
        reach = b;
    }
    return covered;
}

// One op name's statistics across ranks, keyed by its text.
struct OpAccumulator {
    OpStat stat;
    std::map<std::string, int64_t> placements;  // signature -> calls
    int lastRank = -1;
};

// One op name's (or collective kind's) figures on one rank.
struct NameEntry {
    int64_t count = 0, totalNs = 0, maxNs = 0, bytes = 0;
    std::unordered_map<uint64_t, std::pair<std::string, int64_t>> signatures;
};
// A rank's figures by (collective, name), its names read from its file.
using RankNames = std::vector<std::pair<std::pair<bool, std::string>, NameEntry>>;

// Merges one rank's figures into the run-wide table by name.
void mergeRank(std::map<std::pair<bool, std::string>, OpAccumulator>& ops, int rank,
               RankNames& names) {
    for (auto& [key, e] : names) {
        OpAccumulator& acc = ops[key];
        acc.stat.collective = key.first;
        acc.stat.count += e.count;
        acc.stat.totalNs = saturatingAdd(acc.stat.totalNs, e.totalNs);
        acc.stat.maxNs = std::max(acc.stat.maxNs, e.maxNs);
        acc.stat.bytes = saturatingAdd(acc.stat.bytes, e.bytes);
        if (acc.lastRank != rank) ++acc.stat.ranks, acc.lastRank = rank;
        for (auto& [id, sig] : e.signatures)
            acc.placements[sig.first] += sig.second;
    }
}

// What one rank reads for the run-wide tables: the figures of its ops and
// collectives by name, and its steps. It uses only its own reader, so ranks
// can be read side by side.
class RankPass {
  public:
    explicit RankPass(const RankReader& reader) : m_reader(reader) {}

    // Reads the rank's ops (statistics, step bounds) and collectives;
    // `onPage(ops)` after each page of ops, and the reading stops where it
    // returns false.
    void read(const std::function<bool(int64_t)>& onPage) {
        for (OpSeq after{};;) {
            int64_t count = 0;
            after = m_reader.scanOps(
                after, kOpPage,
                [&](const OpRecord& op) {
                    ++count;
                    addOp(op);
                },
                true);
            if (!onPage(count)) return;
            if (count < kOpPage) break;
        }
        for (CollectiveSeq after{};;) {
            std::vector<CollectiveRecord> page = m_reader.collectivesAfter(after, kCollectivePage);
            for (const CollectiveRecord& c : page)
                addCollective(c);
            if (int64_t(page.size()) < kCollectivePage) break;
            after = page.back().seq;
        }
    }

    // The figures by name, the names read from the rank's file (once per
    // name); the pass holds none of them after.
    RankNames names() {
        RankNames out;
        auto take = [&](auto& byId, bool collective) {
            for (auto& [id, e] : byId)
                out.emplace_back(std::pair(collective, m_reader.string(StringId{id})),
                                 std::move(e));
            byId.clear();
        };
        take(m_opNames, false);
        take(m_collectiveKinds, true);
        return out;
    }

    // The rank's steps: [begin, end) and the time with a collective in flight.
    struct Step {
        int64_t step = 0;
        int64_t wallNs = 0;
        int64_t collectiveNs = 0;
    };
    std::vector<Step> steps() {
        std::vector<Step> out;
        std::vector<OptimizerStepRecord> optimizer = m_reader.optimizerSteps();
        std::map<int64_t, int64_t> endOf;  // step -> end of its last optimizer.step()
        for (const OptimizerStepRecord& o : optimizer)
            if (o.step >= 0) endOf[o.step] = std::max(endOf[o.step], o.endNs);
        for (const auto& [step, end] : endOf) {
            auto previous = endOf.find(step - 1);
            int64_t begin = 0;
            if (previous != endOf.end()) {
                begin = previous->second;
            } else {
                // the first step starts with its training (its first data,
                // forward or backward op), not with the set-up before it
                std::optional<int64_t> first;
                if (auto t = m_trainingFrom.find(step); t != m_trainingFrom.end())
                    first = t->second;
                else if (auto f = m_firstOf.find(step); f != m_firstOf.end())
                    first = f->second;
                begin = first ? std::min(*first, end) : end;
            }
            auto spans = m_collectives.find(step);
            int64_t inFlight = 0;
            if (spans != m_collectives.end()) inFlight = coveredNs(spans->second, begin, end);
            out.push_back({step, std::max<int64_t>(0, saturatingSub(end, begin)), inFlight});
        }
        return out;
    }

  private:
    static void earliest(std::map<int64_t, int64_t>& first, int64_t step, int64_t t) {
        auto [it, fresh] = first.try_emplace(step, t);
        if (!fresh) it->second = std::min(it->second, t);
    }

    static void count(NameEntry& e, int64_t startNs, int64_t endNs) {
        int64_t ns = std::max<int64_t>(0, saturatingSub(endNs, startNs));
        ++e.count;
        e.totalNs = saturatingAdd(e.totalNs, ns);
        e.maxNs = std::max(e.maxNs, ns);
    }

    void addOp(const OpRecord& op) {
        // ops come in seq order, a step's together: its first op (and its
        // first training op) is met when the step changes
        if (op.step >= 0 && op.step != m_opStep) {
            m_opStep = op.step;
            earliest(m_firstOf, op.step, op.startNs);
        }
        bool training =
            op.phase == Phase::Data || op.phase == Phase::Forward || op.phase == Phase::Backward;
        if (op.step >= 0 && training && op.step != m_trainingStep) {
            m_trainingStep = op.step;
            earliest(m_trainingFrom, op.step, op.startNs);
        }
        NameEntry& e = m_opNames[op.name.value()];
        count(e, op.startNs, op.endNs);
        // the placements of its tensor inputs, by their interned ids
        uint64_t key = 1469598103934665603ull;
        bool any = false;
        for (const OperandRecord& o : op.operands) {
            if (o.role != OperandRole::Input || o.kind != OperandKind::Tensor) continue;
            key = (key ^ uint64_t(o.placements.value() + 1)) * 1099511628211ull;
            any = true;
        }
        if (!any) return;
        auto [sig, fresh] = e.signatures.try_emplace(key);
        if (fresh) sig->second.first = signature(op);
        ++sig->second.second;
    }

    std::string signature(const OpRecord& op) const {
        std::string text;
        for (const OperandRecord& o : op.operands) {
            if (o.role != OperandRole::Input || o.kind != OperandKind::Tensor) continue;
            if (!text.empty()) text += " x ";
            text += o.placements ? m_reader.string(o.placements) : "plain";
        }
        return text;
    }

    void addCollective(const CollectiveRecord& c) {
        if (c.step >= 0 && c.endNs > c.startNs) {
            m_collectives[c.step].emplace_back(c.startNs, c.endNs);
            earliest(m_firstOf, c.step, c.startNs);
        }
        NameEntry& e = m_collectiveKinds[c.kind.value()];
        count(e, c.startNs, c.endNs);
        e.bytes = saturatingAdd(e.bytes, c.bytes);
    }

    const RankReader& m_reader;
    std::unordered_map<int64_t, NameEntry> m_opNames, m_collectiveKinds;
    std::map<int64_t, int64_t> m_firstOf;        // step -> its first record's start
    std::map<int64_t, int64_t> m_trainingFrom;   // step -> its first data/forward/backward op
    int64_t m_opStep = -1, m_trainingStep = -1;  // the steps last seen
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> m_collectives;
};

// Per step across ranks: who was the slowest, and the sum to compare with.
struct StepAcross {
    int64_t maxOutside = -1;
    int rank = -1;
    int64_t sumOutside = 0;
    int ranks = 0;
};

}  // namespace

TimeBreakdown computeTimeBreakdown(const RunReader& run, const std::vector<IncidentRef>& incidents,
                                   const TimeBreakdownOptions& options) {
    TimeBreakdown out;
    out.computed = true;
    // The step range across ranks decides the columns (steps are numbers a
    // file declares: nothing here is sized by them).
    // (Each rank's optimizer steps are read again in its pass: holding them
    // for every rank would size memory by ranks x steps.)
    int64_t firstStep = INT64_MAX, lastStep = -1;
    int64_t totalOps = std::max<int64_t>(options.totalOps, 0);  // counted below when -1
    const std::vector<RankReader>& readers = run.ranks();
    std::vector<std::pair<int64_t, int64_t>> stepRange(readers.size(), {INT64_MAX, -1});
    forEachInParallel(readers.size(), [&](size_t i) {
        for (const OptimizerStepRecord& o : readers[i].optimizerSteps()) {
            if (o.step < 0) continue;
            stepRange[i].first = std::min(stepRange[i].first, o.step);
            stepRange[i].second = std::max(stepRange[i].second, o.step);
        }
    });
    for (size_t i = 0; i < readers.size(); ++i) {
        firstStep = std::min(firstStep, stepRange[i].first);
        lastStep = std::max(lastStep, stepRange[i].second);
        if (options.totalOps < 0) totalOps = saturatingAdd(totalOps, readers[i].summary().ops);
    }
    if (lastStep >= 0) {
        // in unsigned arithmetic: a damaged file may span the whole int64 range
        uint64_t span = uint64_t(lastStep) - uint64_t(firstStep) + 1;
        out.stepsPerColumn =
            int64_t(std::max<uint64_t>(1, (span + kMaxStepColumns - 1) / kMaxStepColumns));
        for (uint64_t s = 0; s < span; s += uint64_t(out.stepsPerColumn))
            out.columns.push_back(
                {firstStep + int64_t(s),
                 firstStep + int64_t(std::min(span - 1, s + uint64_t(out.stepsPerColumn) - 1))});
    }
    auto inRange = [&](int64_t step) { return step >= firstStep && step <= lastStep; };
    auto columnOf = [&](int64_t step) {
        return size_t((uint64_t(step) - uint64_t(firstStep)) / uint64_t(out.stepsPerColumn));
    };

    std::map<int, std::map<int64_t, int64_t>> incidentsAt;  // rank -> step -> incidents
    for (const IncidentRef& ref : incidents)
        ++incidentsAt[ref.rank][ref.step];

    std::map<std::pair<bool, std::string>, OpAccumulator> ops;
    std::map<int64_t, StepAcross> across;
    // What one rank read, its steps in the overview's cells and across ranks.
    auto takeRank = [&](int rank, const std::vector<RankPass::Step>& steps) {
        RankSteps row;
        row.rank = rank;
        row.cells.resize(out.columns.size());
        std::vector<int64_t> wall, outside, inFlight;
        for (const auto& s : steps) {
            if (!inRange(s.step)) continue;
            StepCell& cell = row.cells[columnOf(s.step)];
            ++cell.steps;
            cell.wallNs = saturatingAdd(cell.wallNs, s.wallNs);
            cell.collectiveNs = saturatingAdd(cell.collectiveNs, s.collectiveNs);
            int64_t own = s.wallNs - s.collectiveNs;
            wall.push_back(s.wallNs);
            outside.push_back(own);
            inFlight.push_back(s.collectiveNs);
            StepAcross& a = across[s.step];
            if (own > a.maxOutside) a.maxOutside = own, a.rank = row.rank;
            a.sumOutside = saturatingAdd(a.sumOutside, own);
            ++a.ranks;
        }
        for (const auto& [step, n] : incidentsAt[row.rank]) {
            row.incidents += n;
            if (inRange(step)) row.cells[columnOf(step)].incidents += n;
        }
        row.steps = int64_t(wall.size());
        row.medianStepNs = median(wall);
        row.medianOutsideNs = median(outside);
        row.medianCollectiveNs = median(inFlight);
        out.ranks.push_back(std::move(row));
    };
    // Ranks are read side by side, a batch at a time, and taken into the
    // tables in rank order: the same figures as one rank after another, with
    // what is held bounded by the batch. Progress is told on the calling
    // thread only (a caller's callback may throw to cancel; the reading then
    // stops at the next page of every rank).
    std::atomic<int64_t> opsRead{0};
    std::atomic<bool> stop{false};
    const std::thread::id caller = std::this_thread::get_id();
    struct Read {
        RankNames names;
        std::vector<RankPass::Step> steps;
    };
    std::vector<Read> batch;
    for (size_t first = 0; first < readers.size(); first += kRanksSideBySide) {
        const size_t size = std::min(kRanksSideBySide, readers.size() - first);
        batch.assign(size, {});
        forEachInParallel(size, [&](size_t k) {
            const RankReader& reader = readers[first + k];
            try {
                RankPass pass(reader);
                pass.read([&](int64_t page) {
                    int64_t done = opsRead += page;
                    if (stop.load(std::memory_order_relaxed)) return false;
                    if (options.progress && std::this_thread::get_id() == caller)
                        options.progress(done, totalOps);
                    return true;
                });
                batch[k] = {pass.names(), pass.steps()};
                reader.releaseMemory();
            } catch (...) {
                stop = true;  // the ranks being read end at their next page
                throw;
            }
        });
        for (size_t k = 0; k < size; ++k) {
            int rank = readers[first + k].info().rank;
            mergeRank(ops, rank, batch[k].names);
            takeRank(rank, batch[k].steps);
        }
    }

    // The slowest rank of each step that two ranks or more recorded.
    std::map<int, size_t> rowOf;
    for (size_t i = 0; i < out.ranks.size(); ++i)
        rowOf[out.ranks[i].rank] = i;
    for (const auto& [step, a] : across) {
        if (a.ranks < 2) continue;
        int64_t others = (a.sumOutside - a.maxOutside) / (a.ranks - 1);
        out.slowest.push_back({step, a.rank, a.maxOutside, others, a.ranks});
        RankSteps& row = out.ranks[rowOf[a.rank]];
        ++row.slowestIn;
        ++row.cells[columnOf(step)].slowest;
    }

    // Outliers first: the furthest from the median rank's time outside
    // collectives, then the most incidents.
    std::vector<int64_t> medians;
    for (const RankSteps& r : out.ranks)
        if (r.steps > 0) medians.push_back(r.medianOutsideNs);
    int64_t typical = median(medians);
    for (RankSteps& r : out.ranks)
        r.deviation = typical > 0 && r.steps > 0
                          ? (double(r.medianOutsideNs) - double(typical)) / double(typical)
                          : 0.0;
    std::stable_sort(out.ranks.begin(), out.ranks.end(),
                     [](const RankSteps& a, const RankSteps& b) {
                         double da = std::abs(a.deviation), db = std::abs(b.deviation);
                         if (da != db) return da > db;
                         if (a.incidents != b.incidents) return a.incidents > b.incidents;
                         return a.rank < b.rank;
                     });

    for (auto& [key, acc] : ops) {
        OpStat stat = std::move(acc.stat);
        stat.name = key.second;
        std::vector<std::pair<int64_t, std::string>> byCalls;
        for (auto& [text, n] : acc.placements)
            byCalls.emplace_back(-n, text);
        std::sort(byCalls.begin(), byCalls.end());
        for (auto& [n, text] : byCalls) {
            if (stat.placements.size() < kPlacementsListed)
                stat.placements.push_back(std::move(text));
            else
                ++stat.morePlacements;
        }
        out.ops.push_back(std::move(stat));
    }
    std::sort(out.ops.begin(), out.ops.end(), [](const OpStat& a, const OpStat& b) {
        if (a.totalNs != b.totalNs) return a.totalNs > b.totalNs;
        return std::tie(a.collective, a.name) < std::tie(b.collective, b.name);
    });
    return out;
}

std::vector<Finding> stragglerFindings(const TimeBreakdown& time) {
    std::vector<Finding> out;
    if (time.ranks.size() < 2) return out;
    int64_t compared = int64_t(time.slowest.size());
    for (const RankSteps& r : time.ranks) {
        if (r.slowestIn < kStragglerMinSteps || 2 * r.slowestIn < compared) continue;
        // against the median of the other ranks
        std::vector<int64_t> medians;
        for (const RankSteps& o : time.ranks)
            if (o.rank != r.rank && o.steps > 0) medians.push_back(o.medianOutsideNs);
        int64_t typical = median(medians);
        if (double(r.medianOutsideNs) < kStragglerRatio * double(typical) ||
            r.medianOutsideNs - typical < kStragglerMinNs)
            continue;
        // what the others spend waiting: the median rank's time in collectives
        std::vector<int64_t> waits;
        for (const RankSteps& o : time.ranks)
            if (o.rank != r.rank && o.steps > 0) waits.push_back(o.medianCollectiveNs);
        out.push_back(
            {FindingKind::Straggler,
             fmt::format("rank {} is the slowest rank in {} of {} steps: {} a step outside "
                         "collectives, against {} for the other ranks (median; {:.2f}x); they "
                         "wait for it in their collectives ({} a step with a collective in flight, "
                         "against its {})",
                         r.rank, r.slowestIn, compared, formatDuration(r.medianOutsideNs),
                         formatDuration(typical),
                         typical > 0 ? double(r.medianOutsideNs) / double(typical) : 0.0,
                         formatDuration(median(waits)), formatDuration(r.medianCollectiveNs)),
             -1, r.rank});
    }
    std::sort(out.begin(), out.end(),
              [](const Finding& a, const Finding& b) { return a.rank < b.rank; });
    return out;
}

std::vector<const SlowestRank*> stepsFurthestAhead(const TimeBreakdown& time, size_t limit) {
    std::vector<const SlowestRank*> out;
    for (const SlowestRank& s : time.slowest)
        out.push_back(&s);
    std::stable_sort(out.begin(), out.end(), [](const SlowestRank* a, const SlowestRank* b) {
        return a->ratio() > b->ratio();
    });
    if (out.size() > limit) out.resize(limit);
    return out;
}

std::optional<int64_t> firstStepStart(const RankReader& rank, const OptimizerStepRecord& first) {
    constexpr int64_t kPage = 1024;
    std::optional<int64_t> training, any;
    bool past = false;  // an op after the step's optimizer.step() was met
    for (OpSeq after{0}; !training && !past;) {
        int64_t seen = 0;
        after = rank.scanOps(after, kPage, [&](const OpRecord& op) {
            ++seen;
            if (training || past) return;
            if (op.step > first.step || op.startNs > first.endNs) {
                past = true;
            } else if (op.step == first.step) {
                if (op.phase == Phase::Data || op.phase == Phase::Forward ||
                    op.phase == Phase::Backward)
                    training = op.startNs;
                else if (!any)
                    any = op.startNs;
            }
        });
        if (seen < kPage) break;  // the last page
    }
    return training ? training : any;
}

std::string formatDuration(int64_t ns) {
    double v = double(ns);
    if (std::abs(v) < 1e3) return fmt::format("{} ns", ns);
    if (std::abs(v) < 1e6) return fmt::format("{:.0f} us", v / 1e3);
    if (std::abs(v) < 1e9) return fmt::format("{:.{}f} ms", v / 1e6, std::abs(v) < 1e7 ? 2 : 1);
    return fmt::format("{:.2f} s", v / 1e9);
}

}  // namespace meshscope
