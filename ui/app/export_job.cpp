#include "ui/app/export_job.h"

#include <QFileInfo>
#include <filesystem>
#include <fstream>

#include "core/export/trace_json.h"
#include "core/report/report.h"

namespace meshscope::ui {

namespace {

struct Cancelled {};

QString qs(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

}  // namespace

QString reportFormatForFile(const QString& file) {
    const ReportFormatInfo* format = meshscope::reportFormatForFile(file.toStdString());
    return format ? qs(format->name) : QString();
}

QString reportFileFilter() {
    QStringList filters;
    for (const ReportFormatInfo& f : reportFormats())
        filters << QStringLiteral("%1 (*.%2)").arg(qs(f.title), qs(f.name));
    return filters.join(";;");
}

namespace {

// One torch.profiler file per rank into the request's folder; a cancel or an
// error removes what this export wrote.
QString runProfilerExport(const ExportRequest& request,
                          const std::function<void(qint64, qint64)>& progress,
                          const std::atomic<bool>& cancel) {
    namespace fs = std::filesystem;
    fs::path dir = request.file.toStdString();
    std::vector<fs::path> written;
    fs::path partial;
    auto undo = [&] {
        std::error_code ignored;
        fs::remove(partial, ignored);
        for (const fs::path& file : written)
            fs::remove(file, ignored);
    };
    try {
        RunReader run = RunReader::open(request.runPath.toStdString());
        std::string problem = prepareProfilerTraceFolder(dir);
        if (!problem.empty()) return QString::fromStdString(problem);
        int64_t total = 0, before = 0;
        for (const RankReader& rank : run.ranks())
            total += rank.summary().ops;
        for (const auto& [rank, name] : profilerTraceFiles(run, false)) {
            fs::path target = dir / name;
            partial = target;
            partial += ".partial";
            {
                std::ofstream out(partial, std::ios::binary | std::ios::trunc);
                if (!out) throw std::runtime_error(partial.string() + ": cannot write here");
                writeProfilerTrace(run, *rank, out, [&](int64_t done, int64_t) {
                    if (cancel.load()) throw Cancelled{};
                    if (progress) progress(before + done, total);
                });
                out.flush();
                if (!out) throw std::runtime_error("write failed (disk full?)");
            }
            before += rank->summary().ops;
            if (cancel.load()) throw Cancelled{};
            fs::rename(partial, target);
            written.push_back(target);
            partial.clear();
        }
        return {};
    } catch (const Cancelled&) {
        undo();
        return QStringLiteral("cancelled");
    } catch (const std::exception& e) {
        undo();
        return QStringLiteral("%1: %2").arg(request.file, QString::fromStdString(e.what()));
    }
}

}  // namespace

QString runExport(const ExportRequest& request, const std::function<void(qint64, qint64)>& progress,
                  const std::atomic<bool>& cancel) {
    if (request.kind == ExportRequest::Kind::ProfilerTraces)
        return runProfilerExport(request, progress, cancel);
    namespace fs = std::filesystem;
    fs::path target = request.file.toStdString();
    fs::path partial = target;
    partial += ".partial";
    try {
        RunReader run = RunReader::open(request.runPath.toStdString());
        {
            std::ofstream out(partial, std::ios::binary | std::ios::trunc);
            if (!out) return QStringLiteral("%1: cannot write here").arg(request.file);
            if (request.kind == ExportRequest::Kind::Report) {
                auto format = reportFormatFromString(request.format.toStdString());
                if (!format)
                    return QStringLiteral("unknown report format '%1'").arg(request.format);
                if (!request.analysis) return QStringLiteral("the run's analysis is not ready yet");
                writeReport(*format, run, *request.analysis, out);
            } else {
                writeChromeTrace(run, out, [&](int64_t done, int64_t total) {
                    if (cancel.load()) throw Cancelled{};
                    if (progress) progress(done, total);
                });
            }
            out.flush();
            if (!out) throw std::runtime_error("write failed (disk full?)");
        }
        if (cancel.load()) throw Cancelled{};
        fs::rename(partial, target);
        return {};
    } catch (const Cancelled&) {
        std::error_code ignored;
        fs::remove(partial, ignored);
        return QStringLiteral("cancelled");
    } catch (const std::exception& e) {
        std::error_code ignored;
        fs::remove(partial, ignored);
        return QStringLiteral("%1: %2").arg(request.file, QString::fromStdString(e.what()));
    }
}

}  // namespace meshscope::ui
