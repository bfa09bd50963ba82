#include "capture/agent/incidents/promotion_plan.h"

namespace meshscope::capture {

Action plannedAction(Action decided, const PlannedOperand& operand, std::string& rule) {
    Action want = decided;
    if (operand.own && operand.own->action != Action::Observed &&
        operand.own->action != Action::StrictError) {
        want = operand.own->action;
        if (want != decided)
            rule += "; operand " + std::to_string(operand.index) + ": " + operand.own->rule;
    }
    if (want == Action::Scalarized && !operand.scalarList && !operand.oneElement)
        want = Action::Replicated;
    return want;
}

}  // namespace meshscope::capture
