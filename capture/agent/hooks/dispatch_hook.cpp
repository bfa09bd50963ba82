#include "capture/agent/hooks/dispatch_hook.h"

#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "capture/agent/hooks/hook_paths.h"
#include "capture/agent/hooks/hook_phases.h"
#include "capture/agent/hooks/unboxed_ops.h"
#include "capture/agent/incidents/incidents.h"
#include "capture/agent/ops/op_handler.h"
#include "capture/agent/ops/op_recorder.h"
#include "core/model/settings.h"
#include "core/util/hot_path.h"

namespace meshscope::capture {

PyObject* torchDispatch(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
    if (argc < 1) {
        PyErr_SetString(PyExc_TypeError, "__torch_dispatch__(func, types, args=(), kwargs=None)");
        return nullptr;
    }
    PyObject* func = argv[0];
    PyObject* args = argc > 2 && PyTuple_Check(argv[2]) ? argv[2] : nullptr;
    PyObject* kwargs = argc > 3 && argv[3] != Py_None ? argv[3] : nullptr;
    if (Agent* agent = Agent::current()) {
        bool runAsIs = false;  // the agent's own trouble before the op ran
        PyObject* result = OpHandler(*agent, func, args, kwargs).handle(runAsIs);
        if (!runAsIs) return result;
    }
    static PyRef empty = PyRef::steal(PyTuple_New(0));
    PyRef call = PyRef::steal(PyObject_GetAttrString(func, "_op"));
    if (!call) PyErr_Clear();
    return PyObject_Call(call ? call.get() : func, args ? args : empty.get(), kwargs);
}

namespace {

thread_local WorkCapture* t_capture = nullptr;

// Benchmarks only (MESHSCOPE_BENCH_HOOK, read when the hook is enabled): how
// far the hook's work on an op goes, each cut a superset of the one before,
// so that tests/bench/capture_overhead.py can say what each part of the
// capture overhead costs. A cut records less than the agent does: not for
// training anyone watches. Any other value is the whole hook.
enum class BenchCut : uint8_t {
    Full,        // "": the hook as it is
    Off,         // "off": the key never included (the adapters and the writer alone)
    Pass,        // "pass": every op redispatched as it came (the boxed fallback itself)
    Scan,        // "scan": operands scanned and marked; only a mixed op handled
    Unrecorded,  // "unrecorded": plain ops as in Full; a DTensor op run under the GIL, not recorded
    Phases,      // "phases": as Full, each part timed (HookPhases, hook_phases.h)
};
// Set by the thread that enables the hook, read once by every op.
std::atomic<BenchCut> g_benchCut{BenchCut::Full};
// Benchmarks only (MESHSCOPE_BENCH_BOXED=1, read when the hook is enabled):
// every op through the boxed fallback, none through the hook's own kernels
// (UnboxedOps), to measure what those save.
std::atomic<bool> g_benchBoxed{false};

BenchCut benchCut() {
    const char* v = std::getenv(setting("bench_hook").env.data());
    std::string_view cut = v ? v : "";
    if (cut == "off") return BenchCut::Off;
    if (cut == "pass") return BenchCut::Pass;
    if (cut == "scan") return BenchCut::Scan;
    if (cut == "unrecorded") return BenchCut::Unrecorded;
    if (cut == "phases") return BenchCut::Phases;
    return BenchCut::Full;
}

void hookFallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

// The number an op read from a tensor (item(), float()), when it is one.
std::optional<double> numberRead(const c10::IValue& read) {
    return read.isScalar() && !read.isComplexDouble()
               ? std::optional<double>(read.toScalar().toDouble())
               : std::nullopt;
}

// The hook's work on one op (hookCall), whichever way the dispatcher called
// it. A Call gives the op, its operands (inputs() before it ran, outputs()
// after; scanStack's rule), run() (the op below the hook), keep() before
// run() and arguments() after it (the arguments as a failure record shows
// them), retry() (retryReplicated, its result kept as the op's), mixed() and
// c10d() (the boxed ways of a mixed op and a c10d call) and
// checkScalarRead() (the number an item() read).
//
// BoxedCall: the boxed fallback, every op without a kernel of the hook's
// own; its arguments and results on the dispatcher's stack.
class BoxedCall {
  public:
    BoxedCall(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack)
        : m_op(op), m_ks(ks), m_stack(stack) {}
    const c10::OperatorHandle& op() const { return m_op; }
    MESHSCOPE_HOT Operands inputs(const HookOp& known, PyTypeObject* dtensorType) const {
        return scanStack(*m_stack, known.arguments, dtensorType);
    }
    MESHSCOPE_HOT Operands outputs(const HookOp& known, PyTypeObject* dtensorType) const {
        return scanStack(*m_stack, known.returns, dtensorType);
    }
    MESHSCOPE_HOT void run() { redispatch(m_op, m_ks, m_stack); }
    // The call consumes its arguments: kept for a failure's record and
    // for one retry.
    MESHSCOPE_HOT void keep(const HookOp& known) {
        m_base = m_stack->size() - known.arguments;
        m_saved.assign(m_stack->begin() + m_base, m_stack->end());
    }
    c10::ArrayRef<c10::IValue> arguments() const { return m_saved; }
    bool retry(Agent& agent, const Operands& inputs, const std::exception& first) {
        return retryReplicated(agent, m_op, inputs, m_saved, *m_stack, m_base, first);
    }
    void mixed(Agent& agent) { mixedOp(agent, m_op, m_stack); }
    void c10d(Agent& agent, HookOp& known, Operands inputs) {
        c10dCollective(agent, m_op, known, m_ks, m_stack, std::move(inputs));
    }
    void checkScalarRead(OpContext& call) const {
        if (!m_stack->empty())
            meshscope::capture::checkScalarRead(call, numberRead(m_stack->back()));
    }

  private:
    const c10::OperatorHandle& m_op;
    c10::DispatchKeySet m_ks;
    torch::jit::Stack* m_stack;
    size_t m_base = 0;
    c10::SmallVector<c10::IValue, 8> m_saved;
};

// UnboxedCall: a kernel of the hook's own for a common op (UnboxedOps), with
// its arguments as the caller passed them. Through the boxed fallback every
// argument becomes an IValue for the hook and autograd's kernel below takes
// them apart again (docs/performance.md, "The hook's own kernels of common
// ops"). A mixed op, a c10d call and the cold paths after a failure go the
// boxed way.
template <class Op, class R, class... A>
class UnboxedCall {
    static_assert(!std::is_void_v<R>, "an op with a result");
    // An in-place op returns its first argument.
    using Kept =
        std::conditional_t<std::is_reference_v<R>, std::remove_reference_t<R>*, std::optional<R>>;

  public:
    UnboxedCall(const c10::OperatorHandle& op, c10::DispatchKeySet ks, A... args)
        : m_op(op), m_ks(ks), m_args(args...) {}
    const c10::OperatorHandle& op() const { return m_op; }
    MESHSCOPE_HOT Operands inputs(const HookOp&, PyTypeObject* dtensorType) const {
        Operands out;
        uint16_t i = 0;
        std::apply([&](const auto&... a) { (scanUnboxed(out, a, i++, dtensorType), ...); }, m_args);
        return out;
    }
    MESHSCOPE_HOT Operands outputs(const HookOp&, PyTypeObject* dtensorType) const {
        Operands out;
        if (m_result) scanUnboxed(out, result(), 0, dtensorType);
        return out;
    }
    MESHSCOPE_HOT void run() {
        c10::impl::ExcludeDispatchKeyGuard guard(kHookKey);
        c10::DispatchKeySet below =
            m_ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kHookKey);
        hold(std::apply([&](auto&... a) -> R { return Op::redispatch(below, a...); }, m_args));
    }
    void keep(const HookOp&) {}  // the arguments outlive the call
    c10::ArrayRef<c10::IValue> arguments() {
        if (m_boxed.empty()) m_boxed = boxed();
        return m_boxed;
    }
    bool retry(Agent& agent, const Operands& inputs, const std::exception& first) {
        torch::jit::Stack stack;
        if (!retryReplicated(agent, m_op, inputs, arguments(), stack, 0, first)) return false;
        holdFrom(stack);
        return true;
    }
    void mixed(Agent&) { viaFallback(); }
    void c10d(Agent&, HookOp&, Operands) { viaFallback(); }
    void checkScalarRead(OpContext& call) const {
        std::optional<double> read;
        if constexpr (std::is_constructible_v<c10::IValue, const std::remove_cvref_t<R>&>)
            read = numberRead(c10::IValue(result()));
        meshscope::capture::checkScalarRead(call, read);
    }
    // The boxed fallback with these arguments (the result kept).
    void viaFallback() {
        hold(std::apply(
            [&](auto&... a) -> R {
                return c10::impl::BoxedKernelWrapper<R(A...)>::call(
                    c10::BoxedKernel::makeFromFunction<&hookFallback>(), m_op, m_ks, a...);
            },
            m_args));
    }
    const std::remove_cvref_t<R>& result() const { return *m_result; }
    R take() {
        if constexpr (std::is_reference_v<R>)
            return *m_result;
        else
            return std::move(*m_result);
    }

  private:
    void hold(R r) {
        if constexpr (std::is_reference_v<R>)
            m_result = &r;
        else
            m_result.emplace(std::move(r));
    }
    // The result a retry left on its stack; an in-place op's is its first argument.
    void holdFrom(torch::jit::Stack& stack) {
        if constexpr (std::is_reference_v<R>)
            m_result = &std::get<0>(m_args);
        else
            m_result.emplace(c10::impl::PopResult<R>::call(stack));
    }
    torch::jit::Stack boxed() {
        return std::apply([](auto&... a) { return c10::impl::boxArgs<A...>(a...); }, m_args);
    }

    const c10::OperatorHandle& m_op;
    c10::DispatchKeySet m_ks;
    std::tuple<A...> m_args;
    Kept m_result{};
    torch::jit::Stack m_boxed;
};

// The tensor an in-place or out= op writes and returns (at argument
// `written`, -1: none): a provenance it has is its output's already.
const c10::TensorImpl* writtenInput(const Operands& inputs, int16_t written) {
    for (const Operand& o : inputs)
        if (o.index == written) return o.tensor().unsafeGetTensorImpl();
    return nullptr;
}

template <class Call>
MESHSCOPE_HOT void hookCall(Call& call) {
    const BenchCut cut = g_benchCut.load(std::memory_order_relaxed);
    if (cut == BenchCut::Pass) [[unlikely]]
        return call.run();
    const uint64_t entered = cut == BenchCut::Phases ? HookPhases::ticks() : 0;
    Agent* agent = Agent::current();
    PyTypeObject* dtensorType = agent ? agent->torch().dtensorType() : nullptr;
    if (!dtensorType) return call.run();
    HookOp* known = hookOp(*agent, call.op());
    if (!known) [[unlikely]]
        return call.run();
    Operands inputs = call.inputs(*known, dtensorType);
    OpKind kind = markMixed(inputs);
    if (kind == OpKind::Mixed) return call.mixed(*agent);
    if (cut == BenchCut::Scan) [[unlikely]]
        return call.run();

    if (kind == OpKind::Plain && known->c10d) return call.c10d(*agent, *known, std::move(inputs));
    if (kind == OpKind::Plain) {              // only provenance bookkeeping, and only when needed
        HookPhases::PlainOp timing(entered);  // MESHSCOPE_BENCH_HOOK=phases
        // A birth: a creation op (no tensor inputs) or torch.tensor()'s
        // lift_fresh. Other ops without tensor inputs (the profiler's
        // record_function enter and exit around every optimizer step, FSDP's
        // hooks) pass on without the GIL.
        bool factory = (inputs.empty() || known->liftFresh) && known->info.isFactory &&
                       OpRecorder::tagsCreations(*agent);
        // A provenance reaches an output that lacks one: none for an op
        // that returns no tensor (the optimizer's step counter read by
        // item()), and none from the argument an in-place op returns
        // (its `step += 1`): that output is the argument itself.
        TensorTable& tensors = agent->tensors();
        bool propagate = known->returnsTensors && tensors.hasProvenance();
        if (propagate) {
            const c10::TensorImpl* written = writtenInput(inputs, known->returnsWritten);
            propagate = std::any_of(inputs.begin(), inputs.end(), [&](const Operand& o) {
                return o.tensor().unsafeGetTensorImpl() != written &&
                       tensors.mayHaveProvenance(o.tensor());
            });
        }
        timing.pause();
        call.run();
        timing.resume();
        if (!factory && !propagate) return;
        GilHold gil;
        if (Agent::current() != agent) return;  // detached meanwhile
        try {
            Operands outputs = call.outputs(*known, dtensorType);
            OpContext plain(*agent, known->info, inputs);
            OpRecorder(plain).afterPlainOp(outputs);
        } catch (const std::exception& e) {
            agent->ownError("dispatch", std::string("meshscope: provenance: ") + e.what());
        }
        return;
    }

    // A DTensor op runs with the GIL held: DTensor's dispatch (the Python
    // key below) takes it and keeps it through the local compute and the
    // redistributions. Taken here, around the op, DTensor's acquisition is a
    // nested one and the record after the op needs none of its own: one
    // acquisition an op instead of two, and nothing runs under the GIL that
    // did not without meshscope but this hook's own bookkeeping.
    HookPhases::Op timing;
    GilHold gil;
    HookPhases::lap(HookPhase::Gil);
    if (cut == BenchCut::Unrecorded) [[unlikely]]
        return call.run();
    RankWriter& writer = agent->writer();
    int64_t start = writer.nowNs();
    OpFrame frame(*agent, inputs);
    auto record = [&](bool ran) MESHSCOPE_HOT_LAMBDA {
        int64_t end = writer.nowNs();
        if (Agent::current() != agent) return;
        frame.prefetchRecord();
        Operands outputs = ran ? call.outputs(*known, dtensorType) : Operands{};
        OpContext op(*agent, known->info, inputs, kind);
        OpRecorder(op).recordRan(frame, start, end, outputs);
        if (ran && op.info().isScalarRead) call.checkScalarRead(op);
        HookPhases::opDone();
    };
    // The arguments, kept for the failure's record and, when a promotion
    // was laid out as Shard(batch), for one retry: that can meet an op
    // DTensor has no correct strategy for (index_put in the backward of an
    // index lookup whose indices were promoted).
    call.keep(*known);
    HookPhases::lap(HookPhase::Enter);
    try {
        call.run();
        HookPhases::lap(HookPhase::Op);
    } catch (const std::exception& e) {
        frame.ran();
        if (agent->promotions().anySharded() && call.retry(*agent, inputs, e)) {
            record(true);
            return;
        }
        recordOpFailure(*agent, call.op(), inputs, e, {}, call.arguments());
        record(false);
        throw;
    }
    frame.ran();
    record(true);
}

MESHSCOPE_HOT void hookFallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                torch::jit::Stack* stack) {
    if (t_capture) return captureFallback(*t_capture, op, ks, stack);
    BoxedCall call(op, ks, stack);
    hookCall(call);
}

// The hook's own kernel of an op (Op: its at::_ops struct).
template <class Op, class Schema = typename Op::schema>
struct Hooked;
template <class Op, class R, class... A>
struct Hooked<Op, R(A...)> {
    MESHSCOPE_HOT static R kernel(c10::DispatchKeySet ks, A... args) {
        static const c10::OperatorHandle op =
            c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
        UnboxedCall<Op, R, A...> call(op, ks, args...);
        // inside a functional collective's call; the benchmark's boxed cut
        if (t_capture || g_benchBoxed.load(std::memory_order_relaxed)) [[unlikely]]
            call.viaFallback();
        else
            hookCall(call);
        return call.take();
    }
};

// Registers the hook's kernel of each op in `Ops` on its key.
template <class... Ops>
void implement(torch::Library& lib, OpList<Ops...>) {
    auto one = [&]<class Op>() {
        std::string name = Op::name;
        if (*Op::overload_name) name += std::string(".") + Op::overload_name;
        lib.impl(name.c_str(),
                 torch::CppFunction::makeFromUnboxedFunction(TORCH_FN(Hooked<Op>::kernel)));
    };
    (one.template operator()<Ops>(), ...);
}

}  // namespace

WorkCapture::WorkCapture(Agent* agent, CollectiveTracker::Id id, uint64_t own)
    : m_agent(agent), m_id(id), m_own(own) {
    if (!agent || !id || !c10::impl::tls_is_dispatch_key_included(kHookKey)) return;
    m_active = true;
    m_wasExcluded = c10::impl::tls_is_dispatch_key_excluded(kHookKey);
    c10::impl::tls_set_dispatch_key_excluded(kHookKey, false);
    m_previous = std::exchange(t_capture, this);
}

WorkCapture::~WorkCapture() {
    if (!m_active) return;
    t_capture = m_previous;
    c10::impl::tls_set_dispatch_key_excluded(kHookKey, m_wasExcluded);
}

void WorkCapture::result(const at::Tensor& result) {
    if (m_handedOver || Agent::current() != m_agent) return;
    m_handedOver = true;
    try {
        m_agent->tracker().issued(m_id, std::move(m_work), m_completesOnWait, result, OpSeq{},
                                  m_own);
    } catch (const std::exception& e) {
        m_agent->ownError("record", std::string("could not follow a collective: ") + e.what());
    }
}

bool installDispatcherHook(std::string& why) {
    static std::unique_ptr<torch::Library> library, kernels;
    static std::string error;
    if (library) return true;
    if (error.empty()) {
        try {
            auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "_", kHookKey,
                                                        __FILE__, __LINE__);
            watchOperatorRemovals();  // before the first op reaches the hook
            lib->fallback(torch::CppFunction::makeFromBoxedFunction<&hookFallback>());
            kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kHookKey,
                                                       __FILE__, __LINE__);
            implement(*kernels, UnboxedOps{});
            library = std::move(lib);
            return true;
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    why = error;
    return false;
}

void enableDispatcherHook(bool on) {
    if (on) {
        BenchCut cut = benchCut();
        g_benchCut.store(cut, std::memory_order_relaxed);
        const char* boxed = std::getenv(setting("bench_boxed").env.data());
        g_benchBoxed.store(boxed && std::string_view(boxed) == "1", std::memory_order_relaxed);
        HookPhases::enable(cut == BenchCut::Phases);
        if (cut == BenchCut::Off) return;
    }
    c10::impl::tls_set_dispatch_key_included(kHookKey, on);
}

bool dispatcherHookEnabled() {
    return c10::impl::tls_is_dispatch_key_included(kHookKey);
}

bool dispatcherHookSeesOps() {
    return c10::impl::tls_is_dispatch_key_included(kHookKey) &&
           !c10::impl::tls_is_dispatch_key_excluded(kHookKey);
}

}  // namespace meshscope::capture
