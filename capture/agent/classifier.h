#pragma once

// Decides the origin class (A-H, core/model/vocabulary.h) of the plain operand of a
// mixed-tensor incident, with the evidence that decided it. Evidence comes
// from what the adapters and the dispatch hook recorded about the tensor
// (provenance), from what the tensor is (an nn.Parameter or buffer), and
// from where the op ran (load_state_dict, copy_ into a DTensor, optimizer
// step). The first rule that has evidence wins; no evidence is class G.

#include <Python.h>

#include <ATen/core/Tensor.h>

#include <string>

#include "capture/agent/tensor_table.h"
#include "core/store/records.h"

namespace meshscope::capture {

struct Classification {
    OriginClass origin = OriginClass::Unknown;
    std::string evidence;
    StackId createdAt;  // where the tensor was created, when known
    // createdAt is another tensor's birth (a gradient's parameter's), not
    // the one the tensor's own provenance records
    bool bornAsOwner = false;
};

struct ClassifyInput {
    PyObject* plainObj = nullptr;
    const at::Tensor* plain = nullptr;
    const Provenance* provenance = nullptr;
    std::string_view opName;
    bool copyIntoDTensor = false;  // copy_ with a DTensor destination
    bool insideLoadStateDict = false;
    Phase phase = Phase::Other;
    std::string_view phaseLabel;  // "torch.optim.Adam.step()", set by adapters
    // The last step of the chain that made it, when not at its birth frame
    // ("aten::slice.Tensor at train.py:10"), else empty.
    std::string_view lastStep;
    // Where the Python API attached the agent ("train.py:40"); empty when
    // `meshscope record` attached it as the interpreter started.
    std::string_view attachedAt;
    // It was alive when attach() was called (TensorTable::preexisting).
    bool madeBeforeAttach = false;
    TensorTable* tensors = nullptr;  // for the birth of a tensor the lookup names
};

// Python callback the adapters install: (tensor) -> ("A", "parameter
// lm_head.weight of Model") | ("E", "optimizer Adam state 'exp_avg'") | None.
// Looks the tensor up in the modules and optimizers seen while attached.
void setParameterLookup(PyObject* callable);  // borrowed; nullptr clears

Classification classify(const ClassifyInput& in);

}  // namespace meshscope::capture
