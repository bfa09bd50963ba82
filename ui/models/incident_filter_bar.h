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

    void setRanks(const std::vector<int>& ranks);
    void clear();

  private:
    void apply();

    IncidentFilterModel* m_model;
    QComboBox *m_rank, *m_origin, *m_action;
    QLineEdit *m_stepFrom, *m_stepTo, *m_op, *m_file, *m_text;
    bool m_applying = false;  // clear() sets many fields: apply once at the end
};

}  // namespace meshscope::ui
