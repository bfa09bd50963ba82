#include "core/export/trace_json.h"

#include "core/model/run_clock.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <ostream>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace meshscope {
namespace {

constexpr int64_t kOpPage = 65536;
constexpr int64_t kIncidentPage = 4096;  // an incident record is large (its texts)
constexpr int kStepsTid = 999;
constexpr int kCollectiveTidBase = 1000;
constexpr int kCollectiveTrackStride = 100;  // overlapping collectives of a thread

std::string jsonString(std::string_view text) {
    return nlohmann::json(std::string(text))
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Microseconds with nanosecond digits, written exactly from integer ns, so
// clamped children stay inside their parents after formatting.
// The magnitude is taken unsigned: recorded times are untrusted, and the
// most negative int64 has no positive counterpart.
std::string micros(int64_t ns) {
    uint64_t magnitude = ns < 0 ? 0 - uint64_t(ns) : uint64_t(ns);
    return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
}

// What an X event of an op or an optimizer step is written from: the
// fields of its record the event shows, not the record (its operands).
struct Span {
    int64_t start = 0, end = 0;
    uint16_t depth = 0;
    struct Fields {
        StringId name;
        OpSeq seq;
        int64_t step = -1;
        StackId stack;
        IncidentSeq incident;
        uint32_t thread = 0;
        Phase phase = Phase::Other;
    } op;
};

class Writer {
  public:
    Writer(std::ostream& out) : m_out(out) {}
    void event(const std::string& body) {
        m_out << (m_first ? "\n" : ",\n") << body;
        m_first = false;
    }

  private:
    std::ostream& m_out;
    bool m_first = true;
};

// Chrome: one trace for the run, a process per rank. Profiler: one rank's
// file in torch.profiler's shape (cpu_op, user_annotation, ProfilerStep#N).
enum class Flavor { Chrome, Profiler };

class RankExporter {
  public:
    RankExporter(const RankReader& rank, const RunClock& clock, Writer& w, TraceExportStats& stats,
                 const TraceWindow& window, Flavor flavor = Flavor::Chrome)
        : m_window(window),
          m_flavor(flavor),
          m_rank(rank),
          m_pid(flavor == Flavor::Profiler ? int(rank.info().pid) : rank.info().rank),
          m_w(w),
          m_stats(stats),
          m_offset(clock.offset(rank.info().rank)) {}

    // The rank's events, in the order a reader needs them: ops first (the
    // incidents' flows point at the ops that reconciled them).
    void everything(const std::function<void(int64_t)>& pageDone) {
        ops(pageDone);
        collectivesAndSteps();
        incidents();
        metadata();
    }

    void ops(const std::function<void(int64_t)>& progress) {
        std::map<uint32_t, std::vector<Span>> buffers;
        OpSeq last;
        for (;;) {
            int64_t count = 0;
            last = m_rank.scanOps(
                last, kOpPage,
                [&](const OpRecord& op) {
                    ++count;
                    if (!m_window.hasStep(op.step)) return;
                    ++m_stats.ops;
                    m_threads.insert(op.thread);
                    widenIteration(op.step, op.startNs, std::max(op.startNs, op.endNs), op.thread);
                    Span s{op.startNs,
                           std::max(op.startNs, op.endNs),
                           op.depth,
                           {op.name, op.seq, op.step, op.stack, op.incident, op.thread, op.phase}};
                    std::vector<Span>& buffer = buffers[op.thread];
                    // A depth-0 op closes its tree when children precede it
                    // (recorded at their end); otherwise it opens the next one.
                    if (op.depth == 0) {
                        bool postOrder = !buffer.empty() && buffer.back().depth > 0 &&
                                         buffer.back().start >= s.start;
                        if (postOrder) {
                            buffer.push_back(std::move(s));
                            flush(op.thread, buffer);
                            return;
                        }
                        flush(op.thread, buffer);
                    }
                    buffer.push_back(std::move(s));
                },
                false);
            if (progress) progress(count);
            if (count < kOpPage) break;
        }
        for (auto& [thread, buffer] : buffers)
            flush(thread, buffer);
    }

    void collectivesAndSteps() {
        std::map<int64_t, std::pair<int64_t, int64_t>> bytesPerStep;  // step -> (first ts, bytes)
        // Collectives overlap (async ones, a hang while others complete):
        // each goes on the first track of its thread it does not overlap.
        // Read in start order, so each is placed and written as it comes:
        // what is held is the end of each track, not the collectives.
        std::map<uint32_t, std::vector<int64_t>> trackEnds;  // thread -> end of each track
        m_rank.scanCollectives([&](const CollectiveRecord& c) {
            if (!m_window.hasStep(c.step)) return;
            int64_t end = std::max(c.startNs, c.endNs);
            std::vector<int64_t>& ends = trackEnds[c.thread];
            size_t k = 0;
            while (k < ends.size() && ends[k] > c.startNs)
                ++k;
            if (k == ends.size()) ends.push_back(0);
            ends[k] = end;
            int tid = int(kCollectiveTidBase + c.thread + k * kCollectiveTrackStride);
            if (!m_collectiveTids.contains(tid))
                m_collectiveTids[tid] =
                    k ? fmt::format("collectives (thread {}, overlapping {})", c.thread, k)
                      : fmt::format("collectives (thread {})", c.thread);
            collective(tid, c, end);
            widenIteration(c.step, c.startNs, end, c.thread);
            auto [it, fresh] = bytesPerStep.try_emplace(c.step, c.startNs, 0);
            it->second.first = std::min(it->second.first, c.startNs);
            it->second.second = saturatingAdd(it->second.second, c.bytes);
            ++m_stats.collectives;
        });
        for (const auto& [step, tb] : bytesPerStep)
            m_w.event(fmt::format(
                R"({{"ph":"C","pid":{},"tid":0,"ts":{},"name":"collective bytes","args":{{"bytes":{}}}}})",
                m_pid, micros(saturatingAdd(m_offset, tb.first)), tb.second));
        if (m_flavor == Flavor::Profiler) {
            profilerSteps();
            return;
        }
        std::vector<Span> steps;
        for (const OptimizerStepRecord& s : m_rank.optimizerSteps()) {
            if (!m_window.hasStep(s.step)) continue;
            Span::Fields step;
            step.name = s.optimizer;
            step.step = s.step;
            steps.push_back({s.startNs, std::max(s.startNs, s.endNs), 0, step});
        }
        if (!steps.empty()) {
            m_hasSteps = true;
            emitNested(kStepsTid, steps, true);
        }
    }

    void incidents() {
        for (IncidentSeq after;;) {
            std::vector<IncidentRecord> page = m_rank.incidentsAfter(after, kIncidentPage, false);
            for (const IncidentRecord& inc : page) {
                if (!m_window.hasStep(inc.step)) continue;
                m_threads.insert(inc.thread);
                const bool mixed = inc.kind == IncidentKind::MixedTensor;
                nlohmann::json args = {{"seq", inc.seq.value()},
                                       {"kind", toString(inc.kind)},
                                       {"origin", mixed ? originText(inc.origin) : ""},
                                       {"evidence", m_rank.string(inc.evidence)},
                                       {"action", toString(inc.action)},
                                       {"outcome", toString(inc.outcome)},
                                       {"plain_operand", inc.operandIndex},
                                       {"step", inc.step},
                                       {"frame", frame(inc.stack)}};
                if (!mixed) args["error"] = m_rank.string(inc.error);
                if (inc.detail) args["detail"] = m_rank.string(inc.detail);  // a hang's stacks
                // "mixed: aten::mul.Tensor", "hang: all_reduce"
                std::string label = mixed ? "mixed" : std::string(incidentKindInfo(inc.kind).tag);
                m_w.event(fmt::format(
                    R"({{"ph":"i","s":"t","pid":{},"tid":{},"ts":{},"name":{},"cat":"incident","args":{}}})",
                    m_pid, inc.thread, micros(saturatingAdd(m_offset, inc.timeNs)),
                    jsonString(label + ": " + m_rank.string(inc.op)),
                    args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
                ++m_stats.incidents;
                auto op = m_reconciledBy.find(inc.seq.value());
                if (op == m_reconciledBy.end()) continue;
                m_w.event(fmt::format(
                    R"({{"ph":"s","pid":{},"tid":{},"ts":{},"id":{},"name":"reconciled by","cat":"reconciliation"}})",
                    m_pid, inc.thread, micros(saturatingAdd(m_offset, inc.timeNs)),
                    flowId(inc.seq)));
                m_w.event(fmt::format(
                    R"({{"ph":"f","bp":"e","pid":{},"tid":{},"ts":{},"id":{},"name":"reconciled by","cat":"reconciliation"}})",
                    m_pid, op->second.thread, micros(saturatingAdd(m_offset, op->second.start)),
                    flowId(inc.seq)));
                ++m_stats.flows;
            }
            if (int64_t(page.size()) < kIncidentPage) break;
            after = page.back().seq;
        }
    }

    void metadata() {
        const RankInfo& info = m_rank.info();
        m_w.event(fmt::format(
            R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":{}}}}})", m_pid,
            jsonString(m_flavor == Flavor::Profiler
                           ? fmt::format("rank {} (pid {}, {})", info.rank, info.pid, info.hostname)
                           : fmt::format("rank {} ({})", info.rank, info.hostname))));
        m_w.event(fmt::format(
            R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})",
            m_pid, info.rank));
        auto thread = [&](int tid, const std::string& name) {
            m_w.event(fmt::format(
                R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})",
                m_pid, tid, jsonString(name)));
            m_w.event(fmt::format(
                R"({{"ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}})",
                m_pid, tid, tid));
        };
        m_threads.insert(0);  // counters live on thread 0
        for (uint32_t t : m_threads) {
            auto named = info.meta.find(threadMetaKey(t));
            thread(int(t), named != info.meta.end() ? named->second : fmt::format("thread {}", t));
        }
        for (const auto& [tid, name] : m_collectiveTids)
            thread(tid, name);
        if (m_hasSteps) thread(kStepsTid, "optimizer steps");
        if (m_flavor == Flavor::Profiler)  // what torch.profiler writes beside its events
            m_w.event(fmt::format(
                R"({{"ph":"M","pid":{},"tid":0,"name":"process_labels","args":{{"labels":{}}}}})",
                m_pid, jsonString(fmt::format("rank {}", info.rank))));
    }

  private:
    struct Iteration {
        int64_t start = INT64_MAX, end = INT64_MIN;
        uint32_t thread = 0;  // of its first record
    };

    void widenIteration(int64_t step, int64_t start, int64_t end, uint32_t thread) {
        if (m_flavor != Flavor::Profiler || step < 0) return;
        auto [it, fresh] = m_iterations.try_emplace(step);
        if (fresh || start < it->second.start) it->second.thread = thread;
        it->second.start = std::min(it->second.start, start);
        it->second.end = std::max(it->second.end, end);
    }

    // torch.profiler's annotations: "ProfilerStep#N" around the records of
    // step N (HTA assigns iterations by them) and "Optimizer.step#Adam.step"
    // around each optimizer step, on the thread the iteration started on.
    // They enclose that thread's ops, so they are written as recorded.
    void profilerSteps() {
        auto annotation = [&](uint32_t thread, int64_t start, int64_t end, const std::string& name,
                              int64_t step) {
            m_w.event(fmt::format(
                R"({{"ph":"X","cat":"user_annotation","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"args":{{"step":{}}}}})",
                m_pid, thread, micros(saturatingAdd(m_offset, start)),
                micros(saturatingSub(end, start)), jsonString(name), step));
        };
        std::vector<OptimizerStepRecord> optimizerSteps = m_rank.optimizerSteps();
        for (const OptimizerStepRecord& s : optimizerSteps)  // an iteration ends after its step()
            if (m_window.hasStep(s.step))
                widenIteration(s.step, s.startNs, std::max(s.startNs, s.endNs), 0);
        for (const auto& [step, it] : m_iterations)
            annotation(it.thread, it.start, it.end, fmt::format("ProfilerStep#{}", step), step);
        for (const OptimizerStepRecord& s : optimizerSteps) {
            if (!m_window.hasStep(s.step)) continue;
            auto it = m_iterations.find(s.step);
            std::string optimizer = m_rank.string(s.optimizer);  // "torch.optim.adam.Adam"
            std::string_view cls = std::string_view(optimizer).substr(optimizer.rfind('.') + 1);
            annotation(it != m_iterations.end() ? it->second.thread : 0, s.startNs,
                       std::max(s.startNs, s.endNs), fmt::format("Optimizer.step#{}.step", cls),
                       s.step);
        }
    }

    int64_t flowId(IncidentSeq seq) const { return (int64_t(m_pid) << 40) | seq.value(); }

    std::string frame(StackId id) {
        if (!id) return "";
        auto [it, fresh] = m_frames.try_emplace(id.value());
        if (fresh) {
            std::vector<Frame> frames = m_rank.stack(id);
            if (!frames.empty())
                it->second = fmt::format("{}:{}", m_rank.string(frames[0].file), frames[0].line);
        }
        return it->second;
    }

    const std::string& name(StringId id) {
        auto [it, fresh] = m_names.try_emplace(id.value());
        if (fresh) it->second = jsonString(m_rank.string(id));
        return it->second;
    }

    void flush(uint32_t thread, std::vector<Span>& buffer) {
        if (buffer.empty()) return;
        emitNested(int(thread), buffer);
        buffer.clear();
    }

    // Sorted by start (parents before children at equal starts) and clamped
    // into the enclosing span, so the track nests properly.
    void emitNested(int tid, std::vector<Span>& spans, bool steps = false) {
        std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
            return a.start != b.start ? a.start < b.start : a.depth < b.depth;
        });
        std::vector<int64_t>& open = m_open[tid];
        for (Span& s : spans) {
            while (!open.empty() && open.back() <= s.start)
                open.pop_back();
            if (!open.empty() && s.end > open.back()) {
                s.end = open.back();
                ++m_stats.clamped;
            }
            open.push_back(s.end);
            std::string args;
            if (steps) {
                args = fmt::format(R"({{"step":{}}})", s.op.step);
            } else {
                if (s.op.incident) m_reconciledBy[s.op.incident.value()] = {s.start, s.op.thread};
                args = fmt::format(R"({{{}"seq":{},"step":{},"phase":"{}","frame":{}}})",
                                   m_flavor == Flavor::Profiler
                                       ? fmt::format(R"("External id":{},)", s.op.seq.value())
                                       : std::string(),
                                   s.op.seq.value(), s.op.step, toString(s.op.phase),
                                   jsonString(frame(s.op.stack)));
            }
            m_w.event(fmt::format(
                R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}","args":{}}})",
                m_pid, tid, micros(saturatingAdd(m_offset, s.start)),
                micros(saturatingSub(s.end, s.start)),
                steps ? jsonString(fmt::format("step {} ({})", s.op.step, m_rank.string(s.op.name)))
                      : name(s.op.name),
                steps                          ? "step"
                : m_flavor == Flavor::Profiler ? "cpu_op"
                                               : toString(s.op.phase),
                args));
        }
    }

    // One collective on its track (tracks never overlap within: nothing to
    // nest or clamp).
    void collective(int tid, const CollectiveRecord& c, int64_t end) {
        nlohmann::json a = {{"bytes", c.bytes},
                            {"Collective name", m_rank.string(c.kind)},
                            {"Process Group Description", m_rank.string(c.group)},
                            {"group", m_rank.string(c.group)},
                            {"src_placements", m_rank.string(c.srcPlacements)},
                            {"dst_placements", m_rank.string(c.dstPlacements)},
                            {"step", c.step},
                            {"op_seq", c.op.value()},
                            {"collective", c.seq.value() - 1},
                            {"state", toString(c.state)}};
        if (c.error) a["error"] = m_rank.string(c.error);
        m_w.event(fmt::format(
            R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}","args":{}}})",
            m_pid, tid, micros(saturatingAdd(m_offset, c.startNs)),
            micros(saturatingSub(end, c.startNs)), name(c.kind),
            m_flavor == Flavor::Profiler ? "cpu_op" : "collective",
            a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    }

    struct Reconciling {
        int64_t start = 0;
        uint32_t thread = 0;
    };

    const TraceWindow& m_window;
    Flavor m_flavor;
    const RankReader& m_rank;
    int m_pid;
    Writer& m_w;
    TraceExportStats& m_stats;
    int64_t m_offset;  // rank-local ns -> ns since the run's earliest origin
    std::set<uint32_t> m_threads;
    std::map<int, std::string> m_collectiveTids;  // collective track -> its name
    bool m_hasSteps = false;
    std::map<int64_t, Iteration> m_iterations;   // step -> its records' span (profiler flavor)
    std::map<int, std::vector<int64_t>> m_open;  // tid -> ends of the open spans
    std::unordered_map<int64_t, std::string> m_names, m_frames;
    std::unordered_map<int64_t, Reconciling> m_reconciledBy;  // incident seq -> op
};

// Every rank of the run on one axis, so each export's times agree.
RunClock clockOf(const RunReader& run) {
    RunClock clock;
    for (const RankReader& r : run.ranks())
        clock.addRank(r.info().rank, r.info().clockOriginWallNs);
    return clock;
}

}  // namespace

TraceExportStats writeChromeTrace(const RunReader& run, std::ostream& out,
                                  const std::function<void(int64_t, int64_t)>& progress,
                                  const TraceWindow& window) {
    TraceExportStats stats;
    RunClock clock = clockOf(run);
    int64_t total = 0;
    for (const RankReader& r : run.ranks())
        if (progress && window.hasRank(r.info().rank)) total += r.summary().ops;
    out << R"({"displayTimeUnit":"ns","otherData":{"generator":"meshscope","run_id":)"
        << jsonString(run.runId()) << R"(,"clock":"wall clock, ranks aligned"},"traceEvents":[)";
    Writer w(out);
    int64_t done = 0;
    for (const RankReader& r : run.ranks()) {
        if (!window.hasRank(r.info().rank)) continue;
        RankExporter(r, clock, w, stats, window).everything([&](int64_t n) {
            done += n;
            if (progress) progress(done, total);
        });
    }
    out << "\n]}\n";
    return stats;
}

std::string profilerTraceFileName(const RankInfo& info, bool gzip, bool withRank) {
    std::string worker = fmt::format("{}_{}{}", info.hostname.empty() ? "host" : info.hostname,
                                     info.pid, withRank ? fmt::format("_rank{}", info.rank) : "");
    for (char& c : worker)  // a recorded host name is untrusted: no '/' or spaces in a file name
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
            c = '_';
    return fmt::format("{}.{}.pt.trace.json{}", worker, info.clockOriginWallNs, gzip ? ".gz" : "");
}

std::vector<std::pair<const RankReader*, std::string>> profilerTraceFiles(
    const RunReader& run, bool gzip, const TraceWindow& window) {
    std::map<std::string, int> sameName;  // ranks written by one process (synthetic runs)
    for (const RankReader& rank : run.ranks())
        ++sameName[profilerTraceFileName(rank.info(), gzip)];
    std::vector<std::pair<const RankReader*, std::string>> files;
    for (const RankReader& rank : run.ranks()) {
        if (!window.hasRank(rank.info().rank)) continue;
        std::string name = profilerTraceFileName(rank.info(), gzip);
        if (sameName[name] > 1) name = profilerTraceFileName(rank.info(), gzip, true);
        files.emplace_back(&rank, std::move(name));
    }
    return files;
}

std::string prepareProfilerTraceFolder(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        return dir.string() +
               ": not a folder (a torch-profiler export writes one file per rank into a folder)";
    if (!fs::create_directories(dir, ec) && ec)
        return fmt::format("{}: cannot make the folder ({})", dir.string(), ec.message());
    int traces = 0;
    std::string example;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
        std::string name = entry.path().filename().string();
        if ((name.ends_with(".json") || name.ends_with(".json.gz")) && traces++ == 0)
            example = name;
    }
    if (ec) return fmt::format("{}: cannot list the folder ({})", dir.string(), ec.message());
    if (traces == 0) return {};
    return fmt::format(
        "{}: holds {} trace file{} already ({}); HTA and TensorBoard would read them as ranks of "
        "this run: export into an empty folder",
        dir.string(), traces, traces == 1 ? "" : "s", example);
}

TraceExportStats writeProfilerTrace(const RunReader& run, const RankReader& rank, std::ostream& out,
                                    const std::function<void(int64_t, int64_t)>& progress,
                                    const TraceWindow& window) {
    TraceExportStats stats;
    RunClock clock = clockOf(run);
    const RankInfo& info = rank.info();
    std::string runId = run.runId();
    auto backend = info.meta.find("backend");
    // The header is one line, with "rank": and a space, as torch writes it:
    // HTA finds a file's rank with the pattern "rank":\s+(\d+) on the first
    // line that has it. Times are microseconds after baseTimeNanoseconds,
    // the run's earliest clock origin, so every rank's file shares one axis.
    std::string backendField =  // left out when the agent attached before the process group
        backend != info.meta.end() && !backend->second.empty()
            ? fmt::format(R"("backend": {}, )", jsonString(backend->second))
            : std::string();
    out << fmt::format(
        R"({{"schemaVersion": 1, "distributedInfo": {{{}"rank": {}, "world_size": {}}}, "baseTimeNanoseconds": {}, "displayTimeUnit": "ms", "traceName": {}, "traceEvents": [)",
        backendField, info.rank, info.worldSize, clock.base(),
        jsonString(fmt::format("meshscope run {} rank {}", runId, info.rank)));
    Writer w(out);
    int64_t total = rank.summary().ops, done = 0;
    RankExporter(rank, clock, w, stats, window, Flavor::Profiler).everything([&](int64_t n) {
        done += n;
        if (progress) progress(done, total);
    });
    out << "\n]}\n";
    return stats;
}

}  // namespace meshscope
