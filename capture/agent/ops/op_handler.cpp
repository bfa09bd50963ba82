#include "capture/agent/ops/op_handler.h"

#include <optional>
#include <string>

#include "capture/agent/incidents/failures.h"
#include "capture/agent/incidents/incidents.h"
#include "capture/agent/ops/op_recorder.h"

namespace meshscope::capture {

PyObject* OpHandler::handle(bool& runAsIs) {
    runAsIs = false;
    std::optional<OpContext> op;
    try {
        injectedFault("before");
        op.emplace(m_agent, m_func, m_args, m_kwargs);
        return run(*op);
    } catch (const std::exception& e) {
        m_agent.ownError("dispatch", std::string("meshscope: dispatch hook error: ") + e.what());
        if (op && op->outcome().happened()) return op->outcome().replay();  // never twice
        PyErr_Clear();
        runAsIs = true;
        return nullptr;
    }
}

PyObject* OpHandler::run(OpContext& op) {
    switch (op.kind()) {
        case OpKind::Plain:
            return plainOp(op);
        case OpKind::DTensor:
            return dtensorOp(op);
        case OpKind::Mixed:
            return IncidentResolver(op).resolve();
    }
    return plainOp(op);
}

// An op on plain tensors only: not recorded at DTensor level, but provenance
// flows from inputs to outputs and new tensors get tagged by phase.
PyObject* OpHandler::plainOp(OpContext& op) {
    if (m_agent.promotions().size() && m_agent.phase() == Phase::Backward)
        if (PyObject* result = IncidentResolver(op).substitutePromoted()) return result;
    if (PyErr_Occurred()) return nullptr;
    PyObject* result = op.callAsCalled();
    if (!result) return nullptr;
    OpRecorder recorder(op);
    if (recorder.needsProvenance()) recorder.afterPlainOp(op.scanResult(result));
    return result;
}

PyObject* OpHandler::dtensorOp(OpContext& op) {
    RankWriter& writer = op.writer();
    int64_t start = writer.nowNs();
    OpFrame frame(m_agent, op.inputs());
    PyObject* result = op.callAsCalled();
    frame.ran();
    int64_t end = writer.nowNs();
    frame.prefetchRecord();
    OpRecorder(op).recordRan(frame, start, end, op.scanResult(result));  // none when it raised
    if (result && op.info().isScalarRead) {  // float(), item(): the number read
        double value = PyFloat_AsDouble(result);
        bool number = !PyErr_Occurred();
        PyErr_Clear();
        checkScalarRead(op, number ? std::optional<double>(value) : std::nullopt);
    }
    return result;
}

}  // namespace meshscope::capture
