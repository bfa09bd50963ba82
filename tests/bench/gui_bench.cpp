// GUI benchmark (offscreen rendering under Xvfb, Mesa llvmpipe):
//  - time to first frame: from openRun() until the canvas has drawn the
//    run's timeline (all ops loaded), measured with the event loop running;
//  - frame time with about N spans in view (default 1 million): the view is
//    narrowed by bisection until that many spans overlap it, then frames are
//    rendered back to back (draw lists + GL + glFinish), median and p90.
//  - with --follow 1, a run still being written: from the first frame until
//    the session stops following it (every writer closed), the ops then
//    shown and the longest stall of the GUI thread (a 16 ms timer's lateness).
//   ui_bench RUN [--spans 1000000] [--frames 60] [--follow 1]

#include <sys/resource.h>
#include <QApplication>
#include <QElapsedTimer>
#include <QStandardPaths>
#include <QSurfaceFormat>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/store/run_reader.h"
#include "tests/ui/resident_memory.h"
#include "ui/app/main_window.h"
#include "ui/timeline/timeline_canvas.h"

using namespace meshscope::ui;

namespace {

// MiB of this process's resident memory of one kind ("RssAnon:", "RssFile:").
double residentMiB(const std::string& kind) {
    return double(test::residentKiB(kind)) / 1024;
}

struct FrameStats {
    double median = 0, p90 = 0;
    int64_t spans = 0, items = 0;
    double drawMedian = 0;  // CPU: building draw lists (drawFrame + ImGui::Render)
    int64_t vertices = 0;
    double pagedMiB = 0;  // of mapped files, by the view's frames (the spill file's pages)
};

FrameStats summarize(std::vector<double> ms, std::vector<double> draw,
                     const TimelineCanvas& canvas) {
    std::sort(ms.begin(), ms.end());
    std::sort(draw.begin(), draw.end());
    return {ms[ms.size() / 2],   ms[ms.size() * 9 / 10], canvas.spansInView(),
            canvas.itemsDrawn(), draw[draw.size() / 2],  canvas.lastVertexCount()};
}

FrameStats measureFrames(TimelineCanvas& canvas, int frames) {
    std::vector<double> ms, draw;
    double before = residentMiB("RssFile:");
    canvas.renderFrameNow();  // warm: font atlas, buffers
    for (int i = 0; i < frames; ++i) {
        ms.push_back(canvas.renderFrameNow());
        draw.push_back(canvas.lastDrawMs());
    }
    FrameStats stats = summarize(std::move(ms), std::move(draw), canvas);
    stats.pagedMiB = residentMiB("RssFile:") - before;
    return stats;
}

// Frames with the opaque layer on and off, alternating frame by frame so
// machine noise hits both alike.
std::pair<FrameStats, FrameStats> measureOpaqueLayer(TimelineCanvas& canvas, int frames) {
    std::vector<double> ms[2], draw[2];
    FrameStats stats[2];
    double before = residentMiB("RssFile:");
    canvas.renderFrameNow();
    for (int i = 0; i < 2 * frames; ++i) {
        int on = i % 2;
        canvas.setOpaqueLayerEnabled(on);
        ms[on].push_back(canvas.renderFrameNow());
        draw[on].push_back(canvas.lastDrawMs());
    }
    for (int on = 0; on < 2; ++on)
        stats[on] = summarize(std::move(ms[on]), std::move(draw[on]), canvas);
    stats[1].pagedMiB = stats[0].pagedMiB = residentMiB("RssFile:") - before;
    return {stats[1], stats[0]};
}

// Narrows the view around the middle of the run until about `target` spans overlap it.
void viewAbout(TimelineCanvas& canvas, int64_t target) {
    auto [lo, hi] = canvas.data()->alignedRange();
    double mid = (lo + hi) / 2, a = 0, b = hi - lo;
    for (int i = 0; i < 60; ++i) {
        double half = (a + b) / 2;
        canvas.view().setRange(mid - half / 2, mid + half / 2);
        (canvas.spansInView() > target ? b : a) = half;
    }
    canvas.view().setRange(mid - b / 2, mid + b / 2);
}

// A view's line; "paged MiB": what its frames paged in of mapped files
// (the pages of the timeline's spill file they read for the first time).
void print(const char* what, const FrameStats& s) {
    std::printf("%-34s %10lld %8lld %10.2f %8.2f %10.2f %9lld %9.1f\n", what, (long long)s.spans,
                (long long)s.items, s.median, s.p90, s.drawMedian, (long long)s.vertices,
                s.pagedMiB);
}

}  // namespace

int main(int argc, char** argv) {
    meshscope::prepareForManyReaders();  // as meshscope-gui's main does, before any SQLite call
    QStandardPaths::setTestModeEnabled(true);
    QSurfaceFormat format;
    format.setSwapInterval(0);
    QSurfaceFormat::setDefaultFormat(format);
    QApplication app(argc, argv);
    QStringList args = app.arguments();
    if (args.size() < 2) {
        std::fprintf(stderr, "usage: ui_bench RUN [--spans N] [--frames N]\n");
        return 2;
    }
    int64_t spans = 1'000'000;
    int frames = 60;
    bool follow = false;
    for (int i = 2; i + 1 < args.size(); i += 2) {
        if (args[i] == "--spans") spans = args[i + 1].toLongLong();
        if (args[i] == "--frames") frames = args[i + 1].toInt();
        if (args[i] == "--follow") follow = args[i + 1] == "1";
    }
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    QElapsedTimer clock;
    double loadedMs = -1, firstFrameMs = -1, analysisMs = -1;
    QObject::connect(&w.session(), &RunSession::timelineReady, [&] { loadedMs = clock.elapsed(); });
    QObject::connect(&w.canvas(), &ImGuiCanvas::frameRendered, [&] {
        if (loadedMs >= 0 && firstFrameMs < 0) firstFrameMs = clock.nsecsElapsed() / 1e6;
    });
    QObject::connect(&w.session(), &RunSession::analysisReady,
                     [&] { analysisMs = clock.elapsed(); });
    QObject::connect(&w.session(), &RunSession::loadFailed, [&](const QString& e) {
        std::fprintf(stderr, "ui_bench: %s\n", qPrintable(e));
        app.exit(3);
    });
    clock.start();
    w.openRun(args[1]);
    while (firstFrameMs < 0 || analysisMs < 0)
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 50);
    TimelineCanvas& canvas = w.canvas();
    if (follow) {  // a run being written: follow it to its end, timing the GUI thread's stalls
        int64_t opsAtOpen = canvas.data()->totalOps();
        QTimer tick;  // the event loop's heartbeat: a late tick is a stalled GUI thread
        tick.start(16);
        QElapsedTimer sinceTick;
        double longestStallMs = 0;
        sinceTick.start();
        QObject::connect(&tick, &QTimer::timeout, [&] {
            longestStallMs = std::max(longestStallMs, sinceTick.nsecsElapsed() / 1e6 - 16);
            sinceTick.restart();
        });
        while (w.session().live())
            QApplication::processEvents(QEventLoop::WaitForMoreEvents, 16);
        double followedS = clock.elapsed() / 1e3;
        int64_t inFiles = -1;
        try {
            meshscope::RunReader files = meshscope::RunReader::open(args[1].toStdString());
            inFiles = 0;
            for (const meshscope::RankReader& r : files.ranks())
                inFiles += r.summary().ops;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "ui_bench: %s\n", e.what());
        }
        std::printf(
            "followed live: %lld ops at the first frame, %lld when the run ended (the files hold "
            "%lld), %.1f s after open; %lld polls; the GUI thread's longest stall %.0f ms\n",
            (long long)opsAtOpen, (long long)canvas.data()->totalOps(), (long long)inFiles,
            followedS, (long long)w.session().livePolls(), longestStallMs);
        for (const RankTimeline& r : canvas.data()->ranks)
            std::printf("  rank %d: %lld ops, %s\n", r.rank, (long long)r.opCount,
                        r.state == RankState::Finished ? "finished"
                        : r.state == RankState::Live   ? "live"
                                                       : "stopped");
    }
    std::printf("run: %s\n%lld ops, %zu ranks, canvas %dx%d px\n", qPrintable(args[1]),
                (long long)canvas.data()->totalOps(), canvas.data()->ranks.size(), canvas.width(),
                canvas.height());
    std::printf(
        "time to first frame (open -> timeline drawn): %.0f ms (timeline loaded at %.0f ms)\n",
        firstFrameMs, loadedMs);
    std::printf("analysis ready (incidents table filled):      %.0f ms\n", analysisMs);
    std::printf("\nresident after the first frame: anonymous %.0f MiB, files %.0f MiB\n",
                residentMiB("RssAnon:"), residentMiB("RssFile:"));
    std::printf("\n%-34s %10s %8s %10s %8s %10s %9s %9s\n", "view", "spans", "drawn", "frame ms",
                "p90 ms", "CPU draw", "vertices", "paged MiB");
    canvas.fitAll();
    print("whole run", measureFrames(canvas, frames));
    viewAbout(canvas, spans);
    auto [with, without] = measureOpaqueLayer(canvas, frames);
    print("about --spans in view", with);
    print("  same, opaque layer off", without);
    canvas.view().zoomAt(canvas.view().width() / 2, 1000);
    print("zoomed in (labels, few spans)", measureFrames(canvas, frames));
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("\npeak RSS (loaded, analysed, frames drawn): %.0f MiB\n",
                double(usage.ru_maxrss) / 1024.0);
    SpillStatus spill = spillStatus();
    std::printf(
        "now: anonymous %.0f MiB, files %.0f MiB; spans: %llu block(s) of %zu in the spill "
        "file (%s), %llu in memory%s%s\n",
        residentMiB("RssAnon:"), residentMiB("RssFile:"), (unsigned long long)spill.blocks,
        SpanColumn::kSpansPerBlock, spill.path.c_str(), (unsigned long long)spill.inMemory,
        spill.why.empty() ? "" : ": ", spill.why.c_str());
    return 0;
}
