#pragma once

// The row of filter controls above the incidents table; every change
// applies to the IncidentFilterModel at once.

#include <QWidget>
#include <vector>

class QComboBox;
class QLineEdit;

namespace meshscope::ui {

class IncidentFilterModel;

class IncidentFilterBar : public QWidget {
    Q_OBJECT
  public:
    explicit IncidentFilterBar(IncidentFilterModel* model, QWidget* parent = nullptr);

    // Keeps the chosen rank when the new list still has it (a live run's
    // reload must not drop the user's filter).
    void setRanks(const std::vector<int>& ranks);
    void clear();

  private:
    // One filter per widget: a keystroke re-filters the rows once, not once
    // per field.
    void applyRank();
    void applySteps();
    void applyOrigin();
    void applyAction();
    void applyKind();

    IncidentFilterModel* m_model;
    QComboBox *m_rank, *m_kind, *m_origin, *m_action;
    QLineEdit *m_stepFrom, *m_stepTo, *m_op, *m_file, *m_text;
    bool m_resetting = false;  // clear()/setRanks() change widgets: apply once at the end
};

}  // namespace meshscope::ui
