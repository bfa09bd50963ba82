#pragma once

// A rank that dies of a fatal signal (SIGABRT from gloo's or NCCL's
// watchdog and from std::terminate, SIGSEGV, SIGBUS, SIGFPE, SIGILL) keeps
// what it recorded: the signal handler wakes a thread started beforehand
// that, without Python and without the dying thread's locks, records the
// collectives still pending as the ones the rank died in (with their call
// sites), the reason (the uncaught C++ exception std::terminate saw) in
// the `abort` meta key, and flushes the rank file. The handler waits for it
// a bounded time, then lets the signal do what it did before (Python's
// faulthandler, or the default action). Committed data is never lost: the
// file is SQLite's WAL, which survives the process.

namespace meshscope::capture {

// Installs the handlers and starts the thread, once per process.
void installCrashGuard();

}  // namespace meshscope::capture
