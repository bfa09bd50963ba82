#pragma once

// Exports the open run from the GUI through the same core writers the CLI
// uses: a report (HTML, Markdown, JSON, CSV, SARIF), a Chrome trace, or a
// folder of torch.profiler traces, one per rank (HTA, TensorBoard). Runs on a
// worker thread with a reader of its own, writes FILE.partial and renames
// it, so a cancelled or failed export leaves no half file.

#include <QString>
#include <atomic>
#include <functional>
#include <memory>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

struct ExportRequest {
    enum class Kind { Report, ChromeTrace, ProfilerTraces };
    Kind kind = Kind::Report;
    QString runPath;
    QString file;    // ProfilerTraces: the folder
    QString format;  // report: html, md, json, csv, sarif
    std::shared_ptr<const RunAnalysis> analysis;
};

// Report format for a file name's extension ("report.sarif" -> "sarif"), or "".
QString reportFormatForFile(const QString& file);
// "HTML (*.html);;Markdown (*.md);;...": the report formats, for a file dialog.
QString reportFileFilter();

// Runs the export; returns an empty string on success, else a one-line error.
// `progress(done, total)` may be called from this thread; `cancel` aborts.
QString runExport(const ExportRequest& request, const std::function<void(qint64, qint64)>& progress,
                  const std::atomic<bool>& cancel);

}  // namespace meshscope::ui
