#pragma once

// The C++ ends of the Python adapters that report collectives to the
// CollectiveTracker (collective_tracker.h): the replacement of every
// functional collective (issue, its work and result, a failure), of
// funcol.wait_tensor (the lazy wait of an AsyncCollectiveTensor, wherever it
// is triggered), and the three calls around c10d's Work.wait(). Raw fastcall
// functions: one C call per collective or wait, no Python frame of their own.

#include <Python.h>

namespace meshscope::capture {

// collective, wait_tensor, work_waiting, work_waited, work_failed
// (documented in collective_calls.cpp), terminated by a null entry.
PyMethodDef* collectiveMethods();

}  // namespace meshscope::capture
