#include "capture/agent/collectives/c10d_calls.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <array>
#include <optional>
#include <string>
#include <utility>

namespace meshscope::capture {
namespace {

// c10d op -> the kind torch.distributed's API calls it (the functional
// collectives' names where they exist, so kinds read alike).
constexpr std::array<std::pair<std::string_view, std::string_view>, 20> kKinds{{
    {"allreduce_", "all_reduce"},
    {"allreduce_coalesced_", "all_reduce_coalesced"},
    {"allgather_", "all_gather"},
    {"_allgather_base_", "all_gather_into_tensor"},
    {"allgather_coalesced_", "all_gather_coalesced"},
    {"allgather_into_tensor_coalesced_", "all_gather_into_tensor_coalesced"},
    {"reduce_scatter_", "reduce_scatter"},
    {"_reduce_scatter_base_", "reduce_scatter_tensor"},
    {"reduce_scatter_tensor_coalesced_", "reduce_scatter_tensor_coalesced"},
    {"alltoall_", "all_to_all"},
    {"alltoall_base_", "all_to_all_single"},
    {"broadcast_", "broadcast"},
    {"reduce_", "reduce"},
    {"gather_", "gather"},
    {"scatter_", "scatter"},
    {"barrier", "barrier"},
    {"monitored_barrier_", "monitored_barrier"},
    {"send", "send"},
    {"recv_", "recv"},
    {"recv_any_source_", "recv"},
}};

// The argument whose tensors a collective sends, by the names c10d's
// schemas give it.
constexpr std::array<std::string_view, 5> kDataArguments{"tensors", "input_tensors", "input_tensor",
                                                         "input", "tensor"};

int64_t tensorBytes(const c10::IValue& v) {
    int64_t bytes = 0;
    auto add = [&](const at::Tensor& t) {
        if (t.defined()) bytes += t.numel() * int64_t(t.element_size());
    };
    if (v.isTensor()) {
        add(v.toTensor());
    } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList().vec())
            add(t);
    } else if (v.isList()) {  // Tensor?[] or Tensor[][] (scatter's and gather's lists)
        for (const c10::IValue& item : v.toListRef())
            bytes += tensorBytes(item);
    }
    return bytes;
}

// The ProcessGroup a custom-class argument holds (its one slot is a
// capsule), without torch's class registry.
c10d::ProcessGroup* processGroup(const c10::IValue& v) {
    if (!v.isObject()) return nullptr;
    const auto& object = v.toObjectRef();
    if (object.slots().size() != 1 || !object.getSlot(0).isCapsule()) return nullptr;
    return dynamic_cast<c10d::ProcessGroup*>(object.getSlot(0).toCapsule().get());
}

// The device of the first tensor `v` holds.
std::optional<c10::Device> deviceOf(const c10::IValue& v) {
    if (v.isTensor()) return v.toTensor().device();
    if (v.isTensorList()) {
        c10::List<at::Tensor> list = v.toTensorList();
        if (!list.empty()) return list.get(0).device();
    } else if (v.isList()) {
        for (const c10::IValue& item : v.toListRef())
            if (auto d = deviceOf(item)) return d;
    }
    return std::nullopt;
}

// The name of the backend `pg` runs a collective on `device` with ("gloo",
// "nccl", a custom backend's own name).
std::string backendName(c10d::ProcessGroup& pg, std::optional<c10::DeviceType> device) {
    try {
        if (device) return pg.getBackend(*device)->getBackendName();
    } catch (...) {  // no backend registered for that device: the group's own
    }
    return pg.getBackendName();
}

// The process group a c10d call runs on, or null.
c10d::ProcessGroup* groupOf(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
    const auto& arguments = schema.arguments();
    for (size_t i = 0; i < arguments.size() && i < args.size(); ++i)
        if (arguments[i].name() == "process_group") return processGroup(args[i]);
    return nullptr;
}

std::optional<c10::Device> firstDevice(c10::ArrayRef<c10::IValue> args) {
    for (const c10::IValue& v : args)
        if (std::optional<c10::Device> d = deviceOf(v)) return d;
    return std::nullopt;
}

// Whether `pg`'s backend for `device` completes a work once its wait()
// returned (gloo). A few groups serve every collective of a thread: their
// answer is kept (a group at the address of one destroyed asks afresh only
// if its device differs; a new group there is the same kind of group in
// practice).
bool completesOnWait(c10d::ProcessGroup* pg, std::optional<c10::Device> device) {
    if (!pg) return false;
    struct Known {
        const void* pg;
        int device;
        bool onWait;
    };
    thread_local std::array<Known, 8> known{};
    thread_local size_t next = 0;
    std::optional<c10::DeviceType> type;
    if (device) type = device->type();
    int d = type ? int(*type) : -1;
    for (const Known& k : known)
        if (k.pg == pg && k.device == d) return k.onWait;
    bool onWait = backendName(*pg, type) == "gloo";
    known[next++ % known.size()] = {pg, d, onWait};
    return onWait;
}

}  // namespace

C10dFacts c10dFacts(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
    C10dFacts facts;
    std::string_view op = std::string_view(schema.name()).substr(6);
    facts.kind = op;
    for (const auto& [name, kind] : kKinds)
        if (name == op) facts.kind = kind;
    const auto& arguments = schema.arguments();
    for (std::string_view wanted : kDataArguments) {
        if (facts.kind == "barrier" || facts.kind == "monitored_barrier") break;
        bool found = false;
        for (size_t i = 0; i < arguments.size() && i < args.size() && !found; ++i)
            if (arguments[i].name() == wanted) {
                facts.bytes = tensorBytes(args[i]);
                found = true;
            }
        if (found) break;
    }
    c10d::ProcessGroup* pg = groupOf(schema, args);
    facts.device = firstDevice(args);
    facts.completesOnWait = completesOnWait(pg, facts.device);
    if (pg) {
        std::string label = pg->getGroupDesc();
        if (label.empty()) label = "group " + pg->getGroupName();
        int size = pg->getSize();
        facts.group = label + " (" + std::to_string(size) + (size == 1 ? " rank)" : " ranks)");
    }
    return facts;
}

bool completesOnWait(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
    return completesOnWait(groupOf(schema, args), firstDevice(args));
}

}  // namespace meshscope::capture
