#pragma once

// The device mesh of the selected incident or op, painted: one cell per
// rank (1-D and 2-D meshes, dims named; more dims fold into the rows), in
// each cell what that rank holds of every DTensor operand ("rows 0-3 of
// [8, 16]"), and the plain operand drawn apart with an arrow into the mesh
// labelled with what happened to it (promoted to which placements, or
// raised). The same picture as the HTML report's: the layout is core's
// meshGrid(). Sizes come from font metrics; colours from the
// palette, so it follows high-DPI scaling and dark themes.

#include <QLine>
#include <QRect>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/mesh_picture.h"
#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

struct OpDetail;

class MeshView : public QWidget {
    Q_OBJECT
  public:
    // More cells than this are not drawn (the title says so): a drawing of
    // thousands of ranks helps nobody and costs a regex per cell and operand.
    static constexpr size_t kMaxCells = 256;

    explicit MeshView(QWidget* parent = nullptr);

    void setIncident(const IncidentDetail& detail);
    void setOp(const OpDetail& op);
    void clear();

    const MeshPicture& picture() const { return m_picture; }
    // Cells drawn, row-major; each cell's text top to bottom ("rank 1 (here)",
    // "op1 rows 0-7 of [16, 32]", ...).
    size_t cellCount() const { return m_cells.size(); }
    const std::vector<std::string>& cellLines(size_t cell) const { return m_cells.at(cell); }
    // The arrow's label ("promoted → [Shard(0)]", "raised"); empty without a plain operand.
    QString arrowLabel() const { return m_arrowLabel; }
    // Whether the plain operand sits above the mesh rather than left of it at `width`.
    bool stackedAt(int width) const { return layoutFor(width).stacked; }
    // The drawing as plain text, for Copy.
    QString describe() const;

    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

  protected:
    void paintEvent(QPaintEvent* event) override;
    void changeEvent(QEvent* event) override;

  private:
    // Text sizes, measured once per content or font change: layout runs on
    // every heightForWidth() call, and shaping text is the expensive part.
    struct Metrics {
        int unit = 4;  // padding: half a line
        int lineHeight = 0;
        QSize cell;
        int rowHeader = 0;  // width of the row-label column (2-D and up)
        int title = 0;
        QSize plain;  // empty without a plain operand
        int arrowLabel = 0;
    };
    // Where everything goes at one widget width.
    struct Layout {
        bool stacked = false;  // plain operand above the mesh (narrow widgets)
        QRect frame;           // the mesh: title, dim headers, cells
        QPoint grid;           // top-left of the first cell
        QRect plain;           // empty without a plain operand
        QLine arrow;
        QRect arrowText;  // where the action label goes
        QSize total;
    };

    void rebuild();
    void rebuildCells();
    void measure();
    void relayout();
    QSize frameSize() const;
    QString noMeshText() const;
    Layout layoutFor(int width) const;
    Layout besideLayout() const;
    Layout stackedLayout() const;
    void placeGrid(Layout& l) const;

    void paintNoMesh(QPainter& p);
    void paintFrame(QPainter& p, const Layout& l);
    void paintHeaders(QPainter& p, const Layout& l);
    void paintCell(QPainter& p, size_t cell, QRect r);
    void paintPlain(QPainter& p, const Layout& l);
    void paintArrow(QPainter& p, const Layout& l);

    MeshPicture m_picture;
    bool m_empty = true;
    size_t m_columns = 1;    // cells per row: the last mesh dim
    size_t m_meshCells = 0;  // ranks on the mesh, drawn or not
    std::vector<std::vector<std::string>> m_cells;
    // What is painted: the same text, cut short (a damaged file's strings
    // can be any length; the painted ones are elided to a few dozen chars).
    std::vector<QStringList> m_cellText;
    std::vector<bool> m_here;  // per cell: the selection's own rank
    QString m_title;
    QStringList m_rowLabels, m_columnLabels, m_plainText;
    QString m_arrowLabel, m_arrowNote;  // note: the action, or why it failed
    Metrics m_metrics;
};

}  // namespace meshscope::ui
