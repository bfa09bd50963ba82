// Where a mixed-tensor fix goes in the user's source, and the fix rewritten
// in the names that hold at that line.
//
// A fix is code a user pastes: it must name things that exist where it
// goes. The agent records, at the incident, the frame where the user's
// name for the plain tensor lives and, in that frame, a name for the
// DTensor operand and its mesh ("at=...; mesh=...; dtensor=..."). With the
// source lines of the birth and of that frame, a fix is placed:
//   - a DTensor stripped by .to_local() / .full_tensor(): the birth line
//     without the strip (the computation stays a DTensor);
//   - torch.zeros(p.shape) and kin, optimizer hyperparameters made tensors:
//     the birth line rewritten (zeros_like(p), the Python floats);
//   - a buffer: distributed right before the op; a parameter a sharding
//     plan left out: after the statement that applied the plan, in the
//     names of the frame that holds the model; a Keras variable no
//     LayoutMap key matched: its key after the last key the user set;
//   - else the promotion of the named tensor right before the statement of
//     the op (the code between its birth and the op was written for a
//     plain tensor), unless the op writes it in place where it is kept.
// What cannot be placed says why (FixPlace::unplaced) instead of guessing.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/fix_suggestion.h"
#include "core/analysis/run_analysis.h"

namespace meshscope {

// Lines of the user's source files, each file read once.
class SourceLines {
  public:
    // Line `n` (1-based) of `file`; nullopt when it cannot be read.
    std::optional<std::string> line(const std::string& file, int n);

  private:
    std::map<std::string, std::optional<std::vector<std::string>>> m_files;
};

// The names the agent recorded for a fix at a mixed-tensor incident
// (IncidentRecord::detail).
struct FixNames {
    std::string file;  // where the user's name for the plain tensor lives
    int line = 0;
    std::string mesh;     // an expression of the DTensor operand's mesh there
    std::string dtensor;  // the DTensor operand's name there
    bool global = false;  // the plain tensor's name is a global of that module
};
FixNames parseFixNames(std::string_view detail);

// `fix` (the origin's fix for `incident`) placed in the source, or marked
// unplaced with the reason.
FixSuggestion placeFix(FixSuggestion fix, const IncidentDetail& incident, SourceLines& source);

}  // namespace meshscope
