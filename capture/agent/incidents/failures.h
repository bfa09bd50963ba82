#pragma once

// Failures other than mixed tensors, as the agent sees them. An error that
// DTensor's dispatch or a redistribution raises becomes an incident
// (recorded and flushed before the exception propagates, with a note on the
// exception naming the incident and its fix); a collective's failures and
// hangs are the CollectiveTracker's (collective_tracker.h). Internal to the
// agent.

#include <Python.h>

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/model/vocabulary.h"
#include "core/store/records.h"

namespace meshscope::capture {

// The Python stacks of all threads of this process, as `py-spy dump`
// prints them (innermost call last). Requires the GIL.
std::string threadStacks();

// The note meshscope adds to a failure's exception: what was recorded,
// where, and the fix.
std::string failureNote(IncidentKind kind, const std::string& what, const std::string& where,
                        const std::string& error, const std::string& fixSummary,
                        const std::string& fixCode, IncidentSeq seq, const std::string& path);

// Whether the exception `value` was already recorded as an incident (an
// error passes through several hooks on its way out). Require the GIL.
bool alreadyRecorded(PyObject* value);
// Marks `value` recorded and adds meshscope's `note` to it (PEP 678).
void markRecorded(PyObject* value, const std::string& note);

class OpContext;

// The incident of an op that raised an error DTensor's dispatch or a DTensor
// API call raised (no strategy, a placement/shape/mesh error): recorded as
// an incident of `kind` with the op's operands, call site and stack, and
// flushed. Returns the note for the exception. (A collective's failure is
// the CollectiveTracker's.) Requires the GIL.
// `args`: the op's non-tensor arguments as text ("dim=-1, keepdim=False";
// argumentsText), what a fix reasons about.
std::string recordFailureIncident(OpContext& op, IncidentKind kind, const std::string& error,
                                  const std::string& args = {});

// An op's non-tensor arguments, `name=value` in schema order, at most
// `max` characters ("dim=-1, keepdim=False"); tensors and None left out.
std::string argumentsText(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                          size_t max = 200);

struct DTensorFacts;

// Whether a DTensor's placements hold a Partial (a pending reduction).
bool isPartial(const DTensorFacts& facts);

// A Partial DTensor (its facts) read as a Python number (`how`:
// "float()/item()") or turned into a local tensor ("to_local()"): each rank
// gets its own unreduced share. Recorded as an incident with the op's
// operands and call site, and said once per call site on stderr while the
// job runs (`value`: the number this rank read). Requires the GIL.
void recordPartialRead(OpContext& op, const DTensorFacts& facts, std::string_view how,
                       std::optional<double> value);

// A scalar read (float(t), t.item()) of the op's DTensor operand, `value`
// the number read: recorded when that operand is Partial. The agent's own
// trouble is reported, never raised; Python's error state is kept.
void checkScalarRead(OpContext& op, std::optional<double> value);

// "NotImplementedError: Operator ... does not have a sharding strategy
// registered.": an exception as its type and message. Requires the GIL.
std::string exceptionText(PyObject* value);

}  // namespace meshscope::capture
