#include "ui/app/run_session.h"

#include <signal.h>
#include <unistd.h>

#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cerrno>
#include <mutex>
#include <set>
#include <thread>

#include "ui/timeline/timeline_feeder.h"

namespace meshscope::ui {

namespace {

constexpr int64_t kLoadChunk = 1 << 20;  // ops per feed call while loading
constexpr int64_t kLiveChunk = 200000;   // ops per rank per poll: keeps the GUI responsive
constexpr int kDefaultPollMs = 400;

struct Cancelled {};

QString problemLine(const StoreError& e) {
    return QString::fromStdString(e.what());
}

// Whether the process that wrote a rank file is known to be gone (same host
// only; another host's pid says nothing here).
bool writerGone(const RankTimeline& rank) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || rank.host != host || rank.pid <= 0) return false;
    return kill(pid_t(rank.pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

struct RunSession::LoadResult {
    std::unique_ptr<RunReader> reader;
    std::shared_ptr<TimelineData> timeline;
    QStringList problems;
    QString error;
    bool cancelled = false;
};

RunSession::RunSession(QObject* parent) : QObject(parent) {
    m_pollTimer.setInterval(kDefaultPollMs);
    connect(&m_pollTimer, &QTimer::timeout, this, &RunSession::poll);
}

RunSession::~RunSession() {
    cancel();
    // Workers hold their own readers and only post results through a
    // QPointer; nothing to join here.
}

const RankReader* RunSession::rankReader(int rank) const {
    if (!m_reader) return nullptr;
    for (const RankReader& r : m_reader->ranks())
        if (r.info().rank == rank) return &r;
    return nullptr;
}

void RunSession::cancel() {
    if (m_cancel) m_cancel->store(true);
    m_loading = false;
}

void RunSession::open(const QString& path) {
    cancel();
    m_pollTimer.stop();
    m_path = path;
    m_loading = true;
    m_analysis.reset();
    m_problems.clear();
    uint64_t generation = ++m_generation;
    auto cancelFlag = std::make_shared<std::atomic<bool>>(false);
    m_cancel = cancelFlag;
    QPointer<RunSession> self(this);
    auto report = [self, generation](QString stage, qint64 done, qint64 total) {
        QMetaObject::invokeMethod(self, [self, generation, stage, done, total] {
            if (self && self->m_generation == generation) emit self->progress(stage, done, total);
        });
    };
    std::string file = path.toStdString();
    (void)QtConcurrent::run([self, generation, cancelFlag, report, file] {
        auto result = std::make_shared<LoadResult>();
        try {
            result->reader = std::make_unique<RunReader>(RunReader::open(file));
            for (const StoreError& e : result->reader->problems())
                result->problems << problemLine(e);
            if (result->reader->ranks().empty())
                throw StoreError(file,
                                 "no readable rank file" +
                                     (result->problems.isEmpty()
                                          ? std::string()
                                          : "\n" + result->problems.join('\n').toStdString()));
            result->timeline = std::make_shared<TimelineData>();
            auto& ranks = result->reader->ranks();
            result->timeline->ranks.resize(ranks.size());
            int64_t total = 0;
            for (const RankReader& r : ranks)
                total += r.summary().ops;
            std::atomic<int64_t> done{0};
            std::atomic<size_t> next{0};
            std::mutex errors;
            // One rank per thread at a time: each RankReader is used by one thread.
            auto worker = [&] {
                for (size_t i; (i = next++) < ranks.size();) {
                    RankTimeline& track = result->timeline->ranks[i];
                    initRank(ranks[i], track);
                    for (;;) {
                        if (cancelFlag->load()) return;
                        FeedResult fed = feedRank(ranks[i], track, kLoadChunk);
                        done += fed.ops;
                        report("Reading ops", done.load(), total);
                        if (!fed.error.empty()) {
                            std::lock_guard lock(errors);
                            result->problems << QString::fromStdString(fed.error);
                        }
                        if (fed.ops < kLoadChunk || !fed.error.empty()) break;
                    }
                }
            };
            size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                                std::max<size_t>(ranks.size(), 1));
            std::vector<std::thread> pool;
            for (size_t t = 1; t < threads; ++t)
                pool.emplace_back(worker);
            worker();
            for (auto& t : pool)
                t.join();
            // how each rank's recording ended: a killed or dead rank is not live
            result->timeline->applyReach(recordingReach(*result->reader));
            result->cancelled = cancelFlag->load();
            result->timeline->realign(AlignMode::WallClock);
        } catch (const StoreError& e) {
            result->error = problemLine(e);
        } catch (const std::exception& e) {
            result->error = QString::fromStdString(e.what());
        }
        QMetaObject::invokeMethod(self, [self, result, generation] {
            if (self) self->finishTimeline(result, generation);
        });
    });
}

void RunSession::finishTimeline(std::shared_ptr<LoadResult> result, uint64_t generation) {
    if (generation != m_generation) return;
    // cancel() may come after the loader's last look at the flag, while its
    // result waits in the event queue: a cancelled load is never shown.
    if (result->cancelled || (m_cancel && m_cancel->load())) {
        m_loading = false;
        emit cancelled();
        return;
    }
    if (!result->error.isEmpty()) {
        m_loading = false;
        emit loadFailed(result->error);
        return;
    }
    m_reader = std::move(result->reader);
    m_timeline = result->timeline;
    m_problems = result->problems;
    emit timelineReady();
    startAnalysis();
    bool anyLive = std::any_of(m_timeline->ranks.begin(), m_timeline->ranks.end(),
                               [](const RankTimeline& r) { return r.state == RankState::Live; });
    bool missing = m_reader->worldSize() > int(m_reader->ranks().size());
    if (anyLive || missing) {
        m_pollTimer.start();
        emit liveChanged(true);
    }
}

void RunSession::startAnalysis() {
    if (m_analysisRunning) {
        m_analysisWanted = true;  // run again when the current one ends
        return;
    }
    m_analysisRunning = true;
    m_analysisWanted = false;
    uint64_t generation = m_generation;
    auto cancelFlag = m_cancel;
    QPointer<RunSession> self(this);
    std::string file = m_path.toStdString();
    (void)QtConcurrent::run([self, generation, cancelFlag, file] {
        std::shared_ptr<const RunAnalysis> analysis;
        QStringList problems;
        try {
            // A reader of its own: the GUI thread keeps using the other one.
            RunReader run = RunReader::open(file);
            AnalysisOptions options;
            options.progress = [&](std::string_view stage, int64_t done, int64_t total) {
                if (cancelFlag->load()) throw Cancelled{};
                QString s = QString::fromUtf8(stage.data(), qsizetype(stage.size()));
                QMetaObject::invokeMethod(self, [self, generation, s, done, total] {
                    if (self && self->m_generation == generation)
                        emit self->progress(s, done, total);
                });
            };
            analysis = std::make_shared<RunAnalysis>(analyze(run, options));
        } catch (const Cancelled&) {
        } catch (const std::exception& e) {
            problems << QStringLiteral("analysis: %1").arg(QString::fromStdString(e.what()));
        }
        QMetaObject::invokeMethod(self, [self, analysis, problems, generation] {
            if (self) self->finishAnalysis(analysis, problems, generation);
        });
    });
}

void RunSession::finishAnalysis(std::shared_ptr<const RunAnalysis> analysis, QStringList problems,
                                uint64_t generation) {
    if (generation != m_generation) return;
    m_analysisRunning = false;
    m_loading = false;
    for (const QString& p : problems)
        if (!m_problems.contains(p)) m_problems << p;
    if (analysis) {
        m_analysis = std::move(analysis);
        if (m_timeline) {
            m_timeline->applyVerdicts(*m_analysis);
            m_timeline->applyStops(*m_analysis);
        }
        emit analysisReady();
    } else if (!problems.isEmpty()) {
        emit analysisFailed(problems.join('\n'));
    }
    if (m_analysisWanted) startAnalysis();
}

void RunSession::poll() {
    if (!m_reader || !m_timeline) return;
    size_t known = m_reader->ranks().size();
    pickUpNewRanks();
    bool joined = m_reader->ranks().size() > known;  // findings said it was missing
    qint64 ops = 0, incidents = 0, collectives = 0, steps = 0;
    auto& readers = m_reader->ranks();
    for (size_t i = 0; i < readers.size() && i < m_timeline->ranks.size(); ++i) {
        FeedResult fed = feedRank(readers[i], m_timeline->ranks[i], kLiveChunk);
        ops += fed.ops;
        incidents += fed.incidents;
        collectives += fed.collectives;  // a rank blocked in a collective adds nothing else
        steps += fed.steps;
        if (!fed.error.empty() && !m_problems.contains(QString::fromStdString(fed.error)))
            m_problems << QString::fromStdString(fed.error);
    }
    if (steps > 0 && m_timeline->alignMode == AlignMode::Step) m_timeline->realign(AlignMode::Step);
    updateRankStates();
    if (ops + incidents + collectives + steps > 0) emit grew(ops, incidents);
    if (incidents > 0 || joined) startAnalysis();
    bool anyLive = std::any_of(m_timeline->ranks.begin(), m_timeline->ranks.end(),
                               [](const RankTimeline& r) { return r.state == RankState::Live; });
    if (!anyLive && m_reader->worldSize() <= int(readers.size())) {
        m_pollTimer.stop();
        startAnalysis();
        emit liveChanged(false);
    }
}

void RunSession::pickUpNewRanks() {
    if (m_reader->worldSize() <= int(m_reader->ranks().size())) return;
    try {
        RunReader fresh = RunReader::open(m_path.toStdString());
        std::set<int> have;
        for (const RankReader& r : m_reader->ranks())
            have.insert(r.info().rank);
        for (RankReader& r : fresh.ranks()) {
            if (have.count(r.info().rank)) continue;
            RankTimeline track;
            initRank(r, track);
            // Keep readers and tracks index-aligned and ascending by rank.
            auto& readers = m_reader->ranks();
            auto at =
                std::lower_bound(readers.begin(), readers.end(), r.info().rank,
                                 [](const RankReader& x, int v) { return x.info().rank < v; });
            size_t index = size_t(at - readers.begin());
            readers.insert(at, std::move(r));
            m_timeline->ranks.insert(m_timeline->ranks.begin() + int64_t(index), std::move(track));
        }
        m_timeline->realign(m_timeline->alignMode);
    } catch (const std::exception&) {
        // The directory is mid-write; try again on the next poll.
    }
}

void RunSession::updateRankStates() {
    auto now = std::chrono::steady_clock::now();
    auto& readers = m_reader->ranks();
    for (size_t i = 0; i < readers.size() && i < m_timeline->ranks.size(); ++i) {
        RankTimeline& track = m_timeline->ranks[i];
        // finished, or ended as the run says (killed, died): final
        if (track.state == RankState::Finished || !track.endLabel.empty()) continue;
        RankState next = track.state;
        try {
            readers[i].refreshInfo();
            if (readers[i].info().endedNs) next = RankState::Finished;
        } catch (const std::exception&) {
        }
        auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - track.lastGrowth);
        if (next != RankState::Finished)
            next = quiet.count() > m_stopAfterMs && writerGone(track) ? RankState::Stopped
                                                                      : RankState::Live;
        if (next != track.state) {
            track.state = next;
            emit rankStateChanged(track.rank, next);
        }
    }
}

}  // namespace meshscope::ui
