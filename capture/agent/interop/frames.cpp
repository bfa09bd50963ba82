#include "capture/agent/interop/frames.h"

#include "core/analysis/fix_suggestion.h"

#include <frameobject.h>

// CPython 3.11: walk the interpreter's frame list directly. PyFrame_GetBack
// would allocate (and hand to the GC) a frame object for every torch frame
// between the op and the user's code, on every op.
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define MESHSCOPE_FAST_FRAMES 1
#define Py_BUILD_CORE_MODULE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE_MODULE
#endif

#include "capture/agent/interop/torch_types.h"
#include "core/store/rank_writer.h"

#include <utility>
#include "core/util/hot_path.h"

namespace meshscope::capture {

void FrameCache::setInternalPrefixes(std::vector<std::string> prefixes,
                                     std::vector<std::string> own) {
    m_internal = std::move(prefixes);
    m_own = std::move(own);
    clear();
}

void FrameCache::clear() {
    for (auto& [code, info] : m_codes)
        Py_XDECREF(info.code);
    m_codes.clear();
    m_codeFront.clear();
    m_oneFrame.clear();
    m_recentInternal.fill(nullptr);
    m_lastUser = {};
}

bool FrameCache::recentlyInternal(const PyCodeObject* code) const {
    for (const PyCodeObject* c : m_recentInternal)
        if (c == code) return true;
    return false;
}

void FrameCache::rememberInternal(const PyCodeObject* code) {
    m_recentInternal[m_recentNext] = code;
    m_recentNext = (m_recentNext + 1) % kRecentInternal;
}

MESHSCOPE_HOT FrameCache::CodeInfo& FrameCache::info(PyCodeObject* code, RankWriter& writer) {
    if (CodeInfo* front = m_codeFront.find(code)) return *front;
    auto it = m_codes.find(code);
    if (it != m_codes.end()) {
        m_codeFront.remember(code, &it->second);
        return it->second;
    }
    if (m_codes.size() > (1u << 16)) clear();  // bounded: code objects are long-lived
    CodeInfo info;
    info.code = reinterpret_cast<PyObject*>(code);
    Py_INCREF(info.code);
    PyObject* filename = PyObject_GetAttrString(info.code, "co_filename");
    PyObject* name = PyObject_GetAttrString(info.code, "co_qualname");
    if (!name) {
        PyErr_Clear();
        name = PyObject_GetAttrString(info.code, "co_name");
    }
    info.fileText = pyText(filename);
    std::string function = pyText(name);
    Py_XDECREF(filename);
    Py_XDECREF(name);
    info.internal = info.fileText.empty() || info.fileText[0] == '<';
    for (const std::string& prefix : m_internal)
        if (info.fileText.starts_with(prefix)) info.internal = true;
    for (const std::string& prefix : m_own)
        if (info.fileText.starts_with(prefix)) info.own = info.internal = true;
    info.file = writer.intern(info.fileText);
    info.function = writer.intern(function);
    info.functionText = std::move(function);
    CodeInfo& added = m_codes.emplace(code, std::move(info)).first->second;
    m_codeFront.remember(code, &added);
    return added;
}

#ifdef MESHSCOPE_FAST_FRAMES
namespace {

struct RawFrame {
    PyCodeObject* code;
    PyObject* globals;
    int lasti;  // byte offset of the current instruction
};

// Calls visit(frame) from the innermost frame outwards until it returns
// false, skipping the frames skip(code) names first: that test reads only
// the frame, while telling a frame that has not started yet reads its code
// object, one cache line more per frame of each op's walk.
template <typename Skip, typename Visit>
void walkFrames(Skip&& skip, Visit&& visit) {
    PyThreadState* state = PyThreadState_Get();
    for (_PyInterpreterFrame* f = state ? state->cframe->current_frame : nullptr; f;
         f = f->previous) {
        if (skip(f->f_code) || _PyFrame_IsIncomplete(f)) continue;
        int lasti = _PyInterpreterFrame_LASTI(f) * int(sizeof(_Py_CODEUNIT));
        if (!visit(RawFrame{f->f_code, f->f_globals, lasti})) return;
    }
}

template <typename Visit>
void walkFrames(Visit&& visit) {
    walkFrames([](const PyCodeObject*) { return false; }, std::forward<Visit>(visit));
}

}  // namespace

template <typename Found>
void FrameCache::visitUserFrame(RankWriter& writer, Found&& found) {
    auto internal = [this](const PyCodeObject* code) { return recentlyInternal(code); };
    walkFrames(internal, [&](const RawFrame& f) {
        if (f.code == m_lastUser.code && f.lasti == m_lastUser.lasti) {
            found(*m_lastUser.info, m_lastUser.one, f.globals);
            return false;
        }
        CodeInfo& ci = info(f.code, writer);
        if (ci.internal) {
            rememberInternal(f.code);
            return true;
        }
        // Keyed by instruction offset: the line table is decoded once per call site.
        FrameKey key{ci.code, f.lasti};
        auto it = m_oneFrame.find(key);
        if (it == m_oneFrame.end()) {
            int line = PyCode_Addr2Line(f.code, f.lasti);
            Frame frame{ci.file, line, ci.function};
            it = m_oneFrame
                     .emplace(key,
                              OneFrame{writer.internStack(std::span<const Frame>(&frame, 1)), line})
                     .first;
        }
        m_lastUser = {f.code, f.lasti, &ci, it->second};
        found(ci, it->second, f.globals);
        return false;
    });
}

StackId FrameCache::shortStack(RankWriter& writer, int depth) {
    std::vector<Frame> frames;
    walkFrames([&](const RawFrame& f) {
        CodeInfo& ci = info(f.code, writer);
        if ((frames.empty() && ci.internal) || ci.own) return true;
        frames.push_back(Frame{ci.file, PyCode_Addr2Line(f.code, f.lasti), ci.function});
        return int(frames.size()) < depth;
    });
    return frames.empty() ? StackId{} : writer.internStack(frames);
}

#else  // public API: materializes frame objects

PyFrameObject* FrameCache::firstUserFrame(RankWriter& writer) {
    PyThreadState* state = PyThreadState_Get();
    PyFrameObject* frame = state ? PyThreadState_GetFrame(state) : nullptr;
    while (frame) {
        PyCodeObject* code = PyFrame_GetCode(frame);
        bool internal = info(code, writer).internal;
        Py_DECREF(code);
        if (!internal) return frame;
        PyFrameObject* back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    return nullptr;
}

template <typename Found>
void FrameCache::visitUserFrame(RankWriter& writer, Found&& found) {
    PyFrameObject* frame = firstUserFrame(writer);
    if (!frame) return;
    PyCodeObject* code = PyFrame_GetCode(frame);
    CodeInfo& ci = info(code, writer);
    Py_DECREF(code);
    int line = PyFrame_GetLineNumber(frame);
    FrameKey key{ci.code, line};
    auto it = m_oneFrame.find(key);
    if (it == m_oneFrame.end()) {
        Frame f{ci.file, line, ci.function};
        it = m_oneFrame
                 .emplace(key, OneFrame{writer.internStack(std::span<const Frame>(&f, 1)), line})
                 .first;
    }
    PyObject* globals = PyFrame_GetGlobals(frame);
    found(ci, it->second, globals);
    Py_XDECREF(globals);
    Py_DECREF(frame);
}

StackId FrameCache::shortStack(RankWriter& writer, int depth) {
    std::vector<Frame> frames;
    PyFrameObject* frame = firstUserFrame(writer);
    while (frame && int(frames.size()) < depth) {
        PyCodeObject* code = PyFrame_GetCode(frame);
        CodeInfo& ci = info(code, writer);
        Py_DECREF(code);
        if (!ci.own) frames.push_back(Frame{ci.file, PyFrame_GetLineNumber(frame), ci.function});
        PyFrameObject* back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    return frames.empty() ? StackId{} : writer.internStack(frames);
}

#endif

ThreadStack FrameCache::stackOfThread(unsigned long ident, RankWriter& writer, int depth) {
    ThreadStack out;
    PyRef sys = PyRef::steal(PyImport_ImportModule("sys"));
    PyRef frames =
        sys ? PyRef::steal(PyObject_CallMethod(sys.get(), "_current_frames", nullptr)) : PyRef{};
    PyRef key = PyRef::steal(PyLong_FromUnsignedLong(ident));
    PyObject* top = frames && key && PyDict_Check(frames.get())
                        ? PyDict_GetItemWithError(frames.get(), key.get())  // borrowed
                        : nullptr;
    PyErr_Clear();
    if (!top || !PyFrame_Check(top)) return out;
    std::vector<Frame> stack;
    Py_INCREF(top);
    PyFrameObject* frame = reinterpret_cast<PyFrameObject*>(top);
    while (frame && int(stack.size()) < depth) {
        PyCodeObject* code = PyFrame_GetCode(frame);
        CodeInfo& ci = info(code, writer);
        Py_DECREF(code);
        if (!(stack.empty() && ci.internal) && !ci.own) {
            int line = PyFrame_GetLineNumber(frame);
            if (stack.empty()) out.where = " at " + ci.fileText + ":" + std::to_string(line);
            stack.push_back(Frame{ci.file, line, ci.function});
        }
        PyFrameObject* back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    if (!stack.empty()) out.stack = writer.internStack(stack);
    return out;
}

namespace {

// The key of `mapping` (a dict or a frame-locals proxy) whose value is
// `obj`, or "".
std::string keyHolding(PyObject* mapping, PyObject* obj) {
    PyObject* items = mapping ? PyMapping_Items(mapping) : nullptr;
    if (!items) {
        PyErr_Clear();
        return {};
    }
    std::string name;
    for (Py_ssize_t i = 0; name.empty() && i < PyList_GET_SIZE(items); ++i) {
        PyObject* item = PyList_GET_ITEM(items, i);
        if (PyTuple_GET_ITEM(item, 1) == obj && PyUnicode_Check(PyTuple_GET_ITEM(item, 0)))
            name = pyText(PyTuple_GET_ITEM(item, 0));
    }
    Py_DECREF(items);
    return name;
}

// "mask" when `self` holds `obj` as an attribute, a buffer or a parameter
// (nn.Module keeps those two outside __dict__), else "".
std::string attributeHolding(PyObject* self, PyObject* obj) {
    PyObject* dict = self ? PyObject_GenericGetDict(self, nullptr) : nullptr;
    if (!dict) {
        PyErr_Clear();
        return {};
    }
    std::string name = keyHolding(dict, obj);
    for (const char* inner : {"_buffers", "_parameters"}) {
        if (!name.empty()) break;
        PyObject* d = PyDict_GetItemString(dict, inner);  // borrowed
        if (d && PyDict_Check(d)) name = keyHolding(d, obj);
    }
    // a parameter's gradient: "weight.grad"
    PyObject* params = name.empty() ? PyDict_GetItemString(dict, "_parameters") : nullptr;
    PyObject *key, *param;
    Py_ssize_t pos = 0;
    while (params && PyDict_Check(params) && name.empty() &&
           PyDict_Next(params, &pos, &key, &param)) {
        PyRef grad =
            PyRef::steal(param != Py_None ? PyObject_GetAttrString(param, "grad") : nullptr);
        PyErr_Clear();
        if (grad.get() == obj && PyUnicode_Check(key)) name = pyText(key) + ".grad";
    }
    Py_DECREF(dict);
    return name;
}

// A Keras (torch backend) variable, kept by the model's `_torch_params`
// under its path "d3/kernel": "model.get_layer('d3').kernel"; else "".
std::string kerasVariable(const std::string& name, PyObject* module, const std::string& path,
                          const std::string& attr) {
    size_t slash = attr.rfind('/');
    if (path != "_torch_params" || slash == std::string::npos ||
        !PyObject_HasAttrString(module, "get_layer"))
        return {};
    size_t layer = attr.rfind('/', slash - 1);
    layer = layer == std::string::npos ? 0 : layer + 1;
    return name + ".get_layer('" + attr.substr(layer, slash - layer) + "')." +
           attr.substr(slash + 1);
}

// "model.layers.3.attn.mask" when a submodule of `module` (named `name`)
// holds `obj` (the module itself: "model.mask"), else "".
std::string moduleHolding(const std::string& name, PyObject* module, PyObject* obj) {
    constexpr Py_ssize_t kMaxModules = 20000;
    PyRef modules = PyRef::steal(PyObject_CallMethod(module, "named_modules", nullptr));
    PyRef iter = modules ? PyRef::steal(PyObject_GetIter(modules.get())) : PyRef{};
    std::string found;
    for (Py_ssize_t n = 0; iter && found.empty() && n < kMaxModules; ++n) {
        PyRef item = PyRef::steal(PyIter_Next(iter.get()));
        if (!item) break;
        if (!PyTuple_Check(item.get()) || PyTuple_GET_SIZE(item.get()) != 2) continue;
        std::string attr = attributeHolding(PyTuple_GET_ITEM(item.get(), 1), obj);
        if (attr.empty()) continue;
        std::string path = PyUnicode_Check(PyTuple_GET_ITEM(item.get(), 0))
                               ? pyText(PyTuple_GET_ITEM(item.get(), 0))
                               : std::string();
        found = kerasVariable(name, module, path, attr);
        if (found.empty()) found = name + "." + (path.empty() ? "" : path + ".") + attr;
    }
    PyErr_Clear();
    return found;
}

// "batch['labels']" / "outputs[0]" when a dict, list or tuple held by a
// local variable holds `obj`, else "".
std::string itemHolding(const std::string& name, PyObject* container, PyObject* obj) {
    constexpr Py_ssize_t kMaxItems = 256;
    if (PyDict_Check(container)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        for (Py_ssize_t n = 0; n < kMaxItems && PyDict_Next(container, &pos, &key, &value); ++n) {
            if (value != obj) continue;
            PyRef repr = PyRef::steal(PyObject_Repr(key));
            const char* text = repr ? PyUnicode_AsUTF8(repr.get()) : nullptr;
            PyErr_Clear();
            return text ? name + "[" + text + "]" : std::string();
        }
    } else if (PyList_Check(container) || PyTuple_Check(container)) {
        Py_ssize_t size = PySequence_Fast_GET_SIZE(container);
        for (Py_ssize_t i = 0; i < size && i < kMaxItems; ++i)
            if (PySequence_Fast_GET_ITEM(container, i) == obj)
                return name + "[" + std::to_string(i) + "]";
    }
    return {};
}

// The user's name for `obj` among a frame's locals: the variable itself,
// else an attribute of `self` ("self.mask"), an item of a local container
// ("batch['labels']"), or an attribute of a local module or its
// submodules ("model.layers.3.attn.mask").
std::string localHolding(PyObject* locals, PyObject* obj, bool withSelf) {
    std::string name = keyHolding(locals, obj);
    PyObject* items = name.empty() && locals ? PyMapping_Items(locals) : nullptr;
    if (!items) {
        PyErr_Clear();
        return name;
    }
    Py_ssize_t count = PyList_GET_SIZE(items);
    auto each = [&](auto&& holding) {
        for (Py_ssize_t i = 0; name.empty() && i < count; ++i) {
            PyObject* item = PyList_GET_ITEM(items, i);
            PyObject* key = PyTuple_GET_ITEM(item, 0);
            if (!PyUnicode_Check(key)) continue;
            std::string local = pyText(key);
            if (local == "self" && !withSelf) continue;
            name = holding(local, PyTuple_GET_ITEM(item, 1));
        }
    };
    if (withSelf)
        each([&](const std::string& local, PyObject* value) {
            std::string attr = local == "self" ? attributeHolding(value, obj) : std::string();
            return attr.empty() ? attr : "self." + attr;
        });
    each([&](const std::string& local, PyObject* value) { return itemHolding(local, value, obj); });
    each([&](const std::string& local, PyObject* value) {
        return isNnInstance(value, "Module") ? moduleHolding(local, value, obj) : std::string();
    });
    Py_DECREF(items);
    return name;
}

}  // namespace

template <typename Visit>
void FrameCache::eachUserFrame(RankWriter& writer, int onlyDepth, Visit&& visit) {
    constexpr int kUserFrames = 3;
    PyThreadState* state = PyThreadState_Get();
    PyFrameObject* frame = state ? PyThreadState_GetFrame(state) : nullptr;
    int last = onlyDepth > 0 ? onlyDepth : kUserFrames;
    bool done = false;
    for (int seen = 0; frame && !done && seen < last;) {
        PyCodeObject* code = PyFrame_GetCode(frame);
        const CodeInfo& ci = info(code, writer);
        Py_DECREF(code);
        if (!ci.internal && !ci.own && (++seen == onlyDepth || onlyDepth <= 0)) {
            PyObject* locals = PyFrame_GetLocals(frame);
            if (!locals) PyErr_Clear();
            done = visit(frame, locals, seen, ci, PyFrame_GetLineNumber(frame));
            Py_XDECREF(locals);
        }
        PyFrameObject* back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
}

FrameCache::Holding FrameCache::holding(PyObject* obj, RankWriter& writer, int onlyDepth) {
    Holding out;
    eachUserFrame(
        writer, onlyDepth,
        [&](PyFrameObject* frame, PyObject* locals, int depth, const CodeInfo& ci, int line) {
            out.name = localHolding(locals, obj, depth == 1);
            // else, in the innermost frame, a global of its module
            // (a tensor a hook function reads from its module)
            if (out.name.empty() && depth == 1) {
                PyObject* globals = PyFrame_GetGlobals(frame);
                out.name = keyHolding(globals, obj);
                Py_XDECREF(globals);
                out.global = !out.name.empty() && ci.functionText != "<module>";
            }
            if (out.name.empty()) return false;
            out.depth = depth;
            out.file = ci.fileText;
            out.line = line;
            return true;
        });
    return out;
}

std::string FrameCache::meshVia(PyObject* mesh, RankWriter& writer, int depth) {
    std::string name;
    eachUserFrame(writer, depth, [&](PyFrameObject*, PyObject* locals, int, const CodeInfo&, int) {
        PyObject* items = locals ? PyMapping_Items(locals) : nullptr;
        if (!items) {
            PyErr_Clear();
            return false;
        }
        for (Py_ssize_t i = 0; name.empty() && i < PyList_GET_SIZE(items); ++i) {
            PyObject* item = PyList_GET_ITEM(items, i);
            PyObject* key = PyTuple_GET_ITEM(item, 0);
            PyObject* value = PyTuple_GET_ITEM(item, 1);
            if (!PyUnicode_Check(key) || (!isNnInstance(value, "Parameter") &&
                                          !PyObject_HasAttrString(value, "_local_tensor")))
                continue;
            PyRef of = PyRef::steal(PyObject_GetAttrString(value, "device_mesh"));
            if (!of) PyErr_Clear();
            if (of.get() == mesh) name = pyText(key) + ".device_mesh";
        }
        Py_DECREF(items);
        // else a DTensor parameter of the frame's module ("self.embed.weight")
        PyObject* self = name.empty() && locals ? PyMapping_GetItemString(locals, "self") : nullptr;
        if (!self) PyErr_Clear();
        if (self && isNnInstance(self, "Module")) {
            PyRef named = PyRef::steal(PyObject_CallMethod(self, "named_parameters", nullptr));
            PyRef it = named ? PyRef::steal(PyObject_GetIter(named.get())) : PyRef{};
            for (PyRef item; it && name.empty() && (item = PyRef::steal(PyIter_Next(it.get())));) {
                if (!PyTuple_Check(item.get()) || PyTuple_GET_SIZE(item.get()) != 2) continue;
                PyRef of = PyRef::steal(
                    PyObject_GetAttrString(PyTuple_GET_ITEM(item.get(), 1), "device_mesh"));
                if (!of) PyErr_Clear();
                std::string path =
                    pythonReference("self." + pyText(PyTuple_GET_ITEM(item.get(), 0)));
                if (of.get() == mesh && !path.empty()) name = path + ".device_mesh";
            }
            PyErr_Clear();
        }
        Py_XDECREF(self);
        return true;
    });
    return name;
}

MESHSCOPE_HOT UserFrame FrameCache::userFrame(RankWriter& writer, bool withModule) {
    UserFrame out;
    visitUserFrame(writer, [&](const CodeInfo& ci, const OneFrame& one, PyObject* globals) {
        out.file = ci.fileText;
        out.function = ci.functionText;
        out.line = one.line;
        out.stack = one.stack;
        if (withModule && globals) {
            PyObject* name = PyDict_GetItemString(globals, "__name__");
            out.module = name ? pyText(name) : "";
        }
    });
    return out;
}

MESHSCOPE_HOT StackId FrameCache::userStack(RankWriter& writer) {
    StackId stack;
    visitUserFrame(writer,
                   [&](const CodeInfo&, const OneFrame& one, PyObject*) { stack = one.stack; });
    return stack;
}

bool FrameCache::innermostIsUser(RankWriter& writer) {
    PyFrameObject* frame = PyEval_GetFrame();  // borrowed
    if (!frame) return false;
    PyCodeObject* code = PyFrame_GetCode(frame);
    bool user = !info(code, writer).internal;
    Py_DECREF(code);
    return user;
}

std::string FrameCache::whereOf(StackId stack) const {
    for (const auto& [key, one] : m_oneFrame) {
        if (one.stack != stack) continue;
        auto code = m_codes.find(static_cast<PyCodeObject*>(const_cast<void*>(key.code)));
        if (code == m_codes.end()) return {};
        return " at " + code->second.fileText + ":" + std::to_string(one.line);
    }
    return {};
}

}  // namespace meshscope::capture
