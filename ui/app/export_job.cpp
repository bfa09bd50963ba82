#include "ui/app/export_job.h"

#include <QFileInfo>
#include <filesystem>
#include <fstream>
#include <vector>

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

// Writes `target` through `write` into TARGET.partial and renames it when
// complete and not cancelled; on the way out of an exception the partial
// file is removed.
template <typename Write>
void writeFile(const std::filesystem::path& target, const std::atomic<bool>& cancel,
               Write&& write) {
    namespace fs = std::filesystem;
    fs::path partial = target;
    partial += ".partial";
    try {
        {
            std::ofstream out(partial, std::ios::binary | std::ios::trunc);
            if (!out) throw std::runtime_error("cannot write here");
            write(out);
            out.flush();
            if (!out) throw std::runtime_error("write failed (disk full?)");
        }
        if (cancel.load()) throw Cancelled{};
        fs::rename(partial, target);
    } catch (...) {
        std::error_code ignored;
        fs::remove(partial, ignored);
        throw;
    }
}

}  // namespace

QString runExport(const ExportRequest& request, const std::function<void(qint64, qint64)>& progress,
                  const std::atomic<bool>& cancel) {
    namespace fs = std::filesystem;
    fs::path target = request.file.toStdString();
    std::vector<fs::path> written;  // removed again when the export does not finish
    auto undo = [&] {
        std::error_code ignored;
        for (const fs::path& file : written)
            fs::remove(file, ignored);
    };
    auto tick = [&](int64_t done, int64_t total) {
        if (cancel.load()) throw Cancelled{};
        if (progress) progress(done, total);
    };
    try {
        RunReader run = RunReader::open(request.runPath.toStdString());
        switch (request.kind) {
            case ExportRequest::Kind::Report: {
                auto format = reportFormatFromString(request.format.toStdString());
                if (!format)
                    return QStringLiteral("unknown report format '%1'").arg(request.format);
                if (!request.analysis) return QStringLiteral("the run's analysis is not ready yet");
                writeFile(target, cancel, [&](std::ostream& out) {
                    writeReport(*format, run, *request.analysis, out);
                });
                break;
            }
            case ExportRequest::Kind::ChromeTrace:
                writeFile(target, cancel,
                          [&](std::ostream& out) { writeChromeTrace(run, out, tick); });
                break;
            case ExportRequest::Kind::ProfilerTraces: {  // one file per rank into a folder
                std::string problem = prepareProfilerTraceFolder(target);
                if (!problem.empty()) return QString::fromStdString(problem);
                int64_t total = 0, before = 0;
                for (const RankReader& rank : run.ranks())
                    total += rank.summary().ops;
                for (const auto& [rank, name] : profilerTraceFiles(run, false)) {
                    writeFile(target / name, cancel, [&](std::ostream& out) {
                        writeProfilerTrace(run, *rank, out, [&](int64_t done, int64_t) {
                            tick(before + done, total);
                        });
                    });
                    written.push_back(target / name);
                    before += rank->summary().ops;
                }
                break;
            }
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

}  // namespace meshscope::ui
