#pragma once

// Decides the origin class (A-H, core/model/vocabulary.h) of the plain operand of a
// mixed-tensor incident, with the evidence that decided it. Evidence comes
// from what the adapters and the dispatch hook recorded about the tensor
// (provenance), from what the tensor is (an nn.Parameter or buffer, as the
// adapters' owner lookup says), and from where the op ran (load_state_dict,
// copy_ into a DTensor, optimizer step). This file gathers the facts that
// need Python; the rules themselves are pure (origin_rules.h).

#include <Python.h>

#include <ATen/core/Tensor.h>

#include "capture/agent/incidents/origin_rules.h"
#include "capture/agent/ops/tensor_table.h"

namespace meshscope::capture {

struct ClassifyInput {
    PyObject* plainObj = nullptr;
    const at::Tensor* plain = nullptr;
    TensorTable* tensors = nullptr;  // for the birth of a tensor the lookup names
    // The adapters' owner lookup (parameterLookup()): (tensor) -> ("A",
    // "parameter lm_head.weight of Model") | ("E", "optimizer Adam state
    // 'exp_avg'")[, tensor whose birth it shares] | None. Null: none.
    PyObject* ownerLookup = nullptr;
    OriginFacts facts;  // all but the owner and isParameter, which classify() finds
};

// The lookup the adapters install while attached (borrowed; nullptr clears),
// and the one installed now (borrowed, or null).
void setParameterLookup(PyObject* callable);
PyObject* parameterLookup();

Classification classify(ClassifyInput in);

}  // namespace meshscope::capture
