#pragma once

// What the agent knows about torch's Python objects: the DTensor and
// placement types, device meshes seen so far, and per-OpOverload facts. All
// lookups are cached so the dispatch hook does little more than pointer
// compares per operand. Requires the GIL.

#include <Python.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory_resource>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ATen/core/TensorBase.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "capture/agent/agent_memory.h"
#include "core/store/records.h"
#include "core/util/direct_mapped.h"

namespace meshscope {
class RankWriter;
}

namespace meshscope::capture {

// A strong reference that does not need the pybind11 machinery.
class PyRef {
  public:
    PyRef() = default;
    static PyRef steal(PyObject* obj) { return PyRef(obj); }
    static PyRef borrow(PyObject* obj) {
        Py_XINCREF(obj);
        return PyRef(obj);
    }
    PyRef(PyRef&& other) noexcept : m_obj(other.release()) {}
    PyRef& operator=(PyRef&& other) noexcept;
    PyRef(const PyRef&) = delete;
    PyRef& operator=(const PyRef&) = delete;
    ~PyRef() { Py_XDECREF(m_obj); }
    PyObject* get() const { return m_obj; }
    PyObject* release() {
        PyObject* obj = m_obj;
        m_obj = nullptr;
        return obj;
    }
    explicit operator bool() const { return m_obj != nullptr; }

  private:
    explicit PyRef(PyObject* obj) : m_obj(obj) {}
    PyObject* m_obj = nullptr;
};

// Whether `obj` is an instance of torch.nn.<cls> ("Module", "Parameter");
// each class is looked up once. Requires the GIL.
bool isNnInstance(PyObject* obj, const char* cls);

// Facts about one OpOverload (aten.sub.Tensor), cached by object identity.
struct OpInfo {
    // What every recorded op reads first, together in the struct's first bytes.
    StringId name;              // "aten::sub.Tensor"
    bool isFactory = false;     // aten creation op (zeros, arange, ...): no tensor inputs
    bool isCopy = false;        // copy_: a plain source copied into a DTensor is class F
    bool isInPlace = false;     // add_, _foreach_add_.List: argument 0 is the destination
    bool isScalarRead = false;  // float(t), t.item(): a Partial DTensor's share is read
    PyRef overload;             // keeps the cache key alive
    PyRef call;                 // OpOverload._op: the C++ callable, skipping Python __call__
    std::string text;
};

// What the dispatcher hook reads of an operator on every call, in the
// agent's memory by the operator's identity: its schema's counts and name
// live in torch's operator entry, lines that nothing else on the hook's way
// keeps in the caches (a read of c10::OperatorEntry::schema() alone cost
// about 85 ns an op). Written once under the GIL, then read without it.
struct HookOp {
    const void* key = nullptr;  // the operator (std::hash<c10::OperatorHandle>)
    uint32_t epoch = 0;         // operatorsEpoch() when it was read
    uint16_t arguments = 0;     // its schema's arguments and returns
    uint16_t returns = 0;
    bool c10d = false;       // a c10d op (isC10dOp)
    bool liftFresh = false;  // aten::lift_fresh (torch.tensor(data)'s birth)
    // What a plain op's provenance can reach: none of its returns is a
    // tensor (item(), the in-place foreach ops) or its one return is an
    // argument it wrote (add_, copy_, an out= variant): that argument's
    // position, else -1. Such a return gets nothing from that argument.
    bool returnsTensors = true;
    int16_t returnsWritten = -1;
    OpInfo info;  // its name; `overload` and `call` stay empty
};

// Counts the operators torch's dispatcher dropped (a torch.library.Library
// deleted): a new operator may then have a dropped one's address, so every
// HookOp read before is read again. Starts counting at
// watchOperatorRemovals(), once per process.
namespace detail {
extern std::atomic<uint32_t> g_operatorsEpoch;
}
inline uint32_t operatorsEpoch() {
    return detail::g_operatorsEpoch.load(std::memory_order_relaxed);
}
void watchOperatorRemovals();

// The tensor record shared by the DTensors of one spec (see
// TensorDescriptions), remembered with the spec: a DTensor's global shape is
// its spec's, and dtype, device and numel confirm the match.
struct SpecDescription {
    TensorId id;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    c10::Device device{c10::DeviceType::CPU};
    int64_t numel = -1;
    bool matches(const at::TensorBase& t) const {
        return id && t.scalar_type() == dtype && t.device() == device && t.numel() == numel;
    }
};

struct DTensorFacts {
    MeshId mesh;
    StringId placements;  // "[Shard(0), Replicate()]"
    // The same text, owned by TorchTypes' cache until clear(): copy it to keep it.
    std::string_view placementsText;
    PyObject* meshObj = nullptr;  // borrowed from the spec
    int meshNdim = 0;
    PyObject* spec = nullptr;  // borrowed: the key of rememberDescription()
    SpecDescription described;
};

class TorchTypes {
  public:
    // Imports the DTensor API. Throws std::runtime_error when torch has none.
    void load();
    void clear();  // drops every cached reference (detach)

    bool isDTensor(PyObject* obj) const {
        return m_dtensorType && PyObject_TypeCheck(obj, m_dtensorType);
    }
    OpInfo& opInfo(PyObject* overload, RankWriter& writer);
    // The hook's facts of `op` (HookOp); safe without the GIL. Null the
    // first time, or after operators were dropped: then addHookOp().
    HookOp* hookOp(const c10::OperatorHandle& op) const {
        const void* key = operatorKey(op);
        uint32_t epoch = operatorsEpoch();
        for (const auto& way : m_hookBuckets[hookBucket(key)]) {
            HookOp* known = way.load(std::memory_order_acquire);
            if (!known) break;  // ways fill in order
            if (known->key == key && known->epoch == epoch) return known;
        }
        return nullptr;
    }
    // Reads and keeps them. Requires the GIL.
    HookOp& addHookOp(const c10::OperatorHandle& op, RankWriter& writer);
    // The DTensor type; safe to compare against without the GIL.
    PyTypeObject* dtensorType() const { return m_dtensorType; }
    // Mesh and placements of a DTensor; registers the mesh on first sight.
    DTensorFacts dtensorFacts(PyObject* dtensor, RankWriter& writer);
    // Remembers the tensor record of the DTensors of `facts.spec`.
    void rememberDescription(const DTensorFacts& facts, const SpecDescription& described);
    // Drops the cached specs and placements nothing but the cache still
    // refers to, and bounds the rest: between steps, and when it is full.
    void trim();
    size_t cachedSpecs() const { return m_specs.size(); }
    // Operators read by addHookOp(), again after a removal included.
    size_t hookOpsRead() const { return m_hookOps.size(); }
    std::string meshText(MeshId id) const;  // "mesh [2] ('model')"
    // The mesh dim a per-rank batch is sharded over: the one named like a
    // data-parallel dim ("batch", "data", "dp", ...), else dim 0.
    int batchMeshDim(MeshId id) const;
    // False when every dim is named and none is a data-parallel dim.
    bool hasBatchDim(MeshId id) const;
    // The mesh's dim names (empty: unnamed, or a mesh not seen).
    std::vector<std::string> meshDimNames(MeshId id) const;

    // Interned dtype and device names, cached.
    StringId dtypeId(c10::ScalarType type, RankWriter& writer);
    StringId deviceId(const c10::Device& device, RankWriter& writer);
    // The DTensor's local tensor (new reference), or nullptr.
    PyRef localTensor(PyObject* dtensor) const { return m_local.read(dtensor); }
    // The plain tensor an AsyncCollectiveTensor waits into (its `elem`,
    // which .wait() and funcol.wait_tensor() return; new reference), or
    // nullptr for any other object.
    PyRef waitedTensor(PyObject* obj) const;

    // The label of a functional collective's `group` argument ("mesh dim
    // model" for DTensor's (mesh, dim) pairs): `labeler(group)` formats it
    // once per group object (per mesh and dim for a pair, which DTensor
    // builds anew for every collective); the objects are kept alive while
    // cached.
    // `text`, when given, receives the label itself.
    StringId groupLabel(PyObject* group, PyObject* labeler, RankWriter& writer,
                        std::string* text = nullptr);

    PyObject* fromLocal() const { return m_fromLocal.get(); }
    PyObject* replicate() const { return m_replicate.get(); }
    PyObject* shardType() const { return m_shard.get(); }

  private:
    // An attribute DTensor declares in __slots__ (_spec, _local_tensor). Read
    // straight from the object's slot while the object's type resolves the
    // name to the member descriptor DTensor had when the agent loaded; by
    // getattr otherwise (a subclass that overrides it, a patched class).
    class Slot {
      public:
        void load(PyTypeObject* type, PyObject* name);
        // New reference, or nullptr (no error set). Inline while the type
        // is the one checked last and unchanged: a read per DTensor operand.
        PyRef read(PyObject* obj) const {
            PyTypeObject* type = Py_TYPE(obj);
            if (m_offset >= 0 && type == m_checkedType &&
                PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) &&
                type->tp_version_tag == m_checkedVersion)  // null: the slot is unset
                return PyRef::borrow(
                    *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj) + m_offset));
            return readChecked(obj);
        }
        void clear();

      private:
        bool direct(PyTypeObject* type) const;
        PyRef readChecked(PyObject* obj) const;  // read() past a type check
        PyRef m_name, m_descr;
        Py_ssize_t m_offset = -1;
        // The last type that resolved the name to m_descr, while its
        // attribute version is unchanged (any change to the type or its
        // bases gives it a new one): no lookup per read.
        mutable PyTypeObject* m_checkedType = nullptr;
        mutable unsigned int m_checkedVersion = 0;
    };
    // Facts of a DTensorSpec (uncached).
    DTensorFacts specFacts(PyObject* spec, RankWriter& writer);
    struct MeshEntry {
        PyRef obj;
        MeshId id;
        int ndim = 0;
        std::string text;
        std::vector<std::string> dimNames;
    };
    std::string formatPlacement(PyObject* placement) const;
    MeshEntry& mesh(PyObject* meshObj, RankWriter& writer);

    PyTypeObject* m_dtensorType = nullptr;
    PyRef m_dtensorTypeRef, m_fromLocal, m_replicate, m_shard, m_replicateType, m_partialType;
    PyRef m_asyncCollectiveType, m_elemName;  // absent from a torch without them
    Slot m_spec, m_local;
    std::unordered_map<int, StringId> m_dtypeIds, m_deviceIds;
    PyRef m_placementsName, m_meshName, m_dimName, m_reduceName, m_opName;
    std::unordered_map<PyObject*, OpInfo> m_ops;
    static const void* operatorKey(const c10::OperatorHandle& op) {
        return reinterpret_cast<const void*>(std::hash<c10::OperatorHandle>{}(op));
    }
    static size_t hookBucket(const void* key) {
        return (reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull) >> (64 - kHookBucketBits);
    }
    static constexpr int kHookBucketBits = 7;
    // Four ways a bucket (32 bytes): operators whose addresses collide do
    // not displace each other. A HookOp is never changed once published and
    // lives as long as the agent (a hook on another thread may still read
    // one a full bucket displaced).
    using HookBucket = std::array<std::atomic<HookOp*>, 4>;
    std::array<HookBucket, size_t(1) << kHookBucketBits> m_hookBuckets{};
    std::pmr::deque<HookOp> m_hookOps{agentMemory()};
    // Every HookOp of the current epoch by operator (under the GIL): one
    // read per operator, whatever the buckets still hold.
    std::unordered_map<const void*, HookOp*> m_hookOpsByKey;
    uint32_t m_hookOpsEpoch = 0;
    std::unordered_map<PyObject*, MeshEntry> m_meshes;
    struct GroupKey {
        PyObject* obj;
        long dim;  // -1: `obj` is the group itself
        bool operator==(const GroupKey&) const = default;
    };
    struct GroupKeyHash {
        size_t operator()(const GroupKey& k) const noexcept {
            return std::hash<const void*>{}(k.obj) * 31 + size_t(k.dim);
        }
    };
    struct GroupEntry {
        PyRef obj;  // keeps the key alive
        StringId label;
        std::string text;
    };
    std::unordered_map<GroupKey, GroupEntry, GroupKeyHash> m_groups;
    static constexpr size_t kMaxGroups = 256;
    std::unordered_map<std::string, StringId> m_placementText;
    // DTensor makes new spec and placements objects every step; their cache
    // nodes live until the step's end (trim()), so they come from a pool of
    // their own, not from the heap between the training's tensor buffers
    // (see TensorTable). Declared before the caches it serves.
    std::pmr::unsynchronized_pool_resource m_stepPool{agentMemory()};
    struct PlacementsEntry {
        PyRef tuple;  // keeps the key alive
        StringId id;
        std::string_view text;  // a key of m_placementText
    };
    std::pmr::unordered_map<PyObject*, PlacementsEntry> m_placementTuples{&m_stepPool};
    // The same placements by content, for the fresh tuples DTensor makes
    // every step (a redistribution's target, from_local): Shard(d) and
    // Replicate() of their exact types, up to kContentRank of them, are
    // their type and dim, so a new tuple of them costs a few type checks
    // instead of being formatted, interned and kept until the step's end.
    static constexpr size_t kContentRank = 4;
    struct PlacementsContent {
        std::array<const PyTypeObject*, kContentRank> type{};
        std::array<long, kContentRank> dim{};
        bool operator==(const PlacementsContent&) const = default;
    };
    struct PlacementsSeen {
        PlacementsContent content;
        StringId id;
        std::string_view text;  // a key of m_placementText
    };
    std::vector<PlacementsSeen> m_placementContents;  // few: searched in order
    static constexpr size_t kMaxPlacementContents = 64;
    bool placementsContent(PyObject* tuple, PlacementsContent& out) const;
    // DTensor's sharding propagation hands out the same DTensorSpec objects
    // again and again: their facts are read once per spec object.
    struct SpecEntry {
        PyRef spec;  // keeps the key alive
        DTensorFacts facts;
    };
    std::pmr::unordered_map<PyObject*, SpecEntry> m_specs{&m_stepPool};
    static constexpr size_t kMaxSpecs = 4096;
    // Direct-mapped in front of m_specs (a DTensor operand's facts are read
    // on every op): one probe instead of a hash-node walk. Emptied before
    // trim() or clear() drops the nodes it points to.
    DirectMapped<PyObject, SpecEntry, 512> m_specFront;
    // What trim() found dead, released after the sweep (its capacity kept).
    std::vector<PyRef> m_dead;
};

// "aten::sub.Tensor", "aten::mm" (the default overload has no suffix), as
// OpOverload.name() spells it.
std::string operatorText(const c10::OperatorName& name);
// Whether a value of this schema type holds tensors (Tensor, Tensor?,
// Tensor[], tuples of them).
bool holdsTensors(const c10::TypePtr& type);
// HookOp::returnsWritten of an op with this schema.
int16_t writtenReturn(const c10::FunctionSchema& schema);
// Name, factory/copy/in-place flags of `info` from the op's name.
void describeOp(OpInfo& info, std::string text, RankWriter& writer);

// torch's Python name of a dtype: "float32", "int64", "bfloat16".
std::string dtypeName(c10::ScalarType type);

// Shape as "[4, 8]".
std::string shapeText(const int64_t* sizes, size_t count);

// UTF-8 of a Python str; what UTF-8 cannot hold (the surrogates that stand
// for undecodable bytes of a file name or argument) as \xNN; "?" for
// anything but a str. Requires the GIL.
std::string pyText(PyObject* text);

}  // namespace meshscope::capture
