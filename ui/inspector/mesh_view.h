#pragma once

// The device mesh of the selected incident or op, painted: one cell per
// rank (1-D and 2-D meshes, dims named), in each cell what that rank holds
// of every DTensor operand ("rows 0-3 of [8, 16]"), and the plain operand
// drawn apart with an arrow into the mesh labelled with what happened to it
// (promoted to which placements, or raised). The same picture as the HTML
// report's, from the same describeLocalPiece().

#include <QWidget>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/run_analysis.h"

namespace meshscope::ui {

struct OpDetail;

struct MeshPicture {
    std::optional<MeshRecord> mesh;
    int rank = 0;  // the rank the selection belongs to
    std::vector<OperandDetail> dtensors;
    std::optional<OperandDetail> plain;
    std::string promotedPlacements;  // empty when the plain tensor was not promoted
    bool reconciled = false;
    std::string action;  // "replicated", "raised", ...
};

class MeshView : public QWidget {
    Q_OBJECT
  public:
    explicit MeshView(QWidget* parent = nullptr);

    void setIncident(const IncidentDetail& detail);
    void setOp(const OpDetail& op);
    void clear();
    const MeshPicture& picture() const { return m_picture; }
    // The text of each cell, top to bottom (tests, copy to clipboard).
    std::vector<std::string> cellLines(size_t cell) const;
    size_t cellCount() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

  protected:
    void paintEvent(QPaintEvent* event) override;

  private:
    QSize cellSize() const;
    int plainWidth() const;
    int arrowWidth() const;
    void paintPlain(QPainter& p, int top);
    void paintArrow(QPainter& p, int x0, int x1, int y);
    void paintCell(QPainter& p, size_t cell, QRect r);

    MeshPicture m_picture;
    bool m_empty = true;
};

}  // namespace meshscope::ui
