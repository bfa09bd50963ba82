#include "capture/agent/collectives/crash_guard.h"

#include <fmt/format.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "capture/agent/agent.h"

namespace meshscope::capture {
namespace {

constexpr std::array kFatalSignals{SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
// Longest the dying thread waits for the last words.
constexpr int kWaitTicks = 300;  // of 10 ms

std::array<struct sigaction, 32> g_saved{};  // by signal number
sem_t g_signalled;
std::atomic<int> g_signal{0};
std::atomic<bool> g_done{false};
pid_t g_pid = 0;  // the process that started the thread (a fork()ed child has none)
std::terminate_handler g_previousTerminate = nullptr;
char g_terminateWhat[1024] = {};  // what the uncaught exception said, set before abort()

// std::terminate (an exception escaping gloo's or NCCL's thread): keeps what
// the exception said for the last words, then terminates as before (which
// prints it and aborts).
[[noreturn]] void onTerminate() {
    if (std::exception_ptr e = std::current_exception()) try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            std::snprintf(g_terminateWhat, sizeof g_terminateWhat, "%s", x.what());
        } catch (...) {
            std::snprintf(g_terminateWhat, sizeof g_terminateWhat, "%s",
                          "an exception that is not a std::exception");
        }
    if (g_previousTerminate) g_previousTerminate();
    std::abort();
}

void onFatal(int sig, siginfo_t* info, void* context) {
    int none = 0;
    if (g_signal.compare_exchange_strong(none, sig) && getpid() == g_pid) {
        sem_post(&g_signalled);  // async-signal-safe, as is the wait below
        for (int i = 0; i < kWaitTicks && !g_done.load(); ++i) {
            struct timespec tick {
                0, 10'000'000
            };
            nanosleep(&tick, nullptr);
        }
    }
    // As if meshscope had not been here: the handler before ours, or the
    // default action (re-raised: a fault repeats when the handler returns).
    const struct sigaction& saved = g_saved[size_t(sig)];
    sigaction(sig, &saved, nullptr);
    if (saved.sa_flags & SA_SIGINFO) {
        if (saved.sa_sigaction) saved.sa_sigaction(sig, info, context);
    } else if (saved.sa_handler != SIG_IGN && saved.sa_handler != SIG_DFL) {
        saved.sa_handler(sig);
    } else {
        raise(sig);
    }
}

// The thread that speaks for a dying rank.
void lastWords() {
    while (sem_wait(&g_signalled) != 0) {
    }
    try {
        if (Agent* agent = Agent::forLastWords()) {
            int sig = g_signal.load();
            std::string why = fmt::format(
                "the rank died of {}",
                sigabbrev_np(sig) ? std::string("SIG") + sigabbrev_np(sig) : std::to_string(sig));
            if (g_terminateWhat[0])
                why += fmt::format(" after std::terminate: {}", g_terminateWhat);
            agent->tracker().endAll(why, IncidentKind::CollectiveError);
            agent->collectives().flush();
            agent->writer().submit(Record{MetaRecord{"abort", why}});
            agent->writer().flushNow();
        }
    } catch (...) {  // dying anyway: what was committed stays
    }
    g_done.store(true);
}

}  // namespace

void installCrashGuard() {
    static bool installed = false;
    if (installed) return;
    installed = true;
    g_pid = getpid();
    sem_init(&g_signalled, 0, 0);
    std::thread(lastWords).detach();
    g_previousTerminate = std::set_terminate(onTerminate);
    for (int sig : kFatalSignals) {
        struct sigaction ours {};
        ours.sa_sigaction = onFatal;
        ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&ours.sa_mask);
        sigaction(sig, &ours, &g_saved[size_t(sig)]);
    }
}

}  // namespace meshscope::capture
