#include "ui/app/main_window.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressDialog>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>

#include "ui/app/export_job.h"
#include "ui/app/shortcuts_dialog.h"
#include "ui/app/time_dock.h"
#include "ui/inspector/inspector_widget.h"
#include "ui/inspector/op_detail.h"
#include "ui/models/incident_filter_bar.h"
#include "ui/models/incident_filter_model.h"
#include "ui/models/incident_group_model.h"
#include "ui/models/incident_table_model.h"
#include "ui/models/rank_stop_model.h"
#include "ui/models/replica_drift_model.h"
#include "ui/timeline/timeline_canvas.h"

namespace meshscope::ui {

namespace {

constexpr int kMaxRecent = 10;

const IncidentRef* findRef(const RunAnalysis& a, int rank, int64_t seq) {
    auto it = std::lower_bound(a.incidents.begin(), a.incidents.end(), std::pair(rank, seq),
                               [](const IncidentRef& r, const std::pair<int, int64_t>& k) {
                                   return std::pair(r.rank, r.seq.value()) < k;
                               });
    return it != a.incidents.end() && it->rank == rank && it->seq.value() == seq ? &*it : nullptr;
}

const PromotionCheck* findCheck(const RunAnalysis& a, const IncidentRef& ref) {
    for (const PromotionCheck& c : a.promotionChecks)
        if (c.group == ref.group && c.step == ref.step && c.occurrence == ref.occurrence) return &c;
    return nullptr;
}

std::optional<IncidentDetail> incidentDetail(const RankReader& reader, int64_t seq) {
    auto rows = reader.incidentsAfter(IncidentSeq{seq - 1}, 1, true);
    if (rows.empty() || rows[0].seq.value() != seq) return std::nullopt;
    return describeIncident(reader, rows[0]);
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), m_session(std::make_unique<RunSession>()) {
    setWindowTitle("meshscope");
    setAcceptDrops(true);
    m_canvas = new TimelineCanvas(this);
    setCentralWidget(m_canvas);
    m_replay = new ReplayController(this);
    buildActions();
    buildMenus();
    buildDocks();
    buildReplayBar();
    connectSession();
    m_statusRun = new QLabel(this);
    m_statusProblems = new QLabel(this);
    m_statusProblems->setStyleSheet("color: #c62828;");
    m_statusLive = new QLabel(this);
    statusBar()->addWidget(m_statusRun, 1);
    statusBar()->addPermanentWidget(m_statusProblems);
    statusBar()->addPermanentWidget(m_statusLive);
    restoreSettings();
    updateStatus();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildActions() {
    auto make = [this](const QString& text, const QKeySequence& key, auto slot) {
        auto* a = new QAction(text, this);
        a->setShortcut(key);
        a->setShortcutContext(Qt::ApplicationShortcut);
        connect(a, &QAction::triggered, this, slot);
        addAction(a);
        return a;
    };
    m_openAction =
        make("&Open run directory...", QKeySequence::Open, [this] { chooseRunDirectory(); });
    m_openFileAction =
        make("Open &rank file...", QKeySequence("Ctrl+Shift+O"), [this] { chooseRankFile(); });
    m_exportReportAction =
        make("Export &report...", QKeySequence("Ctrl+E"), [this] { exportReport(); });
    m_exportTraceAction =
        make("Export Chrome &trace...", QKeySequence("Ctrl+T"), [this] { exportTrace(); });
    m_exportProfilerAction = make("Export torch.&profiler traces (HTA, TensorBoard)...",
                                  QKeySequence(), [this] { exportProfilerTraces(); });
    m_savePngAction =
        make("Save timeline as &PNG...", QKeySequence("Ctrl+S"), [this] { saveTimelineAs(); });
    m_quitAction = make("&Quit", QKeySequence::Quit, [this] { close(); });
    m_fitAction = make("&Fit whole run", QKeySequence("Home"), [this] { m_canvas->fitAll(); });
    m_followAction = make("&Follow live run", QKeySequence("F"),
                          [this](bool on) { m_canvas->setFollowLive(on); });
    m_followAction->setCheckable(true);
    m_alignStepAction = make("Align ranks by &step", QKeySequence("Ctrl+L"), [this](bool on) {
        setAlignMode(on ? AlignMode::Step : AlignMode::WallClock);
    });
    m_alignStepAction->setCheckable(true);
    m_playAction = make("&Play / pause", QKeySequence("Space"), [this] { m_replay->togglePlay(); });
    m_nextOpAction = make("Next op", QKeySequence("."), [this] { m_replay->stepOp(1); });
    m_prevOpAction = make("Previous op", QKeySequence(","), [this] { m_replay->stepOp(-1); });
    m_nextIncidentAction =
        make("Next incident", QKeySequence("N"), [this] { m_replay->stepIncident(1); });
    m_prevIncidentAction =
        make("Previous incident", QKeySequence("Shift+N"), [this] { m_replay->stepIncident(-1); });
    m_copyAction = make("&Copy inspector text", QKeySequence("Ctrl+Shift+C"),
                        [this] { QApplication::clipboard()->setText(m_inspector->plainText()); });
    m_helpAction =
        make("&Keyboard shortcuts", QKeySequence::HelpContents, [this] { showShortcuts(); });
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu("&File");
    file->addAction(m_openAction);
    file->addAction(m_openFileAction);
    m_recentMenu = file->addMenu("Open &recent");
    file->addSeparator();
    file->addAction(m_exportReportAction);
    file->addAction(m_exportTraceAction);
    file->addAction(m_exportProfilerAction);
    file->addAction(m_savePngAction);
    file->addSeparator();
    file->addAction(m_quitAction);
    QMenu* view = menuBar()->addMenu("&View");
    view->addAction(m_fitAction);
    view->addAction(m_followAction);
    view->addAction(m_alignStepAction);
    QMenu* replay = menuBar()->addMenu("&Replay");
    for (QAction* a :
         {m_playAction, m_nextOpAction, m_prevOpAction, m_nextIncidentAction, m_prevIncidentAction})
        replay->addAction(a);
    QMenu* edit = menuBar()->addMenu("&Edit");
    edit->addAction(m_copyAction);
    QMenu* help = menuBar()->addMenu("&Help");
    help->addAction(m_helpAction);
    rebuildRecentMenu();
}

namespace {

// A table of whole rows, one selected at a time, for the docks.
QTableView* rowTable(QAbstractItemModel* model, const char* name, QWidget* parent) {
    auto* table = new QTableView(parent);
    table->setObjectName(name);
    table->setModel(model);
    table->setSelectionBehavior(QAbstractItemView::SelectRows);
    table->setSelectionMode(QAbstractItemView::SingleSelection);
    table->verticalHeader()->hide();
    table->horizontalHeader()->setStretchLastSection(true);
    return table;
}

}  // namespace

void MainWindow::buildDocks() {
    m_model = new IncidentTableModel(this);
    m_filter = new IncidentFilterModel(this);
    m_filter->setSourceModel(m_model);
    auto* panel = new QWidget(this);
    auto* layout = new QVBoxLayout(panel);
    layout->setContentsMargins(2, 2, 2, 2);
    m_filterBar = new IncidentFilterBar(m_filter, panel);
    m_table = rowTable(m_filter, "incidentTable", panel);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(IncidentTableModel::Rank, Qt::AscendingOrder);
    layout->addWidget(m_filterBar);
    layout->addWidget(m_table);
    // By call site first, as the reports group them: the places to change.
    m_groups = new IncidentGroupModel(this);
    m_groupsTable = rowTable(m_groups, "groupsTable", this);
    m_incidentTabs = new QTabWidget(this);
    m_incidentTabs->setObjectName("incidentTabs");
    m_incidentTabs->addTab(m_groupsTable, "By call site");
    m_incidentTabs->addTab(panel, "Each incident");
    auto* incidents = new QDockWidget("Incidents", this);
    incidents->setObjectName("incidentsDock");
    incidents->setWidget(m_incidentTabs);
    // A group shows its first incident everywhere (timeline, inspector).
    auto showGroup = [this](const QModelIndex& index) {
        if (!index.isValid()) return;
        select({TimelineSelection::Kind::Incident, index.data(IncidentGroupModel::RankRole).toInt(),
                index.data(IncidentGroupModel::SeqRole).toLongLong()},
               true);
    };
    connect(m_groupsTable, &QTableView::activated, this, showGroup);
    connect(m_groupsTable, &QTableView::clicked, this, showGroup);
    addDockWidget(Qt::BottomDockWidgetArea, incidents);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this] { onTableRowChanged(); });

    m_inspector = new InspectorWidget(this);
    auto* inspector = new QDockWidget("Inspector", this);
    inspector->setObjectName("inspectorDock");
    inspector->setWidget(m_inspector);
    addDockWidget(Qt::RightDockWidgetArea, inspector);

    buildStopsDock();
    buildReplicasDock();
    buildTimeDock();

    connect(m_canvas, &TimelineCanvas::selectionChanged, this,
            [this](const TimelineSelection& item) { select(item, false); });
    connect(m_canvas, &TimelineCanvas::followLiveChanged, m_followAction, &QAction::setChecked);
}

// Where each rank stopped, under the incidents; a row shows its collective
// incident (a hang's stacks in the inspector) or its last collective.
void MainWindow::buildStopsDock() {
    m_stops = new RankStopModel(this);
    m_stopsTable = rowTable(m_stops, "stopsTable", this);
    m_stopsTable->setWordWrap(true);  // a state line is a sentence; rows grow to show it
    auto* dock = new QDockWidget("Where it stopped", this);
    dock->setObjectName("stopsDock");
    dock->setWidget(m_stopsTable);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    connect(m_stopsTable, &QTableView::activated, this, &MainWindow::onStopActivated);
    connect(m_stopsTable, &QTableView::clicked, this, &MainWindow::onStopActivated);
}

// The replica check across ranks and steps, tabbed with the incidents (its
// step columns want the width): what drifts apart silently
// (RunAnalysis::replicas). It comes forward when something drifts.
void MainWindow::buildReplicasDock() {
    m_replicas = new ReplicaDriftModel(this);
    m_replicasTable = rowTable(m_replicas, "replicasTable", this);
    m_replicasTable->horizontalHeader()->setStretchLastSection(false);
    auto* dock = new QDockWidget("Replicas", this);
    dock->setObjectName("replicasDock");
    dock->setWidget(m_replicasTable);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    if (auto* incidents = findChild<QDockWidget*>("incidentsDock")) {
        tabifyDockWidget(incidents, dock);
        incidents->raise();  // the incidents first, unless something drifts
    }
}

// Where the time goes, tabbed with the incidents: the ranks overview, op
// statistics and the slowest rank of each step. A cell or row shows that
// rank's lanes at those steps in the timeline.
void MainWindow::buildTimeDock() {
    m_time = new TimeDock(this);
    auto* dock = new QDockWidget("Where the time goes", this);
    dock->setObjectName("timeDock");
    dock->setWidget(m_time);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    if (auto* incidents = findChild<QDockWidget*>("incidentsDock")) {
        tabifyDockWidget(incidents, dock);
        incidents->raise();
    }
    connect(m_time, &TimeDock::rankActivated, this,
            [this](int rank, qint64 first, qint64 last) { m_canvas->showRank(rank, first, last); });
}

void MainWindow::onStopActivated(const QModelIndex& index) {
    auto analysis = m_session->analysis();
    auto data = m_session->timeline();
    if (!index.isValid() || !analysis || !data) return;
    int rank = index.data(RankStopModel::RankRole).toInt();
    qint64 time = index.data(RankStopModel::TimeRole).toLongLong();
    if (!index.data(RankStopModel::StoppedInRole).isValid()) {
        RankTimeline* r = data->findRank(rank);
        if (r && time >= 0) {
            double t = r->align.toAligned(time);
            m_canvas->zoomToRange(t - 1e6, t + 1e6);
        }
        return;
    }
    for (const IncidentRef& ref : analysis->incidents)  // the collective incident it stopped in
        if (ref.rank == rank && ref.timeNs == time && isCollectiveKind(ref.kind))
            return select({TimelineSelection::Kind::Incident, rank, ref.seq.value()}, true);
}

void MainWindow::buildReplayBar() {
    QToolBar* bar = addToolBar("Replay");
    bar->setObjectName("replayBar");
    bar->addAction(m_prevIncidentAction);
    bar->addAction(m_prevOpAction);
    bar->addAction(m_playAction);
    bar->addAction(m_nextOpAction);
    bar->addAction(m_nextIncidentAction);
    m_speed = new QComboBox(bar);
    for (int s : {1, 4, 16, 64, 256})
        m_speed->addItem(QStringLiteral("%1 op/tick").arg(s), s);
    connect(m_speed, &QComboBox::currentIndexChanged, this,
            [this] { m_replay->setSpeed(m_speed->currentData().toInt()); });
    bar->addWidget(m_speed);
    bar->addSeparator();
    bar->addAction(m_fitAction);
    bar->addAction(m_followAction);
    bar->addAction(m_alignStepAction);
    connect(m_replay, &ReplayController::cursorMoved, this,
            [this](double t, const TimelineSelection& item) {
                m_canvas->setReplayCursor(t);
                if (item.kind != TimelineSelection::Kind::None) select(item, false);
            });
    connect(m_replay, &ReplayController::playingChanged, this,
            [this](bool playing) { m_playAction->setText(playing ? "Pause" : "Play"); });
    m_playAction->setText("Play");
}

void MainWindow::connectSession() {
    RunSession* s = m_session.get();
    connect(s, &RunSession::progress, this, &MainWindow::onProgress);
    connect(s, &RunSession::timelineReady, this, &MainWindow::onTimelineReady);
    connect(s, &RunSession::analysisReady, this, &MainWindow::onAnalysisReady);
    connect(s, &RunSession::loadFailed, this, [this](const QString& message) {
        showLoadError(QStringLiteral("Cannot open the run"), message);
    });
    connect(s, &RunSession::analysisFailed, this, [this](const QString& message) {
        showLoadError(QStringLiteral("Cannot analyse the run"), message);
    });
    connect(s, &RunSession::cancelled, this, [this] {
        closeProgress();
        updateStatus();
    });
    connect(s, &RunSession::grew, this, [this] {
        m_canvas->dataChanged();
        updateStatus();
    });
    connect(s, &RunSession::rankStateChanged, this, [this] {
        m_canvas->dataChanged();
        updateStatus();
    });
    connect(s, &RunSession::liveChanged, this, [this](bool live) {
        if (live) m_canvas->setFollowLive(true);
        updateStatus();
    });
}

void MainWindow::showLoadError(const QString& what, const QString& message) {
    closeProgress();
    updateStatus();
    m_statusRun->setText(QStringLiteral("%1: %2").arg(what, message.section('\n', 0, 0)));
    // Window-modal but not blocking: live follow and tests keep running.
    auto* box =
        new QMessageBox(QMessageBox::Warning, "meshscope",
                        QStringLiteral("%1:\n%2").arg(what, message), QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::openRun(const QString& path) {
    m_replay->setData(nullptr);
    m_canvas->setData(nullptr);
    m_model->setAnalysis(nullptr);
    m_stops->setAnalysis(nullptr);
    m_groups->setAnalysis(nullptr);
    m_replicas->setAnalysis(nullptr);
    m_time->setAnalysis(nullptr);
    m_inspector->clear();
    setWindowTitle(QStringLiteral("meshscope - %1").arg(QFileInfo(path).fileName()));
    m_progress = new QProgressDialog(QStringLiteral("Opening %1").arg(path), "Cancel", 0, 0, this);
    m_progress->setWindowModality(Qt::WindowModal);
    m_progress->setMinimumDuration(400);
    connect(m_progress, &QProgressDialog::canceled, m_session.get(), &RunSession::cancel);
    connect(m_progress, &QProgressDialog::canceled, this,
            [this] { m_statusRun->setText("Loading cancelled."); });
    m_session->open(path);
    rememberRecent(path);
    updateStatus();
}

void MainWindow::onProgress(const QString& stage, qint64 done, qint64 total) {
    if (!m_progress) return;
    m_progress->setLabelText(QStringLiteral("%1 (%2%3)")
                                 .arg(stage)
                                 .arg(done)
                                 .arg(total > 0 ? QStringLiteral(" of %1").arg(total) : QString()));
    if (total > 0) {
        // QProgressDialog takes ints: scale to per mille.
        m_progress->setMaximum(1000);
        m_progress->setValue(int(std::min<qint64>(1000, done * 1000 / total)));
    }
}

void MainWindow::closeProgress() {
    if (m_progress) {
        m_progress->reset();
        m_progress->deleteLater();
    }
}

void MainWindow::onTimelineReady() {
    auto data = m_session->timeline();
    data->realign(m_alignStepAction->isChecked() ? AlignMode::Step : AlignMode::WallClock);
    m_canvas->setData(data);
    m_replay->setData(data);
    std::vector<int> ranks;
    for (const RankTimeline& r : data->ranks)
        ranks.push_back(r.rank);
    m_filterBar->setRanks(ranks);
    updateStatus();
}

void MainWindow::onAnalysisReady() {
    closeProgress();
    TimelineSelection keep = m_canvas->selection();
    m_model->setAnalysis(m_session->analysis());
    m_table->resizeColumnsToContents();
    m_stops->setAnalysis(m_session->analysis());
    m_groups->setAnalysis(m_session->analysis());
    for (int c : {IncidentGroupModel::Count, IncidentGroupModel::Site, IncidentGroupModel::Op,
                  IncidentGroupModel::What, IncidentGroupModel::Ranks})
        m_groupsTable->resizeColumnToContents(c);
    m_stopsTable->resizeColumnToContents(RankStopModel::Rank);
    m_stopsTable->resizeRowsToContents();
    m_replicas->setAnalysis(m_session->analysis());
    m_replicasTable->resizeColumnsToContents();
    m_time->setAnalysis(m_session->analysis());
    // A run with nothing wrong opens on where its time goes; a straggler
    // brings it forward too (after a drift, which matters more).
    {
        const RunAnalysis& a = *m_session->analysis();
        bool drifts = !a.replicas.drifts.empty();
        bool healthy = a.incidents.empty() && !a.time.columns.empty();
        if (!drifts && (healthy || !m_time->stragglerText().isEmpty()))
            if (auto* dock = findChild<QDockWidget*>("timeDock")) dock->raise();
    }
    if (m_replicas->rowCount() > 0 && m_session->analysis()->replicas.drifts.size() > 0)
        if (auto* dock = findChild<QDockWidget*>("replicasDock")) dock->raise();
    m_canvas->dataChanged();
    if (keep.kind == TimelineSelection::Kind::Incident) select(keep, false);
    updateStatus();
}

void MainWindow::onTableRowChanged() {
    if (m_syncing) return;
    QModelIndex current = m_table->currentIndex();
    if (!current.isValid()) return;
    TimelineSelection item{TimelineSelection::Kind::Incident,
                           current.data(IncidentTableModel::RankRole).toInt(),
                           current.data(IncidentTableModel::SeqRole).toLongLong()};
    select(item, true);
}

void MainWindow::select(const TimelineSelection& item, bool centre) {
    m_syncing = true;
    m_canvas->setSelection(item, centre);
    QModelIndex row;
    if (item.kind == TimelineSelection::Kind::Incident)
        row = m_filter->mapFromSource(m_model->indexOf(item.rank, item.seq));
    if (row.isValid()) {
        m_table->selectionModel()->setCurrentIndex(
            row, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        m_table->scrollTo(row);
    } else {
        m_table->clearSelection();
    }
    m_syncing = false;
    showInspectorFor(item);
}

void MainWindow::showInspectorFor(const TimelineSelection& item) {
    const RankReader* reader = m_session->rankReader(item.rank);
    if (item.kind == TimelineSelection::Kind::None || !reader) {
        m_inspector->clear();
        return;
    }
    try {
        auto analysis = m_session->analysis();
        if (item.kind == TimelineSelection::Kind::Incident) {
            auto detail = incidentDetail(*reader, item.seq);
            if (!detail) return m_inspector->showMessage("This incident is not in the rank file.");
            const IncidentRef* ref = analysis ? findRef(*analysis, item.rank, item.seq) : nullptr;
            const IncidentGroup* group =
                ref && ref->group >= 0 ? &analysis->groups[size_t(ref->group)] : nullptr;
            const PromotionCheck* check = ref ? findCheck(*analysis, *ref) : nullptr;
            std::string evidence = ref && ref->evidence < analysis->evidenceTexts.size()
                                       ? analysis->evidenceTexts[ref->evidence]
                                       : detail->evidence;
            m_inspector->showIncident(*detail, ref, group, check, evidence);
        } else if (item.kind == TimelineSelection::Kind::Op) {
            auto op = describeOp(*reader, OpSeq{item.seq});
            if (!op) return m_inspector->showMessage("This op is not in the rank file.");
            std::optional<IncidentDetail> reconciled;
            if (op->reconciles) reconciled = incidentDetail(*reader, op->reconciles.value());
            m_inspector->showOp(*op, reconciled ? &*reconciled : nullptr);
        } else {
            m_inspector->showMessage(
                QStringLiteral("Collective #%1 on rank %2.").arg(item.seq).arg(item.rank));
        }
    } catch (const std::exception& e) {
        m_inspector->showMessage(QStringLiteral("Cannot read this item: %1").arg(e.what()));
    }
}

QString MainWindow::statusText() const {
    return m_statusRun->text() + " " + m_statusProblems->text() + " " + m_statusLive->text();
}

void MainWindow::updateStatus() {
    auto data = m_session->timeline();
    if (!data || m_session->path().isEmpty()) {
        m_statusRun->setText(m_session->loading() ? "Loading..." : "No run open.");
        m_statusProblems->clear();
        m_statusLive->clear();
        return;
    }
    int64_t incidents = 0;
    int stopped = 0;
    for (const RankTimeline& r : data->ranks) {
        incidents += int64_t(r.incidents.size());
        stopped += r.state == RankState::Stopped;
    }
    QString text = QStringLiteral("%1 rank(s), %2 ops, %3 incident(s)")
                       .arg(data->ranks.size())
                       .arg(data->totalOps())
                       .arg(incidents);
    if (auto a = m_session->analysis(); a && !a->findings.empty())
        text += QStringLiteral(" - %1 finding(s): %2")
                    .arg(a->findings.size())
                    .arg(QString::fromStdString(a->findings.front().message));
    m_statusRun->setText(text);
    QStringList problems = m_session->problems();
    m_statusProblems->setText(
        problems.isEmpty()
            ? QString()
            : QStringLiteral("%1 problem(s): %2").arg(problems.size()).arg(problems.front()));
    m_statusProblems->setToolTip(problems.join('\n'));
    QString live = m_session->live() ? "LIVE" : "";
    if (stopped) live += QStringLiteral(" %1 rank(s) stopped writing").arg(stopped);
    m_statusLive->setText(live.trimmed());
}

void MainWindow::chooseRunDirectory() {
    QString dir = QFileDialog::getExistingDirectory(this, "Open run directory",
                                                    QSettings().value("lastDir").toString());
    if (dir.isEmpty()) return;
    QSettings().setValue("lastDir", QFileInfo(dir).absolutePath());
    openRun(dir);
}

void MainWindow::chooseRankFile() {
    QString file = QFileDialog::getOpenFileName(this, "Open rank file",
                                                QSettings().value("lastDir").toString(),
                                                "meshscope rank files (*.msdb);;All files (*)");
    if (file.isEmpty()) return;
    QSettings().setValue("lastDir", QFileInfo(file).absolutePath());
    openRun(file);
}

void MainWindow::rememberRecent(const QString& path) {
    QSettings settings;
    QStringList recent = settings.value("recentRuns").toStringList();
    QString absolute = QFileInfo(path).absoluteFilePath();
    recent.removeAll(absolute);
    recent.prepend(absolute);
    while (recent.size() > kMaxRecent)
        recent.removeLast();
    settings.setValue("recentRuns", recent);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    m_recentMenu->clear();
    QStringList recent = QSettings().value("recentRuns").toStringList();
    for (const QString& path : recent)
        m_recentMenu->addAction(path, this, [this, path] { openRun(path); });
    m_recentMenu->setEnabled(!recent.isEmpty());
}

void MainWindow::restoreSettings() {
    QSettings settings;
    restoreGeometry(settings.value("window/geometry").toByteArray());
    if (!restoreState(settings.value("window/state").toByteArray())) {
        // First start: room for the inspector's tables and the mesh drawing.
        resizeDocks({findChild<QDockWidget*>("inspectorDock")}, {560}, Qt::Horizontal);
        resizeDocks({findChild<QDockWidget*>("incidentsDock")}, {260}, Qt::Vertical);
        resizeDocks(
            {findChild<QDockWidget*>("incidentsDock"), findChild<QDockWidget*>("stopsDock")},
            {900, 420}, Qt::Horizontal);
    }
    m_alignStepAction->setChecked(settings.value("view/alignByStep", false).toBool());
    int speed = m_speed->findData(settings.value("replay/speed", 1).toInt());
    m_speed->setCurrentIndex(std::max(speed, 0));
}

void MainWindow::closeEvent(QCloseEvent* event) {
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    settings.setValue("view/alignByStep", m_alignStepAction->isChecked());
    settings.setValue("replay/speed", m_speed->currentData());
    m_session->cancel();
    QMainWindow::closeEvent(event);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile()) {
            openRun(url.toLocalFile());
            event->acceptProposedAction();
            return;
        }
}

void MainWindow::setAlignMode(AlignMode mode) {
    if (auto data = m_session->timeline()) {
        data->realign(mode);
        m_canvas->dataChanged();
        m_canvas->fitAll();
    }
}

bool MainWindow::saveTimelinePng(const QString& file) {
    QImage image = m_canvas->grabFramebuffer();
    return !image.isNull() && image.save(file, "PNG");
}

void MainWindow::saveTimelineAs() {
    QString file = QFileDialog::getSaveFileName(this, "Save timeline as PNG", "timeline.png",
                                                "PNG images (*.png)");
    if (file.isEmpty()) return;
    if (!saveTimelinePng(file))
        QMessageBox::warning(this, "meshscope", QStringLiteral("Cannot write %1").arg(file));
}

namespace {

// Runs an export on a worker thread behind a cancellable progress dialog.
QString runExportWithProgress(QWidget* parent, const ExportRequest& request, bool interactive) {
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    QPointer<QProgressDialog> dialog;
    if (interactive) {
        dialog = new QProgressDialog(QStringLiteral("Writing %1").arg(request.file), "Cancel", 0,
                                     1000, parent);
        dialog->setWindowModality(Qt::WindowModal);
        dialog->setMinimumDuration(300);
        QObject::connect(dialog, &QProgressDialog::canceled, [cancel] { cancel->store(true); });
    }
    QFuture<QString> future = QtConcurrent::run([request, cancel, dialog] {
        return runExport(
            request,
            [dialog](qint64 done, qint64 total) {
                if (total <= 0) return;
                int value = int(std::min<qint64>(999, done * 1000 / total));
                QMetaObject::invokeMethod(dialog, [dialog, value] {
                    if (dialog) dialog->setValue(value);
                });
            },
            *cancel);
    });
    while (!future.isFinished())
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    if (dialog) dialog->deleteLater();
    return future.result();
}

}  // namespace

QString MainWindow::exportReportBlocking(const QString& file, const QString& format) {
    ExportRequest request{ExportRequest::Kind::Report, m_session->path(), file, format,
                          m_session->analysis()};
    return runExportWithProgress(this, request, false);
}

QString MainWindow::exportTraceBlocking(const QString& file) {
    ExportRequest request{ExportRequest::Kind::ChromeTrace, m_session->path(), file, {}, nullptr};
    return runExportWithProgress(this, request, false);
}

QString MainWindow::exportProfilerTracesBlocking(const QString& folder) {
    ExportRequest request{
        ExportRequest::Kind::ProfilerTraces, m_session->path(), folder, {}, nullptr};
    return runExportWithProgress(this, request, false);
}

void MainWindow::exportReport() {
    if (!m_session->analysis()) {
        QMessageBox::information(this, "meshscope", "Open a run and wait for its analysis first.");
        return;
    }
    QString file = QFileDialog::getSaveFileName(this, "Export report", "meshscope-report.html",
                                                reportFileFilter());
    if (file.isEmpty()) return;
    QString format = reportFormatForFile(file);
    if (format.isEmpty()) {
        QMessageBox::warning(this, "meshscope",
                             "Name the file after a report format (" +
                                 reportFileFilter().replace(";;", ", ") + ") to pick it.");
        return;
    }
    exportWithDialog(
        {ExportRequest::Kind::Report, m_session->path(), file, format, m_session->analysis()},
        QStringLiteral("Wrote %1").arg(file));
}

void MainWindow::exportTrace() {
    if (m_session->path().isEmpty()) return;
    QString file = QFileDialog::getSaveFileName(this, "Export Chrome trace", "meshscope-trace.json",
                                                "Chrome trace JSON (*.json)");
    if (file.isEmpty()) return;
    exportWithDialog({ExportRequest::Kind::ChromeTrace, m_session->path(), file, {}, nullptr},
                     QStringLiteral("Wrote %1 (open it in ui.perfetto.dev)").arg(file));
}

void MainWindow::exportProfilerTraces() {
    if (m_session->path().isEmpty()) return;
    QString folder = QFileDialog::getExistingDirectory(
        this, "Export torch.profiler traces into an empty folder");
    if (folder.isEmpty()) return;
    exportWithDialog(
        {ExportRequest::Kind::ProfilerTraces, m_session->path(), folder, {}, nullptr},
        QStringLiteral("Wrote a trace per rank into %1 (HTA: TraceAnalysis(trace_dir=...); "
                       "tensorboard --logdir ...)")
            .arg(folder));
}

// An export the user asked for: a progress dialog with cancel, then a
// warning on an error or `done` in the status bar (a cancel says nothing).
void MainWindow::exportWithDialog(const ExportRequest& request, const QString& done) {
    QString error = runExportWithProgress(this, request, true);
    if (error.isEmpty())
        statusBar()->showMessage(done, 5000);
    else if (error != "cancelled")
        QMessageBox::warning(this, "meshscope", error);
}

void MainWindow::showShortcuts() {
    ShortcutsDialog dialog(actions(), this);
    dialog.exec();
}

}  // namespace meshscope::ui
