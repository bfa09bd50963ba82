#include "core/analysis/recording_reach.h"

#include <fmt/format.h>

#include "core/analysis/run_summary.h"
#include "core/store/schema.h"
#include "core/store/writer_process.h"

namespace meshscope {
namespace {

std::string metaValue(const RankInfo& info, std::string_view key) {
    auto it = info.meta.find(std::string(key));
    return it == info.meta.end() ? std::string() : it->second;
}

uint64_t lostRecords(const RankSummary& summary) {
    uint64_t lost = 0;
    for (const char* reason :
         {"queue_full", "write_error", "disk_full", "io_error", "file_cap", "not_recording"})
        if (auto it = summary.drops.find(reason); it != summary.drops.end()) lost += it->second;
    return lost;
}

}  // namespace

std::string_view toString(RecordingReach::End end) {
    switch (end) {
        case RecordingReach::End::Closed:
            return "closed";
        case RecordingReach::End::Aborted:
            return "aborted";
        case RecordingReach::End::Killed:
            return "killed";
        case RecordingReach::End::Live:
            return "live";
        case RecordingReach::End::Open:
            return "open";
    }
    return "open";
}

std::vector<RecordingReach> recordingReach(const RunReader& run) {
    return recordingReach(run, rankSummaries(run));
}

std::vector<RecordingReach> recordingReach(const RunReader& run,
                                           const std::vector<RankSummary>& counts) {
    std::vector<RecordingReach> out;
    for (size_t i = 0; i < run.ranks().size(); ++i) {
        const RankInfo& info = run.ranks()[i].info();
        const RankSummary& rankCounts = counts.at(i);
        RecordingReach r;
        r.rank = info.rank;
        std::string launched;
        if (auto it = run.launchEnds().find(r.rank); it != run.launchEnds().end())
            launched = it->second;
        std::string abort = metaValue(info, "abort");
        int64_t step = rankCounts.steps;  // the step it was in: steps completed so far
        auto told = run.launchRecording().find(r.rank);
        bool closedByWord = told != run.launchRecording().end() && told->second.closed;
        if (info.endedNs || closedByWord) {
            // closedByWord: it closed, and told `record`; the disk took no end marker
            r.end = RecordingReach::End::Closed;
            r.how = launched.empty() ? "ended" : launched;
        } else if (!abort.empty()) {
            r.end = RecordingReach::End::Aborted;
            r.how = abort.starts_with("the rank ") ? abort.substr(9) : abort;
        } else if (!launched.empty()) {
            r.end = RecordingReach::End::Killed;
            r.how = launched;
            r.truncated = true;
            r.note = fmt::format(
                "rank {}: {} without closing its file; its recording reaches into step {} and "
                "its last ~200 ms may be missing, so it is compared only as far as it goes",
                r.rank, launched, step);
        } else if (writerProcessRuns(info)) {
            r.end = RecordingReach::End::Live;
            r.how = "still recording";
            r.truncated = true;
            r.belowStep = step;
            r.note = fmt::format(
                "rank {}: still recording (step {}); only its complete steps (before {}) are "
                "compared",
                r.rank, step, step);
        } else {
            r.end = RecordingReach::End::Open;
            r.how = "stopped without closing its file";
            r.truncated = true;
            r.note = fmt::format(
                "rank {}: its file was not closed (killed, or still recording on another host); "
                "its recording reaches into step {}, and it is compared only as far as it goes",
                r.rank, step);
        }
        std::string firstLoss = metaValue(info, schema::kMetaFirstLossNs);
        RankSummary counted = rankCounts;
        if (closedByWord)  // the counts it told `record`, where its file could not take them
            for (const auto& [reason, n] : told->second.drops)
                counted.drops[reason] = std::max(counted.drops[reason], n);
        if (uint64_t lost = lostRecords(counted); lost > 0) {
            char* end = nullptr;
            long long at = firstLoss.empty() ? 0 : std::strtoll(firstLoss.c_str(), &end, 10);
            r.untilNs = firstLoss.empty() || *end ? 0 : at;
            r.truncated = true;
            std::string note = fmt::format(
                "rank {}: {} record(s) were lost ({}); it is compared only up to {:.3f} s, "
                "before the first loss",
                r.rank, lost, firstLoss.empty() ? "when is not known" : "a full queue or the disk",
                double(r.untilNs) / 1e9);
            r.note = r.note.empty() ? note : r.note + "; " + note.substr(note.find(':') + 2);
        }
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace meshscope
