#pragma once

// What one mixed-tensor incident means, in words, built once from the
// recorded incident: the HTML and Markdown reports, the GUI inspector, the
// JSON report and load_run() all render or serialize this structure, so a
// new incident kind or origin class is explained in one place.

#include <optional>
#include <string>

#include "core/analysis/fix_suggestion.h"
#include "core/analysis/run_analysis.h"

namespace meshscope {

struct IncidentExplanation {
    IncidentKind kind = IncidentKind::MixedTensor;
    std::string kindTitle;  // "An op DTensor has no sharding strategy for"
    // One sentence: the op, the plain operand, its origin and what became
    // of the op ("aten.sub.Tensor got operand 1 (batch torch.float32 [8, 16])
    // as a plain torch.Tensor beside DTensors; origin A (input data not
    // distributed); promoted to DTensor [Shard(0)]").
    std::string summary;
    // Mixed tensors only (empty for other kinds):
    std::string plainOperand;  // "operand 1 batch torch.float32 [8, 16]"
    std::string origin;        // "A - input data not distributed"
    std::string evidence;      // "none recorded" when the agent had none
    std::string createdAt;     // "file.py:12", or "not recorded"
    // What became of the op, under a label: "placements" with "plain (no
    // placement) -> DTensor [Shard(0)]", or "raised" with the error.
    std::string reconciliationLabel, reconciliation;
    std::string policyRule;  // empty: no rule matched (the default applied)
    std::string verdict;     // cross-rank verdict in words; empty: not checked
    FixSuggestion fix;
    std::string fixScope;  // "group #2, 12 incident(s) at train.py:30"; empty: this incident
    // Other kinds: the DTensor operands' placements ("[Shard(dim=1)], ..."),
    // and for hangs the Python stacks of all the rank's threads.
    std::string placements;
    std::string detail;
};

// `group` (the incident's group) and `verdict` (its cross-rank verdict)
// when the caller has them; `evidence` replaces the incident's own evidence
// text when not empty (the analysis keeps them deduplicated).
IncidentExplanation explainIncident(const IncidentDetail& incident,
                                    const IncidentGroup* group = nullptr,
                                    std::optional<Verdict> verdict = std::nullopt,
                                    const std::string& evidence = {});

// How an incident ended (the marker and tag colour, vocabulary.h): INVALID
// when its cross-rank check failed, else promoted or raised by its outcome.
IncidentState incidentState(Outcome outcome, Verdict verdict);

// "verified: the same content on every rank that promoted it", ...
std::string describeVerdict(Verdict verdict);

// The user's name for the plain operand where the op was called ("mask",
// "self.mask"), as the agent found it; "" when none was found.
std::string plainOperandName(const IncidentDetail& incident);

// The fix for this incident: its origin's, in the user's name for the plain
// tensor, and for input data on a mesh without a data-parallel dim the
// replicated batch.
FixSuggestion suggestFixFor(const IncidentDetail& incident);

// "operand 1 batch torch.float32 [8, 16]" for the incident's plain operand.
std::string describePlainOperand(const IncidentDetail& incident);

}  // namespace meshscope
