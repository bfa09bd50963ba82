#include "capture/agent/interop/torch_types.h"

#include "core/analysis/fix_suggestion.h"

#include <structmember.h>

#include <stdexcept>

#include "capture/agent/collectives/c10d_calls.h"
#include "capture/agent/hooks/hook_phases.h"
#include "core/store/rank_writer.h"
#include "core/util/hot_path.h"

namespace meshscope::capture {
namespace {

PyRef import(const char* module, const char* attr) {
    PyRef mod = PyRef::steal(PyImport_ImportModule(module));
    if (!mod) return {};
    return PyRef::steal(PyObject_GetAttrString(mod.get(), attr));
}

[[noreturn]] void failImport(const std::string& what) {
    PyErr_Clear();
    throw std::runtime_error("meshscope: cannot use this torch: " + what +
                             " is missing (torch >= 2.4 with torch.distributed is required)");
}

std::string toUtf8(PyObject* obj) {
    if (!obj) return {};
    PyRef text = PyRef::steal(PyObject_Str(obj));
    if (!text) {
        PyErr_Clear();
        return "?";
    }
    return pyText(text.get());
}

std::vector<int64_t> intList(PyObject* seq) {
    std::vector<int64_t> out;
    PyRef fast = PyRef::steal(seq ? PySequence_Fast(seq, "not a sequence") : nullptr);
    if (!fast) {
        PyErr_Clear();
        return out;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.get()); ++i)
        out.push_back(PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast.get(), i)));
    if (PyErr_Occurred()) PyErr_Clear();
    return out;
}

}  // namespace

std::string pyText(PyObject* text) {
    if (!text || !PyUnicode_Check(text)) return "?";
    Py_ssize_t size = 0;
    if (const char* data = PyUnicode_AsUTF8AndSize(text, &size)) return std::string(data, size);
    PyErr_Clear();
    // the bytes the surrogates stand for (as os.fsencode), shown as \xNN
    PyRef raw = PyRef::steal(PyUnicode_AsEncodedString(text, "utf-8", "surrogateescape"));
    PyRef shown =
        raw ? PyRef::steal(PyUnicode_DecodeUTF8(PyBytes_AS_STRING(raw.get()),
                                                PyBytes_GET_SIZE(raw.get()), "backslashreplace"))
            : PyRef{};
    const char* data = shown ? PyUnicode_AsUTF8AndSize(shown.get(), &size) : nullptr;
    if (!data) {
        PyErr_Clear();
        return "?";
    }
    return std::string(data, size);
}

namespace {

// A creation op: its output is a birth (describeOp's isFactory).
bool isFactoryName(std::string_view name) {
    static constexpr std::string_view kFactories[] = {
        "aten::arange",         "aten::zeros",           "aten::ones",
        "aten::full",           "aten::empty",           "aten::rand",
        "aten::randn",          "aten::randint",         "aten::eye",
        "aten::linspace",       "aten::scalar_tensor",   "aten::tensor",
        "aten::tril_indices",   "aten::triu_indices",    "aten::randperm",
        "aten::empty_strided",  "aten::lift_fresh",      "aten::range",
        "aten::logspace",       "aten::empty_permuted",  "aten::hann_window",
        "aten::hamming_window", "aten::blackman_window", "aten::bartlett_window",
        "aten::kaiser_window"};
    for (auto f : kFactories)
        if (name.substr(0, f.size()) == f && (name.size() == f.size() || name[f.size()] == '.'))
            return true;
    return false;
}

}  // namespace

PyRef& PyRef::operator=(PyRef&& other) noexcept {
    if (this != &other) {
        Py_XDECREF(m_obj);
        m_obj = other.release();
    }
    return *this;
}

std::string dtypeName(c10::ScalarType type) {
    switch (type) {
        case c10::ScalarType::Float:
            return "float32";
        case c10::ScalarType::Double:
            return "float64";
        case c10::ScalarType::Half:
            return "float16";
        case c10::ScalarType::BFloat16:
            return "bfloat16";
        case c10::ScalarType::Long:
            return "int64";
        case c10::ScalarType::Int:
            return "int32";
        case c10::ScalarType::Short:
            return "int16";
        case c10::ScalarType::Char:
            return "int8";
        case c10::ScalarType::Byte:
            return "uint8";
        case c10::ScalarType::Bool:
            return "bool";
        case c10::ScalarType::ComplexFloat:
            return "complex64";
        case c10::ScalarType::ComplexDouble:
            return "complex128";
        default:
            return c10::toString(type);
    }
}

std::string shapeText(const int64_t* sizes, size_t count) {
    std::string out = "[";
    for (size_t i = 0; i < count; ++i) {
        if (i) out += ", ";
        out += std::to_string(sizes[i]);
    }
    return out + "]";
}

void TorchTypes::load() {
    m_dtensorTypeRef = import("torch.distributed.tensor", "DTensor");
    if (!m_dtensorTypeRef || !PyType_Check(m_dtensorTypeRef.get()))
        failImport("torch.distributed.tensor.DTensor");
    m_dtensorType = reinterpret_cast<PyTypeObject*>(m_dtensorTypeRef.get());
    m_fromLocal = PyRef::steal(PyObject_GetAttrString(m_dtensorTypeRef.get(), "from_local"));
    m_replicateType = import("torch.distributed.tensor", "Replicate");
    m_shard = import("torch.distributed.tensor", "Shard");
    m_partialType = import("torch.distributed.tensor", "Partial");
    if (!m_fromLocal || !m_replicateType || !m_shard || !m_partialType)
        failImport("DTensor.from_local / Replicate / Shard / Partial");
    m_replicate = PyRef::steal(PyObject_CallNoArgs(m_replicateType.get()));
    m_spec.load(m_dtensorType, PyRef::steal(PyUnicode_InternFromString("_spec")).get());
    m_placementsName = PyRef::steal(PyUnicode_InternFromString("placements"));
    m_meshName = PyRef::steal(PyUnicode_InternFromString("mesh"));
    m_dimName = PyRef::steal(PyUnicode_InternFromString("dim"));
    m_reduceName = PyRef::steal(PyUnicode_InternFromString("reduce_op"));
    m_opName = PyRef::steal(PyUnicode_InternFromString("_op"));
    m_local.load(m_dtensorType, PyRef::steal(PyUnicode_InternFromString("_local_tensor")).get());
    m_asyncCollectiveType =
        import("torch.distributed._functional_collectives", "AsyncCollectiveTensor");
    if (!m_asyncCollectiveType || !PyType_Check(m_asyncCollectiveType.get())) {
        PyErr_Clear();
        m_asyncCollectiveType = {};
    }
    m_elemName = PyRef::steal(PyUnicode_InternFromString("elem"));
}

PyRef TorchTypes::waitedTensor(PyObject* obj) const {
    if (!m_asyncCollectiveType ||
        !PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(m_asyncCollectiveType.get())))
        return {};
    PyRef elem = PyRef::steal(PyObject_GetAttr(obj, m_elemName.get()));
    if (!elem) PyErr_Clear();
    return elem;
}

void TorchTypes::Slot::load(PyTypeObject* type, PyObject* name) {
    m_name = PyRef::borrow(name);
    PyObject* descr = _PyType_Lookup(type, name);  // borrowed
    m_offset = -1;
    if (descr && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        const PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READ_RESTRICTED)) {
            m_descr = PyRef::borrow(descr);
            m_offset = member->offset;
        }
    }
}

bool TorchTypes::Slot::direct(PyTypeObject* type) const {
    if (m_offset < 0) return false;
    if (type == m_checkedType && PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) &&
        type->tp_version_tag == m_checkedVersion)
        return true;
    if (_PyType_Lookup(type, m_name.get()) != m_descr.get()) return false;
    // Version tags are never reused: a new type at a freed one's address
    // has another.
    if (PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
        m_checkedType = type;
        m_checkedVersion = type->tp_version_tag;
    }
    return true;
}

PyRef TorchTypes::Slot::readChecked(PyObject* obj) const {
    if (direct(Py_TYPE(obj))) {
        PyObject* value = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj) + m_offset);
        return PyRef::borrow(value);  // null: the slot is unset
    }
    PyRef value = PyRef::steal(m_name ? PyObject_GetAttr(obj, m_name.get()) : nullptr);
    if (!value) PyErr_Clear();
    return value;
}

void TorchTypes::Slot::clear() {
    m_name = {};
    m_descr = {};
    m_offset = -1;
    m_checkedType = nullptr;
}

void TorchTypes::clear() {
    m_specFront.clear();
    m_specs.clear();
    m_ops.clear();
    for (auto& bucket : m_hookBuckets)  // the HookOps stay until the agent goes
        for (auto& way : bucket)
            way.store(nullptr, std::memory_order_relaxed);
    m_hookOpsByKey.clear();
    m_dtypeIds.clear();
    m_deviceIds.clear();
    m_meshes.clear();
    m_groups.clear();
    m_placementContents.clear();
    m_placementTuples.clear();
    m_placementText.clear();
    m_dtensorType = nullptr;
    m_dtensorTypeRef = {};
    m_fromLocal = {};
    m_replicate = {};
    m_shard = {};
    m_replicateType = {};
    m_partialType = {};
    m_asyncCollectiveType = {};
    m_spec.clear();
    m_local.clear();
}

StringId TorchTypes::dtypeId(c10::ScalarType type, RankWriter& writer) {
    auto it = m_dtypeIds.find(int(type));
    if (it == m_dtypeIds.end())
        it = m_dtypeIds.emplace(int(type), writer.intern(dtypeName(type))).first;
    return it->second;
}

StringId TorchTypes::deviceId(const c10::Device& device, RankWriter& writer) {
    int key = int(device.type()) * 4096 + device.index() + 1;
    auto it = m_deviceIds.find(key);
    if (it == m_deviceIds.end()) it = m_deviceIds.emplace(key, writer.intern(device.str())).first;
    return it->second;
}

OpInfo& TorchTypes::opInfo(PyObject* overload, RankWriter& writer) {
    auto it = m_ops.find(overload);
    if (it != m_ops.end()) return it->second;
    OpInfo info;
    info.overload = PyRef::borrow(overload);
    info.call = PyRef::steal(PyObject_GetAttr(overload, m_opName.get()));
    if (!info.call) {  // not an OpOverload (higher-order op): call it as given
        PyErr_Clear();
        info.call = PyRef::borrow(overload);
    }
    PyRef nameFn = PyRef::steal(PyObject_GetAttrString(overload, "name"));
    PyRef name = nameFn ? PyRef::steal(PyObject_CallNoArgs(nameFn.get())) : PyRef{};
    describeOp(info, name ? toUtf8(name.get()) : toUtf8(overload), writer);
    PyErr_Clear();
    return m_ops.emplace(overload, std::move(info)).first->second;
}

namespace detail {
std::atomic<uint32_t> g_operatorsEpoch{0};
}

void watchOperatorRemovals() {
    struct Watch final : c10::OpRegistrationListener {
        void onOperatorRegistered(const c10::OperatorHandle&) override {}
        void onOperatorDeregistered(const c10::OperatorHandle&) override {
            detail::g_operatorsEpoch.fetch_add(1, std::memory_order_relaxed);
        }
    };
    // Kept to the process's end: torch's dispatcher may outlive this
    // library's statics, and deregisters operators at exit.
    static auto* watching = new c10::RegistrationHandleRAII(
        c10::Dispatcher::singleton().addRegistrationListener(std::make_unique<Watch>()));
    (void)watching;
}

bool holdsTensors(const c10::TypePtr& type) {
    if (type->kind() == c10::TypeKind::TensorType) return true;
    for (const c10::TypePtr& inner : type->containedTypes())
        if (holdsTensors(inner)) return true;
    return false;
}

int16_t writtenReturn(const c10::FunctionSchema& schema) {
    if (schema.returns().size() != 1) return -1;
    const c10::AliasInfo* returned = schema.returns()[0].alias_info();
    if (!returned || !returned->isWrite() ||
        schema.returns()[0].type()->kind() != c10::TypeKind::TensorType)
        return -1;
    const std::vector<c10::Argument>& arguments = schema.arguments();
    for (size_t i = 0; i < arguments.size(); ++i) {
        const c10::AliasInfo* written = arguments[i].alias_info();
        if (written && written->isWrite() && written->beforeSets() == returned->beforeSets() &&
            arguments[i].type()->kind() == c10::TypeKind::TensorType)
            return int16_t(i);
    }
    return -1;
}

HookOp& TorchTypes::addHookOp(const c10::OperatorHandle& op, RankWriter& writer) {
    if (HookOp* there = hookOp(op)) return *there;  // published meanwhile
    const void* key = operatorKey(op);
    uint32_t epoch = operatorsEpoch();
    if (epoch != m_hookOpsEpoch) {  // operators were dropped: read each again
        m_hookOpsByKey.clear();
        m_hookOpsEpoch = epoch;
    }
    HookOp*& known = m_hookOpsByKey[key];
    if (!known) {
        const c10::FunctionSchema& schema = op.schema();
        HookOp& added = m_hookOps.emplace_back();
        added.key = key;
        added.epoch = epoch;
        added.arguments = uint16_t(schema.arguments().size());
        added.returns = uint16_t(schema.returns().size());
        added.c10d = isC10dOp(schema);
        added.returnsTensors =
            std::any_of(schema.returns().begin(), schema.returns().end(),
                        [](const c10::Argument& r) { return holdsTensors(r.type()); });
        added.returnsWritten = writtenReturn(schema);
        describeOp(added.info, operatorText(schema.operator_name()), writer);
        added.liftFresh = added.info.text == "aten::lift_fresh";
        known = &added;
    }
    // into the first way that is empty or stale, else in place of the last
    HookBucket& bucket = m_hookBuckets[hookBucket(key)];
    std::atomic<HookOp*>* into = &bucket.back();
    for (auto& way : bucket)
        if (HookOp* held = way.load(std::memory_order_relaxed); !held || held->epoch != epoch) {
            into = &way;
            break;
        }
    into->store(known, std::memory_order_release);
    return *known;
}

void describeOp(OpInfo& info, std::string text, RankWriter& writer) {
    info.text = std::move(text);
    info.name = writer.intern(info.text);
    info.isFactory = isFactoryName(info.text);
    info.isCopy = info.text == "aten::copy_" || info.text.starts_with("aten::copy_.");
    info.isInPlace = info.text.find("_.") != std::string::npos || info.text.ends_with("_");
    // aten::item above autograd (the dispatcher hook), _local_scalar_dense below it (the mode)
    info.isScalarRead = info.text == "aten::item" || info.text == "aten::_local_scalar_dense" ||
                        info.text.starts_with("aten::_local_scalar_dense.");
}

std::string operatorText(const c10::OperatorName& name) {
    return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

std::string TorchTypes::formatPlacement(PyObject* p) const {
    if (PyObject_IsInstance(p, m_shard.get()) == 1) {
        PyRef dim = PyRef::steal(PyObject_GetAttr(p, m_dimName.get()));
        long d = dim ? PyLong_AsLong(dim.get()) : -1;
        PyErr_Clear();
        return "Shard(" + std::to_string(d) + ")";
    }
    if (PyObject_IsInstance(p, m_replicateType.get()) == 1) return "Replicate()";
    if (PyObject_IsInstance(p, m_partialType.get()) == 1) {
        PyRef op = PyRef::steal(PyObject_GetAttr(p, m_reduceName.get()));
        PyErr_Clear();
        return "Partial(" + (op ? toUtf8(op.get()) : std::string("sum")) + ")";
    }
    PyErr_Clear();
    return toUtf8(p);
}

TorchTypes::MeshEntry& TorchTypes::mesh(PyObject* meshObj, RankWriter& writer) {
    auto it = m_meshes.find(meshObj);
    if (it != m_meshes.end()) return it->second;
    MeshRecord record;
    record.id = writer.newMeshId();
    PyRef device = PyRef::steal(PyObject_GetAttrString(meshObj, "device_type"));
    record.deviceType = device ? toUtf8(device.get()) : "?";
    PyRef shape = PyRef::steal(PyObject_GetAttrString(meshObj, "shape"));
    record.shape = intList(shape.get());
    PyRef names = PyRef::steal(PyObject_GetAttrString(meshObj, "mesh_dim_names"));
    if (names && names.get() != Py_None) {
        PyRef fast = PyRef::steal(PySequence_Fast(names.get(), "names"));
        for (Py_ssize_t i = 0; fast && i < PySequence_Fast_GET_SIZE(fast.get()); ++i)
            record.dimNames.push_back(toUtf8(PySequence_Fast_GET_ITEM(fast.get(), i)));
    }
    PyRef tensor = PyRef::steal(PyObject_GetAttrString(meshObj, "mesh"));
    PyRef flat =
        tensor ? PyRef::steal(PyObject_CallMethod(tensor.get(), "flatten", nullptr)) : PyRef{};
    PyRef ranks = flat ? PyRef::steal(PyObject_CallMethod(flat.get(), "tolist", nullptr)) : PyRef{};
    record.ranks = intList(ranks.get());
    PyErr_Clear();

    MeshEntry entry;
    entry.obj = PyRef::borrow(meshObj);
    entry.id = record.id;
    entry.ndim = int(record.shape.size());
    entry.dimNames = record.dimNames;
    entry.text = "mesh " + shapeText(record.shape.data(), record.shape.size());
    for (size_t i = 0; i < record.dimNames.size(); ++i)
        entry.text += (i ? ", '" : " ('") + record.dimNames[i] + "'" +
                      (i + 1 == record.dimNames.size() ? ")" : "");
    writer.submit(Record{std::move(record)});
    return m_meshes.emplace(meshObj, std::move(entry)).first->second;
}

StringId TorchTypes::groupLabel(PyObject* group, PyObject* labeler, RankWriter& writer,
                                std::string* textOut) {
    GroupKey key{group, -1};
    if (PyTuple_Check(group) && PyTuple_GET_SIZE(group) == 2 &&
        PyLong_CheckExact(PyTuple_GET_ITEM(group, 1))) {
        long dim = PyLong_AsLong(PyTuple_GET_ITEM(group, 1));
        if (dim >= 0) key = {PyTuple_GET_ITEM(group, 0), dim};
        PyErr_Clear();
    }
    auto cached = m_groups.find(key);
    if (cached != m_groups.end()) {
        if (textOut) *textOut = cached->second.text;
        return cached->second.label;
    }
    std::string text = Py_TYPE(group)->tp_name;  // when the labeler fails
    PyRef label = PyRef::steal(PyObject_CallOneArg(labeler, group));
    if (label && PyUnicode_Check(label.get())) {
        Py_ssize_t size = 0;
        const char* utf8 = PyUnicode_AsUTF8AndSize(label.get(), &size);
        if (utf8) text.assign(utf8, size_t(size));
    }
    PyErr_Clear();
    if (m_groups.size() >= kMaxGroups) m_groups.clear();
    StringId id = writer.intern(text);
    if (textOut) *textOut = text;
    m_groups.emplace(key, GroupEntry{PyRef::borrow(key.obj), id, std::move(text)});
    return id;
}

MESHSCOPE_HOT DTensorFacts TorchTypes::dtensorFacts(PyObject* dtensor, RankWriter& writer) {
    PyRef spec = m_spec.read(dtensor);
    if (!spec) return {};
    if (SpecEntry* front = m_specFront.find(spec.get())) return front->facts;
    auto cached = m_specs.find(spec.get());
    if (cached != m_specs.end()) {
        m_specFront.remember(spec.get(), &cached->second);
        return cached->second.facts;
    }
    DTensorFacts facts = specFacts(spec.get(), writer);
    if (!facts.mesh) return facts;
    facts.spec = spec.get();                  // cached: rememberDescription() finds it
    if (m_specs.size() >= kMaxSpecs) trim();  // facts are copies: nothing dangles
    auto added = m_specs.emplace(spec.get(), SpecEntry{PyRef::borrow(spec.get()), facts}).first;
    m_specFront.remember(spec.get(), &added->second);
    return facts;
}

void TorchTypes::rememberDescription(const DTensorFacts& facts, const SpecDescription& described) {
    auto it = facts.spec ? m_specs.find(facts.spec) : m_specs.end();
    if (it != m_specs.end()) it->second.facts.described = described;
}

void TorchTypes::trim() {
    // DTensor creates new spec and placements objects for redistributions
    // and from_local() every step; once only the cache holds one, it is
    // dead: dropping it keeps the cache (and the Python heap) from growing.
    m_specFront.clear();  // before the nodes it points to go
    auto dead = [this](const PyRef& kept) {
        if (Py_REFCNT(kept.get()) != 1) return false;
        m_dead.push_back(PyRef::borrow(kept.get()));  // the node's reference goes with it
        return true;
    };
    std::erase_if(m_specs, [&](const auto& kv) { return dead(kv.second.spec); });
    std::erase_if(m_placementTuples, [&](const auto& kv) { return dead(kv.second.tuple); });
    if (m_specs.size() >= kMaxSpecs) m_specs.clear();
    // Python would have freed these when the step dropped them: the
    // deallocation is theirs, moved here (the phase timer leaves it out)
    HookPhases::Moved moved;
    m_dead.clear();
}

DTensorFacts TorchTypes::specFacts(PyObject* spec, RankWriter& writer) {
    DTensorFacts facts;
    PyRef meshObj = PyRef::steal(PyObject_GetAttr(spec, m_meshName.get()));
    PyRef placements = PyRef::steal(PyObject_GetAttr(spec, m_placementsName.get()));
    if (!meshObj || !placements || !PyTuple_Check(placements.get())) {
        PyErr_Clear();
        return facts;
    }
    MeshEntry& m = mesh(meshObj.get(), writer);
    facts.mesh = m.id;
    facts.meshObj = m.obj.get();
    facts.meshNdim = m.ndim;
    // DTensor makes a new tuple of placements for every from_local() and
    // redistribution: one of Shard(d) and Replicate() is known by its
    // content, and nothing of it is kept. Any other tuple is known by the
    // object (DTensor's sharding cache hands out the same ones again and
    // again) and kept to the step's end. Either is formatted once.
    PlacementsContent content;
    bool byContent = placementsContent(placements.get(), content);
    if (byContent) {
        for (const PlacementsSeen& seen : m_placementContents)
            if (seen.content == content) {
                facts.placements = seen.id;
                facts.placementsText = seen.text;
                return facts;
            }
    } else if (auto cached = m_placementTuples.find(placements.get());
               cached != m_placementTuples.end()) {
        facts.placements = cached->second.id;
        facts.placementsText = cached->second.text;
        return facts;
    }
    std::string text = "[";
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(placements.get()); ++i) {
        if (i) text += ", ";
        text += formatPlacement(PyTuple_GET_ITEM(placements.get(), i));
    }
    text += "]";
    auto it = m_placementText.find(text);
    if (it == m_placementText.end()) it = m_placementText.emplace(text, writer.intern(text)).first;
    facts.placements = it->second;
    facts.placementsText = it->first;
    if (byContent) {
        if (m_placementContents.size() >= kMaxPlacementContents) m_placementContents.clear();
        m_placementContents.push_back({content, it->second, it->first});
    } else {
        if (m_placementTuples.size() > 4096) m_placementTuples.clear();
        m_placementTuples.emplace(placements.get(),
                                  PlacementsEntry{PyRef::borrow(placements.get()), it->second,
                                                  std::string_view(it->first)});
    }
    return facts;
}

bool TorchTypes::placementsContent(PyObject* tuple, PlacementsContent& out) const {
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    if (n < 1 || n > Py_ssize_t(kContentRank)) return false;
    const auto* shard = reinterpret_cast<const PyTypeObject*>(m_shard.get());
    const auto* replicate = reinterpret_cast<const PyTypeObject*>(m_replicateType.get());
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* p = PyTuple_GET_ITEM(tuple, i);
        const PyTypeObject* type = Py_TYPE(p);
        out.type[size_t(i)] = type;
        if (type == replicate) {
            out.dim[size_t(i)] = 0;
        } else if (type == shard) {  // exactly Shard: _StridedShard and others are formatted
            PyRef dim = PyRef::steal(PyObject_GetAttr(p, m_dimName.get()));
            if (!dim || !PyLong_Check(dim.get())) {
                PyErr_Clear();
                return false;
            }
            long d = PyLong_AsLong(dim.get());
            if (d == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                return false;
            }
            out.dim[size_t(i)] = d;  // Shard(-1) too: the type is part of the key
        } else {
            return false;
        }
    }
    return true;
}

std::string TorchTypes::meshText(MeshId id) const {
    for (auto& [obj, entry] : m_meshes)
        if (entry.id == id) return entry.text;
    return "mesh ?";
}

int TorchTypes::batchMeshDim(MeshId id) const {
    for (auto& [obj, entry] : m_meshes) {
        if (entry.id != id) continue;
        for (size_t i = 0; i < entry.dimNames.size(); ++i)
            if (meshHasBatchDim({entry.dimNames[i]})) return int(i);
    }
    return 0;
}

bool TorchTypes::hasBatchDim(MeshId id) const {
    return meshHasBatchDim(meshDimNames(id));
}

std::vector<std::string> TorchTypes::meshDimNames(MeshId id) const {
    for (auto& [obj, entry] : m_meshes)
        if (entry.id == id) return entry.dimNames;
    return {};
}

bool isNnInstance(PyObject* obj, const char* cls) {
    static std::unordered_map<std::string, PyObject*> types;  // kept for the process lifetime
    auto [it, added] = types.try_emplace(cls, nullptr);
    if (added) {
        PyRef nn = PyRef::steal(PyImport_ImportModule("torch.nn"));
        it->second = nn ? PyObject_GetAttrString(nn.get(), cls) : nullptr;
        PyErr_Clear();
    }
    int is = it->second ? PyObject_IsInstance(obj, it->second) : 0;
    if (is < 0) PyErr_Clear();
    return is == 1;
}

}  // namespace meshscope::capture
