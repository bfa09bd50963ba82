#pragma once

// One open run in the GUI. Loading happens on a worker thread (progress,
// cancel): first the timeline (so the first frame comes early), then the
// analysis the CLI also uses, on a second reader of its own. A run whose
// writers have not all closed is followed live: on a timer, a worker thread
// reads the new rows with a reader of its own (a rank that starts late
// too), and the GUI thread adds them to the same TimelineData
// (timeline_feeder.h: readRows, applyRows), so the GUI thread reads no file
// while following; the analysis is re-run when incidents arrive or a rank
// joins, and a rank whose writer stopped is marked.
// Nothing a reader reports (a dead writer, a damaged page) escapes as an
// exception: it becomes a problem line, and a load ends in a shown result or
// a shown error (loadFailed, analysisFailed), never in silence.

#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>

#include "core/analysis/run_analysis.h"
#include "core/store/run_reader.h"
#include "ui/timeline/timeline_data.h"

namespace meshscope::ui {

class RunSession : public QObject {
    Q_OBJECT
  public:
    explicit RunSession(QObject* parent = nullptr);
    ~RunSession() override;

    // Starts loading `path` (a run directory or one rank file) in the
    // background; an earlier load is cancelled.
    void open(const QString& path);
    void cancel();
    bool loading() const { return m_loading; }

    QString path() const { return m_path; }
    // Valid after timelineReady.
    const std::shared_ptr<TimelineData>& timeline() const { return m_timeline; }
    // The GUI thread's reader of the run (inspector details), after timelineReady.
    const RunReader* reader() const { return m_reader.get(); }
    const RankReader* rankReader(int rank) const;
    // Null until the first analysis finished.
    std::shared_ptr<const RunAnalysis> analysis() const { return m_analysis; }
    QStringList problems() const { return m_problems; }

    bool live() const { return m_pollTimer.isActive(); }
    void setPollInterval(int ms) { m_pollTimer.setInterval(ms); }
    // Rank states are re-evaluated on every poll; a rank that added nothing
    // for this long and whose writer process is gone is marked stopped.
    void setStopAfterMs(int ms) { m_stopAfterMs = ms; }
    // Ops read per rank and poll (default 200,000: keeps the GUI responsive);
    // a run that outgrew it is read over several polls.
    void setLiveChunk(int64_t ops) { m_liveChunk = std::max<int64_t>(ops, 1); }
    // Live polls the worker finished, and how many of them ran on the GUI
    // thread (none should: tests).
    int64_t livePolls() const;
    int64_t livePollsOnGuiThread() const;

  signals:
    void progress(const QString& stage, qint64 done, qint64 total);
    void timelineReady();
    void analysisReady();
    // Every load ends in one of: timelineReady then analysisReady or
    // analysisFailed; loadFailed (nothing readable); cancelled.
    void loadFailed(const QString& message);
    void analysisFailed(const QString& message);
    void cancelled();
    // Live run: rows were added (counts of this poll), or a rank changed state.
    void grew(qint64 ops, qint64 incidents);
    void rankStateChanged(int rank, meshscope::ui::RankState state);
    void liveChanged(bool live);

  private:
    struct LoadResult;
    void finishTimeline(std::shared_ptr<LoadResult> result, uint64_t generation);
    void finishAnalysis(std::shared_ptr<const RunAnalysis> analysis, QStringList problems,
                        uint64_t generation);
    void startAnalysis();
    struct LiveReader;
    struct LivePoll;
    void poll();
    void applyPoll(LivePoll& polled);
    void updateRankStates(const std::map<int, bool>& ended);

    QString m_path;
    std::shared_ptr<TimelineData> m_timeline;
    std::unique_ptr<RunReader> m_reader;
    std::shared_ptr<const RunAnalysis> m_analysis;
    QStringList m_problems;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    uint64_t m_generation = 0;  // bumps on every open(); stale results are dropped
    bool m_loading = false;
    bool m_analysisRunning = false, m_analysisWanted = false;
    QTimer m_pollTimer;
    std::shared_ptr<LiveReader> m_live;  // the worker's reader of a live run
    bool m_pollInFlight = false;
    int m_stopAfterMs = 3000;
    int64_t m_liveChunk = 200000;
};

}  // namespace meshscope::ui
