#include "ui/app/run_session.h"

#include <signal.h>
#include <unistd.h>

#include <malloc.h>
#include <QCoreApplication>
#include <QPointer>
#include <QThread>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <unordered_map>

#include "core/util/parallel.h"
#include "ui/timeline/span_cache.h"
#include "ui/timeline/timeline_feeder.h"

namespace meshscope::ui {

namespace {

constexpr int64_t kLoadChunk = 1 << 20;  // ops per feed call while loading
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

// The cache only saves time: why it could not be written is said once.
void noteCacheTrouble(const std::string& why) {
    static std::once_flag said;
    std::call_once(said, [&] {
        std::fprintf(stderr, "meshscope-gui: the timeline cache is not written: %s\n", why.c_str());
    });
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
    m_live.reset();  // a poll of the last run still running ends unseen
    m_pollInFlight = false;
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
            std::vector<int64_t> opsOf;
            for (const RankReader& r : ranks)
                total += opsOf.emplace_back(r.summary().ops);
            std::atomic<int64_t> done{0};
            std::mutex errors;
            const std::filesystem::path cacheDir = spanCacheDirectory();
            std::atomic<bool> cachedSome{false};
            // One rank per thread at a time: each RankReader is used by one thread.
            forEachInParallel(ranks.size(), [&](size_t i) {
                RankTimeline& track = result->timeline->ranks[i];
                const std::filesystem::path& file = ranks[i].path();
                initRank(ranks[i], track);
                // A long finished rank: its ops from its cache when it has
                // one, else read and cached (span_cache.h).
                std::string why;
                bool cacheable = !cacheDir.empty() && track.state == RankState::Finished &&
                                 opsOf[i] >= kMinCachedOps;
                bool cached = cacheable && loadSpanCache(file, track, why);
                bool caching = cacheable && !cached && beginSpanCache(file, track, why);
                if (cached) done += track.opCount;
                bool complete = true;
                for (;;) {
                    if (cancelFlag->load()) {
                        complete = false;
                        break;
                    }
                    FeedResult fed = feedRank(ranks[i], track, kLoadChunk);
                    done += fed.ops;
                    report("Reading ops", done.load(), total);
                    if (!fed.error.empty()) {
                        complete = false;
                        std::lock_guard lock(errors);
                        result->problems << QString::fromStdString(fed.error);
                    }
                    if (fed.ops < kLoadChunk || !fed.error.empty()) break;
                }
                if (!caching) return;
                if (!complete)
                    abandonSpanCache(track);
                else if (finishSpanCache(file, track, why))
                    cachedSome = true;
                else
                    noteCacheTrouble(why);
            });
            if (cachedSome) trimSpanCache(cacheDir, spanCacheMaxBytes());
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
    // The analysis replaced was built on a worker thread, in its own malloc
    // arena, which keeps the freed pages: a live run analysed again and again
    // ended with 785 MiB of anonymous memory, 364 MiB when trimmed (8 x 5M
    // followed live).
    ::malloc_trim(0);
}

// The worker's side of following a live run: a reader of its own, opened on
// the first poll, one poll at a time.
struct RunSession::LiveReader {
    explicit LiveReader(std::string p) : path(std::move(p)) {}
    std::string path;
    std::unique_ptr<RunReader> run;
    std::mutex mutex;
    std::atomic<int64_t> polls{0}, onGuiThread{0};

    std::shared_ptr<LivePoll> poll(std::vector<FeedCursor> cursors, int64_t maxOps);
    // Ranks whose files appeared since: added to the own reader, their info
    // and a reader for the GUI's inspector into `out`.
    void pickUpNewRanks(std::vector<FeedCursor>& cursors, LivePoll& out);
};

struct RunSession::LivePoll {
    std::vector<RankRows> rows;             // per rank, by rank number
    std::vector<RankInfo> joined;           // ranks new to the GUI
    std::vector<RankReader> joinedReaders;  // the same ranks, for the GUI thread
    int worldSize = 0;
    std::string error;
};

std::shared_ptr<RunSession::LivePoll> RunSession::LiveReader::poll(std::vector<FeedCursor> cursors,
                                                                   int64_t maxOps) {
    std::lock_guard lock(mutex);
    if (QCoreApplication::instance() &&
        QThread::currentThread() == QCoreApplication::instance()->thread())
        ++onGuiThread;
    auto out = std::make_shared<LivePoll>();
    try {
        if (!run) run = std::make_unique<RunReader>(RunReader::open(path));
        out->worldSize = run->worldSize();
        if (out->worldSize > int(cursors.size())) pickUpNewRanks(cursors, *out);
        std::unordered_map<int, RankReader*> readers;
        for (RankReader& reader : run->ranks())
            readers.emplace(reader.info().rank, &reader);
        for (const FeedCursor& cursor : cursors) {
            auto found = readers.find(cursor.rank);
            if (found == readers.end()) continue;
            RankReader& reader = *found->second;
            // Ended only when its writer had closed before this read and the
            // read took the rest: a rank that ended with more than a poll's
            // ops unread is read on over the next polls.
            bool closed = false;
            try {
                reader.refreshInfo();
                closed = reader.info().endedNs.has_value();
            } catch (const std::exception&) {  // mid-write: asked again next poll
            }
            RankRows rows = readRows(reader, cursor, maxOps);
            rows.ended = closed && int64_t(rows.ops.size()) < maxOps && rows.error.empty();
            if (!rows.ops.empty()) {  // thread names written with the ops just read
                try {
                    reader.refreshInfo();
                    rows.meta = reader.info().meta;
                } catch (const std::exception&) {
                }
            }
            out->rows.push_back(std::move(rows));
        }
    } catch (const std::exception& e) {
        out->error = e.what();
    }
    ++polls;
    return out;
}

void RunSession::LiveReader::pickUpNewRanks(std::vector<FeedCursor>& cursors, LivePoll& out) {
    std::set<int> known;
    for (const FeedCursor& c : cursors)
        known.insert(c.rank);
    try {
        std::set<int> own;
        for (const RankReader& r : run->ranks())
            own.insert(r.info().rank);
        if (int(own.size()) < run->worldSize()) {
            RunReader fresh = RunReader::open(path);
            for (RankReader& r : fresh.ranks())
                if (own.insert(r.info().rank).second) run->ranks().push_back(std::move(r));
        }
        std::optional<RunReader> forGui;
        for (const RankReader& r : run->ranks()) {
            int rank = r.info().rank;
            if (known.count(rank)) continue;
            if (!forGui) forGui = RunReader::open(path);
            for (RankReader& g : forGui->ranks())
                if (g.info().rank == rank) {
                    out.joined.push_back(r.info());
                    out.joinedReaders.push_back(std::move(g));
                    cursors.push_back(FeedCursor{rank});
                    break;
                }
        }
    } catch (const std::exception&) {
        // The directory is mid-write; try again on the next poll.
    }
}

int64_t RunSession::livePolls() const {
    return m_live ? m_live->polls.load() : 0;
}

int64_t RunSession::livePollsOnGuiThread() const {
    return m_live ? m_live->onGuiThread.load() : 0;
}

void RunSession::poll() {
    if (!m_reader || !m_timeline || m_pollInFlight) return;
    if (!m_live) m_live = std::make_shared<LiveReader>(m_path.toStdString());
    std::vector<FeedCursor> cursors;
    for (const RankTimeline& track : m_timeline->ranks)
        cursors.push_back(cursorOf(track));
    m_pollInFlight = true;
    uint64_t generation = m_generation;
    QPointer<RunSession> self(this);
    std::shared_ptr<LiveReader> live = m_live;
    int64_t chunk = m_liveChunk;
    (void)QtConcurrent::run([self, generation, live, cursors, chunk] {
        std::shared_ptr<LivePoll> polled = live->poll(cursors, chunk);
        QMetaObject::invokeMethod(self, [self, generation, polled] {
            if (!self) return;
            self->m_pollInFlight = false;
            if (self->m_generation == generation) self->applyPoll(*polled);
        });
    });
}

void RunSession::applyPoll(LivePoll& polled) {
    if (!m_reader || !m_timeline) return;
    bool joined = false;  // findings said it was missing
    for (size_t i = 0; i < polled.joined.size(); ++i) {
        const RankInfo& info = polled.joined[i];
        if (m_timeline->findRank(info.rank)) continue;
        RankTimeline track;
        initRank(info, track);
        // Live until a poll has read it to its end, even when its writer has
        // closed it already: a rank that joins finished is read over several
        // polls (it used to be left at what the polls had read when the
        // other ranks finished).
        track.state = RankState::Live;
        // Keep ranks (and the GUI's readers) ascending by rank.
        auto& ranks = m_timeline->ranks;
        auto at = std::lower_bound(ranks.begin(), ranks.end(), info.rank,
                                   [](const RankTimeline& x, int v) { return x.rank < v; });
        ranks.insert(at, std::move(track));
        auto& readers = m_reader->ranks();
        auto where = std::lower_bound(readers.begin(), readers.end(), info.rank,
                                      [](const RankReader& x, int v) { return x.info().rank < v; });
        readers.insert(where, std::move(polled.joinedReaders[i]));
        joined = true;
    }
    if (joined) m_timeline->realign(m_timeline->alignMode);
    qint64 ops = 0, incidents = 0, collectives = 0, steps = 0;
    std::map<int, bool> ended;
    std::unordered_map<int, RankTimeline*> tracks;
    for (RankTimeline& track : m_timeline->ranks)
        tracks.emplace(track.rank, &track);
    for (const RankRows& rows : polled.rows) {
        auto found = tracks.find(rows.rank);
        if (found == tracks.end()) continue;
        RankTimeline* track = found->second;
        FeedResult fed = applyRows(rows, *track);
        ops += fed.ops;
        incidents += fed.incidents;
        collectives += fed.collectives;  // a rank blocked in a collective adds nothing else
        steps += fed.steps;
        ended[rows.rank] = rows.ended;
        if (!fed.error.empty() && !m_problems.contains(QString::fromStdString(fed.error)))
            m_problems << QString::fromStdString(fed.error);
    }
    if (steps > 0 && m_timeline->alignMode == AlignMode::Step) m_timeline->realign(AlignMode::Step);
    updateRankStates(ended);
    if (ops + incidents + collectives + steps > 0 || joined) emit grew(ops, incidents);
    if (incidents > 0 || joined) startAnalysis();
    bool anyLive = std::any_of(m_timeline->ranks.begin(), m_timeline->ranks.end(),
                               [](const RankTimeline& r) { return r.state == RankState::Live; });
    int world = polled.worldSize ? polled.worldSize : m_reader->worldSize();
    if (!anyLive && world <= int(m_timeline->ranks.size())) {
        m_pollTimer.stop();
        startAnalysis();
        emit liveChanged(false);
    }
    ::malloc_trim(0);  // the rows the worker read and this poll freed (see finishAnalysis)
}

// `ended`: per rank the worker read, whether its writer closed the file.
void RunSession::updateRankStates(const std::map<int, bool>& ended) {
    auto now = std::chrono::steady_clock::now();
    for (RankTimeline& track : m_timeline->ranks) {
        // finished, or ended as the run says (killed, died): final
        if (track.state == RankState::Finished || !track.endLabel.empty()) continue;
        RankState next = track.state;
        if (auto it = ended.find(track.rank); it != ended.end() && it->second)
            next = RankState::Finished;
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
