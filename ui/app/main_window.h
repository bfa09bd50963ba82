#pragma once

// The meshscope-gui window: the timeline canvas in the centre, the
// incidents by call site and one by one, the inspector and where each rank stopped in docks, a
// replay toolbar, menus for opening, exporting and views. It wires the pieces together: the session
// loads and follows the run; selection flows both ways between table and
// timeline and into the inspector; the replay cursor drives all three.
// Window layout, recent runs and view settings persist in QSettings.

#include <QMainWindow>
#include <QPointer>
#include <memory>

#include "ui/app/replay_controller.h"
#include "ui/app/run_session.h"
#include "ui/timeline/timeline_tracks.h"

class QAction;
class QLabel;
class QMenu;
class QProgressDialog;
class QTableView;
class QComboBox;
class QTabWidget;

namespace meshscope::ui {

class TimelineCanvas;
struct ExportRequest;
class IncidentTableModel;
class IncidentFilterModel;
class IncidentFilterBar;
class InspectorWidget;
class RankStopModel;
class IncidentGroupModel;
class ReplicaDriftModel;
class TimeDock;

class MainWindow : public QMainWindow {
    Q_OBJECT
  public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    void openRun(const QString& path);

    // For tests and benchmarks.
    RunSession& session() { return *m_session; }
    TimelineCanvas& canvas() { return *m_canvas; }
    QTableView& incidentTable() { return *m_table; }
    IncidentTableModel& incidentModel() { return *m_model; }
    IncidentFilterModel& incidentFilter() { return *m_filter; }
    InspectorWidget& inspector() { return *m_inspector; }
    QTableView& stopsTable() { return *m_stopsTable; }
    RankStopModel& stopsModel() { return *m_stops; }
    QTableView& groupsTable() { return *m_groupsTable; }
    QTableView& replicasTable() { return *m_replicasTable; }
    ReplicaDriftModel& replicasModel() { return *m_replicas; }
    IncidentGroupModel& groupsModel() { return *m_groups; }
    QTabWidget& incidentTabs() { return *m_incidentTabs; }
    TimeDock& timeDock() { return *m_time; }
    ReplayController& replay() { return *m_replay; }
    QString statusText() const;
    // Shows an item everywhere: timeline, table row and inspector.
    void select(const TimelineSelection& item, bool centre);
    bool saveTimelinePng(const QString& file);
    // Runs an export to `file` and waits for it (tests, scripting); returns
    // the error, empty on success.
    QString exportReportBlocking(const QString& file, const QString& format);
    QString exportTraceBlocking(const QString& file);
    // One torch.profiler trace per rank into `folder` (HTA, TensorBoard).
    QString exportProfilerTracesBlocking(const QString& folder);

  protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

  private:
    void buildActions();
    void buildMenus();
    void buildDocks();
    void buildReplayBar();
    void connectSession();
    void restoreSettings();
    void rememberRecent(const QString& path);
    void rebuildRecentMenu();
    void onTimelineReady();
    void onAnalysisReady();
    void onProgress(const QString& stage, qint64 done, qint64 total);
    void onTableRowChanged();
    void onStopActivated(const QModelIndex& index);
    void buildStopsDock();
    void buildReplicasDock();
    void buildTimeDock();
    void showInspectorFor(const TimelineSelection& item);
    void updateStatus();
    void chooseRunDirectory();
    void chooseRankFile();
    void exportReport();
    void exportTrace();
    void exportProfilerTraces();
    void exportWithDialog(const ExportRequest& request, const QString& done);
    void saveTimelineAs();
    void showShortcuts();
    void setAlignMode(AlignMode mode);
    void closeProgress();
    // The status line and a non-blocking message box for a load that failed.
    void showLoadError(const QString& what, const QString& message);

    std::unique_ptr<RunSession> m_session;
    ReplayController* m_replay = nullptr;
    TimelineCanvas* m_canvas = nullptr;
    IncidentTableModel* m_model = nullptr;
    IncidentFilterModel* m_filter = nullptr;
    IncidentFilterBar* m_filterBar = nullptr;
    QTableView* m_table = nullptr;
    InspectorWidget* m_inspector = nullptr;
    RankStopModel* m_stops = nullptr;
    QTableView* m_stopsTable = nullptr;
    ReplicaDriftModel* m_replicas = nullptr;
    QTableView* m_replicasTable = nullptr;
    IncidentGroupModel* m_groups = nullptr;
    QTableView* m_groupsTable = nullptr;
    QTabWidget* m_incidentTabs = nullptr;
    TimeDock* m_time = nullptr;
    QLabel* m_statusRun = nullptr;
    QLabel* m_statusProblems = nullptr;
    QLabel* m_statusLive = nullptr;
    QMenu* m_recentMenu = nullptr;
    QPointer<QProgressDialog> m_progress;
    QAction *m_openAction = nullptr, *m_openFileAction = nullptr, *m_exportReportAction = nullptr,
            *m_exportTraceAction = nullptr, *m_exportProfilerAction = nullptr,
            *m_savePngAction = nullptr, *m_quitAction = nullptr, *m_fitAction = nullptr,
            *m_followAction = nullptr, *m_alignStepAction = nullptr, *m_playAction = nullptr,
            *m_nextOpAction = nullptr, *m_prevOpAction = nullptr, *m_nextIncidentAction = nullptr,
            *m_prevIncidentAction = nullptr, *m_copyAction = nullptr, *m_helpAction = nullptr;
    QComboBox* m_speed = nullptr;
    bool m_syncing = false;  // guards table <-> timeline selection echo
};

}  // namespace meshscope::ui
