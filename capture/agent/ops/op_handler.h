#pragma once

// OpHandler: the error boundary around one op the TorchDispatchMode hands
// over (or a mixed op the dispatcher hook hands over as Python objects).
// Builds the op's OpContext and sends it by kind to its stage: a plain op
// runs and feeds provenance (op_recorder.h), a DTensor op runs and is
// recorded, a mixed op is an incident (incidents.h). The agent's own
// trouble before the op ran makes the caller run the op as without
// meshscope; after it ran, the op's own outcome is returned, so an op never
// runs twice and the agent never raises into the training. Requires the
// GIL. Internal to the agent.

#include <Python.h>

#include "capture/agent/ops/op_context.h"

namespace meshscope::capture {

class OpHandler {
  public:
    OpHandler(Agent& agent, PyObject* func, PyObject* args, PyObject* kwargs)
        : m_agent(agent), m_func(func), m_args(args), m_kwargs(kwargs) {}

    // The op's result, or nullptr with its exception set; `runAsIs` set
    // instead when the agent's own trouble came before the op ran (counted
    // and reported once by Agent::ownError).
    PyObject* handle(bool& runAsIs);

  private:
    PyObject* run(OpContext& op);
    PyObject* plainOp(OpContext& op);
    PyObject* dtensorOp(OpContext& op);

    Agent& m_agent;
    PyObject* m_func;
    PyObject* m_args;
    PyObject* m_kwargs;
};

}  // namespace meshscope::capture
