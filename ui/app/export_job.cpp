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

QString runExport(const ExportRequest& request, const std::function<void(qint64, qint64)>& progress,
                  const std::atomic<bool>& cancel) {
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
