// meshscope._capture: the C++ half of the capture agent. The Python package
// (capture/python/meshscope) wires these functions into torch: the dispatch
// mode, optimizer/module/DataLoader hooks and the launcher environment.

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <nlohmann/json.hpp>

#include <semaphore.h>
#include <signal.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "capture/agent/agent.h"
#include "capture/agent/collectives/collective_bridge.h"
#include "capture/agent/collectives/crash_guard.h"
#include "capture/agent/hooks/adapter_calls.h"
#include "capture/agent/hooks/collective_calls.h"
#include "capture/agent/hooks/dispatch_hook.h"
#include "capture/agent/hooks/hook_phases.h"
#include "capture/agent/hooks/observer.h"
#include "capture/agent/incidents/births.h"
#include "capture/agent/incidents/classifier.h"
#include "capture/agent/incidents/fingerprint.h"
#include "capture/agent/incidents/incidents.h"
#include "capture/agent/interop/python_callbacks.h"
#include "capture/agent/ops/op_recorder.h"
#include "core/model/settings.h"
#include "core/policy/policy.h"
#include "core/report/run_json.h"
#include "core/store/run_directory.h"
#include "core/store/run_reader.h"
#include "core/store/store_error.h"
#include "core/version.h"

namespace py = pybind11;
using namespace meshscope;
using namespace meshscope::capture;

namespace {

Agent& attached() {
    Agent* agent = Agent::current();
    if (!agent) throw std::runtime_error("meshscope is not attached");
    return *agent;
}

std::string upper(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        c = char(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

py::dict attach(const py::dict& c) {
    installCrashGuard();
    AgentConfig config;
    config.runDir = c["run_dir"].cast<std::string>();
    std::string policy = c["policy"].cast<std::string>();
    config.policyName = policy;
    try {
        config.policy =
            policyModeFromString(policy) ? Policy::named(policy) : Policy::fromFile(policy);
    } catch (const PolicyError& e) {
        throw py::value_error(std::string("meshscope: bad policy: ") + e.what());
    }
    std::string level = c["level"].cast<std::string>();
    if (level != "dtensor" && level != "all")
        throw py::value_error("meshscope: level must be 'dtensor' or 'all' (got '" + level + "')");
    config.level = level == "all" ? Level::All : Level::DTensor;
    config.rank = c["rank"].cast<int>();
    config.worldSize = c["world_size"].cast<int>();
    config.localRank = c["local_rank"].cast<int>();
    config.runId = c["run_id"].cast<std::string>();
    config.backend = c["backend"].cast<std::string>();
    config.deviceType = c["device_type"].cast<std::string>();
    config.torchVersion = c["torch_version"].cast<std::string>();
    config.command = c["command"].cast<std::vector<std::string>>();
    if (c.contains("attached_at")) config.attachedAt = c["attached_at"].cast<std::string>();
    if (c.contains("queue_capacity"))
        config.writer.queueCapacity = c["queue_capacity"].cast<size_t>();
    if (c.contains("max_file_bytes"))
        config.writer.maxFileBytes = c["max_file_bytes"].cast<int64_t>();
    if (c.contains("device_timing_every"))
        config.deviceTimingEvery = c["device_timing_every"].cast<int64_t>();
    if (c.contains("watchdog_s")) config.watchdogSeconds = c["watchdog_s"].cast<double>();
    auto internal = c["internal_prefixes"].cast<std::vector<std::string>>();
    auto own = c["own_prefixes"].cast<std::vector<std::string>>();
    if (c.contains("job")) config.job = c["job"].cast<std::string>();
    Agent* agent = nullptr;
    try {
        agent = &Agent::attach(std::move(config));
    } catch (const RunTaken& e) {
        // the Python side picks a fresh folder for this job
        PyErr_SetString(PyExc_FileExistsError, e.what());
        throw py::error_already_set();
    } catch (const StoreError& e) {
        throw std::runtime_error(std::string("meshscope: cannot record: ") + e.what());
    }
    agent->frames().setInternalPrefixes(std::move(internal), std::move(own));
    exposeCollectiveSink();  // for the NCCL profiler plugin (plugins/nccl_profiler)
    if (agent->config().level == Level::All) installObserver();
    py::dict out;
    out["rank_file"] = agent->writer().path().string();
    out["not_recording"] = agent->writer().notRecording();
    return out;
}

// How long detach() lets other threads take the GIL after the agent closed.
constexpr std::chrono::milliseconds kYieldAfterDetach{10};

void detach() {
    removeObserver();
    Agent::detach();
    setParameterLookup(nullptr);
    // Closing the agent held the GIL for milliseconds. A c10d backend's
    // worker (gloo's runLoop) that finished a collective meanwhile waits for
    // it to release the work's tensors; at interpreter exit, which follows
    // this detach, such a waiting thread is ended by Python and aborts the
    // process ("terminate called without an active exception"; plain torch
    // does it too, about 1 run in 10 here: pytorch/pytorch#190489, #179291).
    // Letting those threads have the GIL now keeps meshscope from widening
    // that window.
    py::gil_scoped_release released;
    std::this_thread::sleep_for(kYieldAfterDetach);
}

void tag(py::handle tensor, const std::string& origin, const std::string& evidence,
         bool withLocation) {
    Agent* agent = Agent::current();
    if (!agent || !THPVariable_Check(tensor.ptr()) || agent->torch().isDTensor(tensor.ptr()))
        return;
    auto cls = origin.size() == 1 ? originFromChar(origin[0]) : std::nullopt;
    if (!cls) throw py::value_error("origin must be one of " + originLetterRange());
    agent->tensors().setProvenance(THPVariable_Unpack(tensor.ptr()),
                                   atUserFrame(*agent, *cls, evidence, withLocation));
}

// A tensor made by a Python call that dispatches no op meshscope can name
// (torch.frombuffer, DLPack) or read from a file (torch.load): tagged as an
// aten factory's output would be, except that a tensor loaded outside data
// loading, forward and optimizer steps is a weight being loaded (F).
void tagBirth(py::handle tensor, const std::string& what, bool loaded) {
    Agent* agent = Agent::current();
    if (!agent || !THPVariable_Check(tensor.ptr()) || agent->torch().isDTensor(tensor.ptr()))
        return;
    if (!OpRecorder::tagsCreations(*agent)) return;
    Provenance p = birthProvenance(*agent, what);
    if (loaded && p.origin == OriginClass::UserCode)
        p = atUserFrame(*agent, OriginClass::WeightLoading, "loaded by " + what, true);
    agent->tensors().setProvenance(THPVariable_Unpack(tensor.ptr()), std::move(p));
}

// The SIGTERM guard (install_term_guard): Python's SIGTERM handler runs
// only between bytecodes, so a rank blocked inside a collective would outlive
// the signal. Our handler chains to Python's and wakes a thread that, if the
// process still lives a second later, flushes the rank file and ends the
// process with the default SIGTERM.
struct sigaction g_pythonTerm {};
sem_t g_termSignalled;
std::atomic<bool> g_termHandled{false};  // Python's handler started: it ends the process

// SIGINT (Ctrl-C, `meshscope record` stopping the job): Python raises
// KeyboardInterrupt only once the blocked call returns, and the launcher's
// SIGKILL may come first. Chained the same way; a second later, the
// collectives still pending are written as where the rank stopped. The
// signal itself is left to Python.
struct sigaction g_pythonInt {};
sem_t g_intSignalled;

// Calls the handler that was there before ours (Python's) as the kernel
// would have; `fallback` runs for SIG_DFL.
void chain(const struct sigaction& saved, int sig, siginfo_t* info, void* context,
           void (*fallback)(int)) {
    if (saved.sa_flags & SA_SIGINFO) {
        if (saved.sa_sigaction) saved.sa_sigaction(sig, info, context);
    } else if (saved.sa_handler == SIG_DFL) {
        if (fallback) fallback(sig);
    } else if (saved.sa_handler != SIG_IGN) {
        saved.sa_handler(sig);
    }
}

void onTerm(int sig, siginfo_t* info, void* context) {
    sem_post(&g_termSignalled);                        // async-signal-safe
    chain(g_pythonTerm, sig, info, context, nullptr);  // the guard thread ends the rank
}

void onInt(int sig, siginfo_t* info, void* context) {
    sem_post(&g_intSignalled);
    chain(g_pythonInt, sig, info, context, [](int s) {
        signal(s, SIG_DFL);
        raise(s);
    });
}

// Puts `handler` in front of the current handler of `sig` (kept in `saved`)
// and starts `guard` on a thread woken through `signalled`.
template <typename Guard>
void installGuard(int sig, struct sigaction& saved, sem_t& signalled,
                  void (*handler)(int, siginfo_t*, void*), Guard guard) {
    sem_init(&signalled, 0, 0);
    sigaction(sig, nullptr, &saved);
    struct sigaction ours {};
    ours.sa_sigaction = handler;
    ours.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    sigaction(sig, &ours, nullptr);
    std::thread([&signalled, guard] {
        for (bool again = true; again;) {
            while (sem_wait(&signalled) != 0) {
            }
            std::this_thread::sleep_for(std::chrono::seconds(1));
            again = guard();
        }
    }).detach();
}

void installTermGuard() {
    static bool installed = false;
    if (installed) return;
    installed = true;
    installGuard(SIGINT, g_pythonInt, g_intSignalled, onInt, [] {
        if (Agent* agent = Agent::current()) {
            agent->tracker().endAll("its rank got SIGINT", IncidentKind::CollectiveHang);
            agent->writer().flushNow();
        }
        return true;  // every SIGINT
    });
    installGuard(SIGTERM, g_pythonTerm, g_termSignalled, onTerm, [] {
        if (g_termHandled.load()) return false;
        if (Agent* agent = Agent::current()) {
            agent->tracker().endAll("its rank got SIGTERM", IncidentKind::CollectiveHang);
            agent->writer().flushNow();
        }
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
        return false;
    });
}

py::object provenance(py::handle tensor) {
    Agent* agent = Agent::current();
    if (!agent || !THPVariable_Check(tensor.ptr())) return py::none();
    const Provenance* p = agent->tensors().provenance(THPVariable_Unpack(tensor.ptr()));
    if (!p) return py::none();
    return py::make_tuple(std::string(1, char(p->origin)), p->evidence, p->derived);
}

void recordOptimizerStep(int64_t step, const std::string& name, int64_t startNs, int64_t endNs,
                         int64_t params) {
    HookPhases::Adapter timing(AdapterCall::Step, /*counts=*/false);
    Agent* agent = Agent::current();
    if (!agent) return;
    RankWriter& w = agent->writer();
    w.submit(Record{OptimizerStepRecord{step, w.intern(name), startNs, endNs, params}});
}

py::dict stats() {
    Agent& agent = attached();
    WriterStats s = agent.writer().stats();
    py::dict drops;
    for (int i = 0; i < kDropReasonCount; ++i)
        drops[py::str(std::string(toString(DropReason(i))))] = s.drops[i];
    py::dict out;
    out["submitted"] = s.submitted;
    out["written"] = s.written;
    out["drops"] = drops;
    out["ops"] = agent.counters().ops.load();
    out["incidents"] = agent.counters().incidents.load();
    out["reconciled"] = agent.counters().reconciled.load();
    out["agent_errors"] = agent.counters().agentErrors.load();
    out["provenance_ops"] = agent.counters().provenanceOps.load();
    out["tensor_table"] = agent.tensors().size();
    out["provenance_records"] = agent.tensors().provenanceRecords();
    out["tensor_descriptions"] = agent.descriptions().size();
    out["dtensor_specs"] = agent.torch().cachedSpecs();
    out["hook_operators"] = agent.torch().hookOpsRead();
    out["rank_file"] = agent.writer().path().string();
    if (HookPhases::on()) {  // MESHSCOPE_BENCH_HOOK=phases: ns per op, by phase
        py::dict phases;
        for (const auto& [name, value] : HookPhases::perOp())
            phases[py::str(name)] = value;
        out["hook_phases"] = phases;
    }
    return out;
}

std::string loadRunJson(const std::string& path, bool opNames) {
    RunReader run = RunReader::open(path);
    return runToJson(run, RunJsonOptions{opNames})
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

PyMethodDef g_dispatchDef = {
    "torch_dispatch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&torchDispatch)),
    METH_FASTCALL,
    "__torch_dispatch__(func, types, args=(), kwargs=None) of the "
    "meshscope mode"};

}  // namespace

PYBIND11_MODULE(_capture, m) {
    m.doc() = "meshscope capture agent (C++)";
    m.def("attach", &attach, py::arg("config"));
    m.def("detach", &detach);
    m.def("attached", [] { return Agent::current() != nullptr; });
    // Phase codes of enter_phase()/leave_phase().
    for (const auto& phase : kPhaseNames)
        m.attr(("PHASE_" + upper(phase.key)).c_str()) = int(phase.kind);
    // The settings the environment carries: {key: (variable, default)}.
    m.def("settings", [] {
        py::dict out;
        for (const Setting& s : kSettings)
            out[py::str(std::string(s.key))] =
                py::make_tuple(std::string(s.env), std::string(s.fallback));
        return out;
    });
    // Origin letters of tag() (core/model/vocabulary.h), for the adapters.
    for (auto [name, origin] : {std::pair{"UNSHARDED_PARAM", OriginClass::UnshardedParam},
                                {"CREATED_IN_FORWARD", OriginClass::CreatedInForward},
                                {"STRIPPED_DTENSOR", OriginClass::StrippedDTensor},
                                {"INPUT_DATA", OriginClass::InputData},
                                {"OPTIMIZER_STATE", OriginClass::OptimizerState},
                                {"WEIGHT_LOADING", OriginClass::WeightLoading},
                                {"UNKNOWN", OriginClass::Unknown},
                                {"USER_CODE", OriginClass::UserCode}})
        m.attr((std::string("ORIGIN_") + name).c_str()) = originText(origin);
    for (PyMethodDef* methods : {adapterMethods(), collectiveMethods(), callbackMethods()})
        for (PyMethodDef* def = methods; def->ml_name; ++def)
            m.add_object(def->ml_name,
                         py::reinterpret_steal<py::object>(PyCFunction_New(def, nullptr)));
    m.def("step", [] { return attached().step(); });
    m.def("set_step", [](int64_t s) { attached().setStep(s); });
    m.def("advance_step", [] {
        HookPhases::Adapter timing(AdapterCall::Step);
        return attached().advanceStep();
    });
    m.def("now_ns", [] { return attached().writer().nowNs(); });
    m.def("record_optimizer_step", &recordOptimizerStep);
    // Whether a plugin below torch (the NCCL profiler) records collectives.
    m.def("collective_plugin_listening", &CollectiveBridge::listening);
    m.def("enter_load_state_dict", &Agent::enterLoadStateDict);
    m.def("install_term_guard", &installTermGuard);
    m.def("term_handled", [] { g_termHandled.store(true); });
    m.def("tag_birth", &tagBirth, py::arg("tensor"), py::arg("what"), py::arg("loaded") = false);
    m.def(
        "mark_preexisting",
        [](py::iterable tensors) {
            Agent* agent = Agent::current();
            if (!agent) return;
            for (py::handle t : tensors)
                if (THPVariable_Check(t.ptr()) && !agent->torch().isDTensor(t.ptr()))
                    agent->tensors().markPreexisting(THPVariable_Unpack(t.ptr()));
        },
        py::arg("tensors"),
        "Marks the plain tensors alive as attach() is called (a birthless tensor is then known to "
        "be older than the agent, or not)");
    m.def("tag", &tag, py::arg("tensor"), py::arg("origin"), py::arg("evidence"),
          py::arg("with_location") = false);
    m.def("record_meta", [](const std::string& key, const std::string& value) {
        if (Agent* a = Agent::current()) a->writer().submit(Record{MetaRecord{key, value}});
    });
    m.def("provenance", &provenance);
    // The content fingerprint promotions record, computed on the tensor's
    // device (for checking by hand that a tensor is equal on every rank).
    m.def("fingerprint", [](const at::Tensor& tensor) { return fingerprintTensor(tensor); });
    // Tests: the same fingerprint by the ATen ops a GPU runs, on any device.
    m.def("fingerprint_aten",
          [](const at::Tensor& tensor) { return fingerprintTensor(tensor, true); });
    // The replica check (meshscope/_replicas.py): one tensor ranks with the
    // same name and key must hold equal, fingerprinted on its device.
    m.def("record_replica",
          [](int64_t step, const std::string& name, const std::string& role, const std::string& key,
             const std::string& placements, const std::string& module, const at::Tensor& tensor) {
              Agent* agent = Agent::current();
              if (!agent) return;
              RankWriter& w = agent->writer();
              ReplicaRecord r{step,
                              w.intern(name),
                              w.intern(role),
                              w.intern(key),
                              w.intern(placements),
                              w.intern(module),
                              fingerprintTensor(tensor),
                              tensor.numel()};
              w.submit(Record{r});
          });
    // The Python package's own trouble: counted and reported once per kind,
    // like the agent's (stats()["agent_errors"]), never raised.
    m.def("own_error", [](const std::string& kind, const std::string& message) {
        if (Agent* agent = Agent::current()) agent->ownError(kind, message);
    });
    m.def("set_parameter_lookup",
          [](py::object fn) { setParameterLookup(fn.is_none() ? nullptr : fn.ptr()); });
    m.def("set_strict_error_type", [](py::object t) { setStrictErrorType(t.ptr()); });
    m.def("flush", [] { return attached().writer().flushNow(); });
    m.def("stats", &stats);
    m.def("install_hook", [] {
        std::string why;
        bool ok = installDispatcherHook(why);
        return py::make_tuple(ok, why);
    });
    m.def("enable_hook", &enableDispatcherHook);
    m.def("hook_enabled", &dispatcherHookEnabled);
    m.def("load_run_json", &loadRunJson, py::arg("path"), py::arg("op_names") = true);
    // torch calls mode.__torch_dispatch__ and insists its __self__ is the
    // mode: bind the C++ handler to the mode instance as a builtin method.
    m.def("bind_dispatch", [](py::object mode) {
        return py::reinterpret_steal<py::object>(PyCFunction_New(&g_dispatchDef, mode.ptr()));
    });
    // Values the Python package takes from core rather than repeating them.
    m.def("version", [] { return std::string(kVersion); });  // meshscope.__version__
    m.def("policy_names", [] {
        std::vector<std::string> names;
        for (std::string_view name : policyModeNames())
            names.emplace_back(name);
        return names;
    });
    // Default run directories (core/store/run_directory.h).
    m.def(
        "default_run_name",
        [](std::time_t when, const std::string& prefix, std::optional<std::string> job) {
            return defaultRunName(when, prefix, job);
        },
        py::arg("time"), py::arg("prefix") = "", py::arg("job") = py::none());
    m.def(
        "default_run_dir",
        [](const std::string& workingDir, const std::string& name) {
            return defaultRunDirectory(workingDir, name).string();
        },
        py::arg("working_dir"), py::arg("name"));
    m.def(
        "default_run_job",
        [](std::optional<std::string> elasticRunId, std::optional<std::string> masterPort) {
            return defaultRunJob(elasticRunId, masterPort);
        },
        py::arg("elastic_run_id") = py::none(), py::arg("master_port") = py::none());
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const StoreError& e) {
            PyErr_SetString(PyExc_OSError, e.what());
        }
    });
}
