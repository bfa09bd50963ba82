#pragma once

// Export of a run as Chrome trace event JSON (the "Trace Event Format" that
// Perfetto and chrome://tracing open): one process per rank, one track per
// recorded thread, properly nested X events for ops, collectives and
// optimizer steps on their own tracks, instant events for incidents, flow
// arrows from each incident to the op that reconciled it, and a counter of
// collective bytes per step. Streams: ops and incidents are read page by
// page and collectives one at a time in start order, each written as it is
// read; what is held grows with a rank's steps (its optimizer steps, bytes
// and iteration spans per step) and its open spans, not with its ops or
// collectives. Ranks are aligned by wall clock.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/store/run_reader.h"

namespace meshscope {

struct TraceExportStats {
    int64_t ops = 0, collectives = 0, incidents = 0, flows = 0, clamped = 0;
    TraceExportStats& operator+=(const TraceExportStats& o) {
        ops += o.ops, collectives += o.collectives, incidents += o.incidents, flows += o.flows,
            clamped += o.clamped;
        return *this;
    }
};

// What of a run goes into the trace: a window of optimizer steps (records
// of the steps firstStep..lastStep, inclusive; a record before the first
// step has step -1) and a set of ranks (empty: every rank).
struct TraceWindow {
    int64_t firstStep = INT64_MIN, lastStep = INT64_MAX;
    std::set<int> ranks;
    bool hasStep(int64_t step) const { return step >= firstStep && step <= lastStep; }
    bool hasRank(int rank) const { return ranks.empty() || ranks.contains(rank); }
};

TraceExportStats writeChromeTrace(
    const RunReader& run, std::ostream& out,
    const std::function<void(int64_t done, int64_t total)>& progress = {},
    const TraceWindow& window = {});

// One rank as a torch.profiler trace file, the format HTA
// (HolisticTraceAnalysis) and TensorBoard's profiler plugin read, and
// Perfetto opens: "distributedInfo" names the rank, ops are "cpu_op" events
// ("External id" is the op's seq), each optimizer step's records are inside a
// "ProfilerStep#N" annotation, each optimizer.step() is an
// "Optimizer.step#Adam.step" one, collectives carry "Collective name" and
// "Process Group Description".
TraceExportStats writeProfilerTrace(
    const RunReader& run, const RankReader& rank, std::ostream& out,
    const std::function<void(int64_t done, int64_t total)>& progress = {},
    const TraceWindow& window = {});

// "{host}_{pid}.{clock origin ns}.pt.trace.json[.gz]": torch.profiler's
// tensorboard_trace_handler naming ("{worker}.{time ns}.pt.trace.json").
// `withRank` makes the worker "{host}_{pid}_rank{rank}", for ranks written
// by one process (synthetic runs) whose names would be equal.
std::string profilerTraceFileName(const RankInfo& info, bool gzip, bool withRank = false);

// The file name of each rank of `run` that `window` keeps, in rank order:
// profilerTraceFileName, with the rank where two ranks' names would be equal.
std::vector<std::pair<const RankReader*, std::string>> profilerTraceFiles(
    const RunReader& run, bool gzip, const TraceWindow& window = {});

// Makes `dir` for a per-rank export if it is missing. Empty when it can be
// written into, else why not, in a sentence that starts with the folder: not
// a folder, cannot be made, or it holds trace files already, which HTA and
// TensorBoard would read as more ranks of the same run.
std::string prepareProfilerTraceFolder(const std::filesystem::path& dir);

}  // namespace meshscope
